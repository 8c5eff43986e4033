"""HelpSteer2 / HelpSteer loaders on small files written here in the real schema."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from rmcore.data import helpsteer
from rmcore.data.helpsteer import load_helpsteer, load_helpsteer2, parse_helpsteer_prompt
from rmcore.data.loading import load_rating_set
from rmcore.data.pairs import build_pairs
from rmcore.io.files import is_hub_id

MULTI = "Hi there\n<extra_id_1>Assistant\nHello! How can I help?\n<extra_id_1>User\nExplain TCP handshakes"


def _row(prompt: str, response: str, h: int, c: int = 3, co: int = 4, cx: int = 1, v: int = 2) -> dict:
    return {"prompt": prompt, "response": response, "helpfulness": h, "correctness": c, "coherence": co,
            "complexity": cx, "verbosity": v}


# 4 prompt groups: "c#" appears again after another prompt -> a separate record (consecutive grouping)
ROWS = [
    _row("c#", "C# is a language by Microsoft.", 3),
    _row("c#", "I don't know.", 1, c=0),
    _row(MULTI, "SYN, SYN-ACK, ACK.", 4),
    _row(MULTI, "It is a network thing.", 2),
    _row("Name a prime", "7", 2),
    _row("Name a prime", "Eleven", 2),
    _row("c#", "C sharp, a .NET language.", 3),
    _row("c#", "A musical note.", 0),
]
PREFS = [
    # train rows: c# (strength -2: response_1 better), MULTI (3: response_2 better), prime (0: tie)
    {"split": "train", "prompt": "c#", "response_1": "C# is a language by Microsoft.",
     "response_2": "I don't know.", "preference_strength": -2},
    {"split": "train", "prompt": MULTI, "response_1": "SYN, SYN-ACK, ACK.",
     "response_2": "It is a network thing.", "preference_strength": 3},
    {"split": "train", "prompt": "Name a prime", "response_1": "7", "response_2": "Eleven",
     "preference_strength": 0},
    # matches no loaded response -> counted as unmatched
    {"split": "train", "prompt": "c#", "response_1": "C# is a language by Microsoft.",
     "response_2": "not in the ratings file", "preference_strength": 1},
    # the second "c#" group: only matches there (first group lacks these texts)
    {"split": "train", "prompt": "c#", "response_1": "C sharp, a .NET language.",
     "response_2": "A musical note.", "preference_strength": -1},
    # another split: ignored for split="train"
    {"split": "validation", "prompt": "c#", "response_1": "I don't know.",
     "response_2": "C# is a language by Microsoft.", "preference_strength": -3},
]
for p in PREFS:  # the released file's extra columns
    p.update(preference_statement="@Response 1 is better", preference_elaboration="because",
             three_most_similar_preferences=[], all_preferences_unprocessed=[])


def write(path: Path, rows: list[dict]) -> Path:
    if path.name.endswith(".parquet"):
        pd.DataFrame(rows).to_parquet(path, index=False)
    else:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "wt", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return path


@pytest.fixture(params=["hs2.jsonl", "hs2.jsonl.gz", "hs2.parquet"])
def hs2_file(request, tmp_path: Path) -> Path:
    return write(tmp_path / request.param, ROWS)


@pytest.fixture
def pref_file(tmp_path: Path) -> Path:
    return write(tmp_path / "preference.jsonl.gz", PREFS)


def test_parse_multi_turn_prompt():
    assert parse_helpsteer_prompt("c#") == [{"role": "user", "content": "c#"}]
    assert parse_helpsteer_prompt(MULTI) == [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Explain TCP handshakes"},
    ]
    with pytest.raises(ValueError):
        parse_helpsteer_prompt("a\n<extra_id_1>Assistant\nb")  # ends with assistant
    with pytest.raises(ValueError):
        parse_helpsteer_prompt("a\n<extra_id_1>User\nb")  # two user turns in a row


def test_helpsteer2_groups_consecutive_prompts(hs2_file: Path):
    rs = load_helpsteer2(hs2_file, "train")
    assert [p.prompt_id for p in rs.prompts] == ["train-00000", "train-00001", "train-00002", "train-00003"]
    assert [len(p.responses) for p in rs.prompts] == [2, 2, 2, 2]
    assert rs.prompts[0].messages == rs.prompts[3].messages == [{"role": "user", "content": "c#"}]
    multi = rs.prompts[1]
    assert multi.turns == 2 and not multi.single_turn
    assert [m["role"] for m in multi.messages] == ["user", "assistant", "user"]
    assert multi.last_user_text == "Explain TCP handshakes"
    r = rs.prompts[0].responses[1]
    assert r.response_id == "train-00000:r1" and r.text == "I don't know."
    assert r.ratings == {"helpfulness": 1.0, "correctness": 0.0, "coherence": 4.0, "complexity": 1.0,
                         "verbosity": 2.0}
    assert rs.attributes == ("helpfulness", "correctness", "coherence", "complexity", "verbosity")
    assert r.meta["source_row"] == 2
    assert rs.summary()["n_multi_turn"] == 1


def test_helpsteer2_preferences_attached(hs2_file: Path, pref_file: Path):
    rs = load_helpsteer2(hs2_file, "train", preference_path=pref_file)
    got = [(q.prompt_id, q.chosen_id, q.rejected_id, q.strength) for q in rs.preferences]
    assert got == [
        ("train-00000", "train-00000:r0", "train-00000:r1", 2),
        ("train-00001", "train-00001:r1", "train-00001:r0", 3),
        ("train-00003", "train-00003:r0", "train-00003:r1", 1),
    ]
    assert rs.skipped["preference_tie"] == 1
    assert rs.skipped["preference_unmatched"] == 1
    # released labels drive the pairs; gaps come from helpfulness ratings (hand-derived)
    ps = build_pairs(rs, "helpfulness")
    assert ps.label_source == "preference"
    assert [(p.chosen_id, p.gap, p.strength) for p in ps.pairs] == [
        ("train-00000:r0", 2.0, 2), ("train-00001:r1", -2.0, 3), ("train-00003:r0", 3.0, 1)]
    assert ps.n_prompts_without_pairs == 1  # the tied "Name a prime" prompt
    # ratings-only pairs: 3 of 4 prompts have distinct helpfulness; "Name a prime" is a tie
    pr = build_pairs(rs, "helpfulness", use_released=False)
    assert len(pr) == 3 and pr.n_ties_dropped == 1
    assert [(p.chosen_id, p.rejected_id, p.gap) for p in pr.pairs] == [
        ("train-00000:r0", "train-00000:r1", 2.0), ("train-00001:r0", "train-00001:r1", 2.0),
        ("train-00003:r0", "train-00003:r1", 3.0)]


def test_validation_split_preferences(tmp_path: Path, pref_file: Path):
    write(tmp_path / "val.jsonl", ROWS[:2])
    rs = load_helpsteer2(tmp_path / "val.jsonl", "validation", preference_path=pref_file)
    # only the validation row is used; it says response_1 ("I don't know.", r1) is much better
    assert [(q.chosen_id, q.rejected_id, q.strength) for q in rs.preferences] == [
        ("validation-00000:r1", "validation-00000:r0", 3)]


def test_limit_keeps_whole_prompts(hs2_file: Path):
    rs = load_helpsteer2(hs2_file, limit=2)
    assert len(rs) == 2 and rs.n_responses == 4


def test_helpsteer_v1_four_responses(tmp_path: Path):
    rows = [_row("Write a haiku", f"haiku {i}", h) for i, h in enumerate([4, 2, 2, 0])]
    rows += [_row("Say hi", "hi", 3), _row("Say hi", "hello", 4), _row("Say hi", "yo", 1)]
    rs = load_helpsteer(write(tmp_path / "hs.parquet", rows), "validation")
    assert rs.name == "helpsteer-validation"
    assert [len(p.responses) for p in rs.prompts] == [4, 3]
    ps = build_pairs(rs)
    # prompt 1: 6 pairs minus 1 tie (2,2); prompt 2: 3 pairs
    assert len(ps) == 8 and ps.n_ties_dropped == 1
    assert ("validation-00001:r1", "validation-00001:r2", 3.0) in [
        (p.chosen_id, p.rejected_id, p.gap) for p in ps.pairs]


def test_registry_spec(hs2_file: Path, pref_file: Path):
    rs = load_rating_set({"name": "helpsteer2", "path": str(hs2_file), "split": "train",
                          "preference_path": str(pref_file), "limit": 3})
    assert len(rs) == 3 and len(rs.preferences) == 2


def test_hub_ids_use_hub_code(monkeypatch, tmp_path: Path):
    """A Hub id goes through datasets.load_dataset / hf_hub_download (stubbed: no network here)."""
    assert is_hub_id("nvidia/HelpSteer2") and not is_hub_id(tmp_path / "x.jsonl")
    assert not is_hub_id("data/missing.jsonl")
    calls = []

    def fake_load_dataset(repo, split=None, **kw):
        calls.append((repo, split, kw))
        return ROWS[:4]

    import datasets
    import huggingface_hub

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    pref_local = write(tmp_path / "p.jsonl.gz", PREFS)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download",
                        lambda repo_id, filename, repo_type: calls.append((repo_id, filename, repo_type))
                        or str(pref_local))
    rs = load_helpsteer2("nvidia/HelpSteer2", "train", preference_path="hub")
    assert calls[0] == ("nvidia/HelpSteer2", "train", {})
    assert calls[1] == ("nvidia/HelpSteer2", helpsteer.PREFERENCE_FILE, "dataset")
    assert len(rs) == 2 and len(rs.preferences) == 2
    assert rs.prompts[0].meta["source_file"] == "nvidia/HelpSteer2[train]"


def test_missing_local_file_is_not_a_hub_call(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        load_helpsteer2(tmp_path / "nope.jsonl.gz")


def test_preference_file_split_named_val(tmp_path: Path):
    """The released preference file may call the validation split 'val'."""
    write(tmp_path / "val.jsonl", ROWS[:2])
    prefs = [dict(PREFS[-1], split="val")]
    rs = load_helpsteer2(tmp_path / "val.jsonl", "validation", preference_path=write(tmp_path / "p.jsonl", prefs))
    assert [(q.chosen_id, q.rejected_id) for q in rs.preferences] == [("validation-00000:r1", "validation-00000:r0")]


def test_round_trip_through_helpsteer_rows(tmp_path: Path):
    """A rating set written as HelpSteer2 rows (multi-turn prompts with <extra_id_1> separators)
    loads back with the same conversations, responses and ratings."""
    from rmcore.data.helpsteer import helpsteer_rows_from
    from rmcore.data.simulated import simulate_rating_set

    rs = simulate_rating_set(n_prompts=12, responses_per_prompt=2, multi_turn_fraction=0.5, seed=3)
    assert any(not p.single_turn for p in rs.prompts)
    back = load_helpsteer2(write(tmp_path / "rt.jsonl", helpsteer_rows_from(rs)), "train")
    assert [p.messages for p in back.prompts] == [p.messages for p in rs.prompts]
    assert [[r.text for r in p.responses] for p in back.prompts] == [[r.text for r in p.responses] for p in rs.prompts]
    assert ([[r.ratings for r in p.responses] for p in back.prompts]
            == [[r.ratings for r in p.responses] for p in rs.prompts])
