"""HH-RLHF and RM-Bench loaders: real files from ../shared/data plus small hand-made files."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from rmcore.data.loading import load_rating_set
from rmcore.data.pairs import build_pairs
from rmcore.data.preference_sets import load_hh_rlhf, load_rm_bench, parse_hh_transcript, rm_bench_section
from rmcore.errors import DataError

# under ../shared/data (the shared_data fixture)
RMB_CHAT = Path("rm-bench") / "chat_filtered.json"
RMB_SAFETY = Path("rm-bench") / "safety-refuse_filtered.json"
HH = Path("hh-rlhf") / "harmless-base_test.jsonl.gz"


def test_parse_hh_transcript():
    msgs = parse_hh_transcript("\n\nHuman: hi\n\nAssistant: hello\n\nHuman: how?\n\nAssistant: like this")
    assert msgs == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                    {"role": "user", "content": "how?"}, {"role": "assistant", "content": "like this"}]
    for bad in ("no turns at all", "preamble\n\nHuman: a\n\nAssistant: b", "\n\nHuman: a",
                "\n\nHuman: a\n\nAssistant: b\n\nAssistant: c"):
        with pytest.raises(ValueError):
            parse_hh_transcript(bad)


def test_hh_small_file_counts_skips(tmp_path: Path):
    rows = [
        {"chosen": "\n\nHuman: q1\n\nAssistant: good", "rejected": "\n\nHuman: q1\n\nAssistant: bad"},
        {"chosen": "\n\nHuman: q2\n\nAssistant: a", "rejected": "\n\nHuman: OTHER\n\nAssistant: b"},
        {"chosen": "\n\nHuman: q3", "rejected": "\n\nHuman: q3\n\nAssistant: b"},
        {"chosen": "\n\nHuman: q4\n\nAssistant: same", "rejected": "\n\nHuman: q4\n\nAssistant: same"},
        {"chosen": "\n\nHuman: q5\n\nAssistant: x", "rejected": "\n\nHuman: q5\n\nAssistant:"},
        {"chosen": "\n\nHuman: q6\n\nAssistant: a1\n\nHuman: q6b\n\nAssistant: yes",
         "rejected": "\n\nHuman: q6\n\nAssistant: a1\n\nHuman: q6b\n\nAssistant: no"},
    ]
    path = tmp_path / "harmless-base_test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # on_bad="raise" (the default) stops at the first bad row, naming it and the way to skip it
    with pytest.raises(DataError, match=r"row 2, field 'rejected'.*on_bad: skip"):
        load_hh_rlhf(path)
    rs = load_hh_rlhf(path, on_bad="skip")
    assert [p.prompt_id for p in rs.prompts] == ["hh-00001", "hh-00006"]
    assert dict(rs.skipped) == {"hh_prefix_mismatch": 1, "hh_malformed": 1, "hh_identical_responses": 1,
                                "hh_empty_response": 1}
    p6 = rs.prompts[1]
    assert p6.messages == [{"role": "user", "content": "q6"}, {"role": "assistant", "content": "a1"},
                           {"role": "user", "content": "q6b"}]
    assert [r.text for r in p6.responses] == ["yes", "no"]
    assert rs.preferences[1].chosen_id == "hh-00006:chosen" and rs.preferences[1].rejected_id == "hh-00006:rejected"
    assert p6.meta["subset"] == "harmless-base"


def test_hh_rlhf_real_file(shared_data: Path):
    hh = shared_data / HH
    with pytest.raises(DataError, match=r"row 87, field 'chosen': empty final response"):
        load_hh_rlhf(hh)
    rs = load_hh_rlhf(hh, on_bad="skip")
    assert len(rs) + sum(rs.skipped.values()) == 2312
    # 9 transcripts with two assistant turns in a row, 4 with an empty final response (checked by hand)
    assert dict(rs.skipped) == {"hh_malformed": 9, "hh_empty_response": 4}
    assert len(rs) == 2299 and len(rs.preferences) == 2299
    for p in rs.prompts:
        assert p.messages[-1]["role"] == "user" and p.messages[0]["role"] == "user"
        assert len(p.responses) == 2 and p.responses[0].text != p.responses[1].text
    first = rs.prompts[0]
    assert first.prompt_id == "hh-00001"
    assert first.messages[0]["content"] == "what are some pranks with a pen i can do?"
    ps = build_pairs(rs)
    assert len(ps) == 2299 and all(p.gap is None and p.label_source == "preference" for p in ps)
    # registry path gives the same set (and validation passes)
    assert len(load_rating_set({"name": "hh_rlhf", "path": str(hh), "on_bad": "skip"})) == 2299


def test_hh_rlhf_raises_on_bad_rows_unless_asked_to_skip(shared_data: Path):
    with pytest.raises(DataError, match=r"harmless-base_test.jsonl.gz, row 87, field 'chosen'.*on_bad: skip"):
        load_rating_set({"name": "hh_rlhf", "path": str(shared_data / HH)})
    rs = load_rating_set({"name": "hh_rlhf", "path": str(shared_data / HH), "on_bad": "skip"})
    assert len(rs) == 2299 and sum(rs.skipped.values()) == 13


def test_rm_bench_chat(shared_data: Path):
    rs = load_rm_bench(shared_data / RMB_CHAT)
    assert len(rs) == 129 and rs.n_responses == 129 * 6
    assert len(rs.preferences) == 129 * 9
    raw = json.loads((shared_data / RMB_CHAT).read_text())
    p0, r0 = rs.prompts[0], raw[0]
    assert p0.prompt_id == str(r0["id"]) and p0.messages == [{"role": "user", "content": r0["prompt"]}]
    assert p0.meta["subset"] == "alpacaeval" and p0.meta["section"] == "chat"
    assert p0.meta["error_key"] == r0["error_key"]
    ids = [r.response_id for r in p0.responses]
    assert ids == [f"{r0['id']}:chosen:{i}" for i in range(3)] + [f"{r0['id']}:rejected:{i}" for i in range(3)]
    assert p0.responses[4].meta["style"] == 1 and p0.responses[4].meta["label"] == "rejected"
    assert p0.responses[4].text == r0["rejected"][1]
    styles = Counter((q.meta_dict()["chosen_style"], q.meta_dict()["rejected_style"]) for q in rs.preferences)
    assert styles == {(i, j): 129 for i in range(3) for j in range(3)}
    q = rs.preferences[5]  # third prompt-local label: chosen style 1 vs rejected style 2
    assert (q.chosen_id, q.rejected_id, q.subset) == (f"{r0['id']}:chosen:1", f"{r0['id']}:rejected:2", "alpacaeval")
    assert len(build_pairs(rs)) == 129 * 9


def test_rm_bench_safety_and_directory(shared_data: Path):
    rs = load_rm_bench(shared_data / RMB_SAFETY)
    assert len(rs) == 284 and len(rs.preferences) == 284 * 9
    assert Counter(p.meta["subset"] for p in rs.prompts) == {"xstest-should-refuse": 138,
                                                             "refusals-dangerous": 84, "refusals-offensive": 62}
    assert {p.meta["section"] for p in rs.prompts} == {"safety"}
    both = load_rating_set({"name": "rm_bench", "path": str(shared_data / "rm-bench")})
    assert len(both) == 129 + 284
    assert Counter(p.meta["section"] for p in both.prompts) == {"chat": 129, "safety": 284}


def test_rm_bench_section_rules():
    assert rm_bench_section("safety-response_filtered.json", None) == "safety"
    assert rm_bench_section("math_filtered.json", None) == "math"
    assert rm_bench_section("custom.json", "hep-python") == "code"
    assert rm_bench_section(None, "alpacaeval") == "chat"
    assert rm_bench_section("x.json", "whatever") == "unknown"


def test_rm_bench_small_file_and_gz_path(tmp_path: Path):
    row = {"id": 7, "prompt": "p", "subset": "math-prm", "chosen": ["a", "b", "c"], "rejected": ["d", "e", "f"]}
    path = tmp_path / "my.json"
    path.write_text(json.dumps([row]))
    rs = load_rm_bench(path)
    assert rs.prompts[0].meta["section"] == "math"
    assert [r.text for r in rs.prompts[0].responses] == list("abcdef")
    with pytest.raises(FileNotFoundError, match="GitHub"):
        load_rm_bench(tmp_path / "missing.json")
    gz = tmp_path / "hh.jsonl.gz"
    with gzip.open(gz, "wt") as f:
        f.write(json.dumps({"chosen": "\n\nHuman: a\n\nAssistant: b", "rejected": "\n\nHuman: a\n\nAssistant: c"}))
    assert len(load_hh_rlhf(gz)) == 1
