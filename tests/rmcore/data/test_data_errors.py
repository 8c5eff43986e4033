"""Bad input: every error names file, row and field; on_bad="skip" drops and counts instead."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rmcore.data.generic import load_generic
from rmcore.data.helpsteer import load_helpsteer2
from rmcore.data.loading import known_loaders, load_rating_set, register_loader, validate_rating_set
from rmcore.data.preference_sets import load_rm_bench
from rmcore.data.schema import PromptRecord, RatingSet, Response
from rmcore.errors import ConfigError, DataError

COLS = {"prompt_id": "qid", "prompt": "question", "response": "answer", "ratings": {"score": "helpfulness"}}


def _jsonl(path: Path, rows: list[dict | str]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


GOOD = [{"qid": "q1", "question": "What is 2+2?", "answer": "4", "score": 4},
        {"qid": "q1", "question": "What is 2+2?", "answer": "5", "score": 0},
        {"qid": "q2", "question": "Capital of France?", "answer": "Paris", "score": 4},
        {"qid": "q2", "question": "Capital of France?", "answer": "Lyon", "score": 1}]


def test_generic_good_file(tmp_path: Path):
    rs = load_rating_set({"name": "generic", "path": str(_jsonl(tmp_path / "g.jsonl", GOOD)), "columns": COLS})
    assert [p.prompt_id for p in rs.prompts] == ["q1", "q2"]
    assert [r.ratings["helpfulness"] for r in rs.prompts[1].responses] == [4.0, 1.0]
    assert rs.attributes == ("helpfulness",) and rs.skipped == {}
    # without a prompt_id column, rows group by prompt text (non-consecutive rows too)
    cols = {k: v for k, v in COLS.items() if k != "prompt_id"}
    rows = [GOOD[0], GOOD[2], GOOD[1], GOOD[3]]
    rs2 = load_generic(_jsonl(tmp_path / "h.jsonl", rows), cols)
    assert [(p.prompt_id, len(p.responses)) for p in rs2.prompts] == [("p00000", 2), ("p00001", 2)]


@pytest.mark.parametrize("bad, field", [({"score": "four"}, "score"), ({"score": None}, "score"),
                                        ({"answer": ""}, "answer"), ({"question": "  "}, "question")])
def test_generic_bad_row_named(tmp_path: Path, bad: dict, field: str):
    rows = [dict(r) for r in GOOD]
    rows[2].update(bad)  # line 3
    path = _jsonl(tmp_path / "g.jsonl", rows)
    with pytest.raises(DataError) as e:
        load_generic(path, COLS)
    assert (e.value.file, e.value.row, e.value.field) == (str(path), 3, field)
    assert str(path) in str(e.value) and "row 3" in str(e.value) and field in str(e.value)
    # skip: the bad row is dropped and counted; q2 then has one response -> dropped by validation
    rs = load_rating_set({"name": "generic", "path": str(path), "columns": COLS, "on_bad": "skip"})
    assert rs.skipped[f"bad_{field}"] == 1 and rs.skipped["too_few_responses"] == 1
    assert [p.prompt_id for p in rs.prompts] == ["q1"]


def test_csv_and_parquet_row_numbers(tmp_path: Path):
    rows = [dict(r) for r in GOOD]
    rows[1]["score"] = None
    csv = tmp_path / "g.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    with pytest.raises(DataError, match=r"row 3.*'score'") as e:  # header is line 1
        load_generic(csv, COLS)
    assert "rating is not a finite number, got nan" in str(e.value)  # an empty csv cell reads as NaN
    pq = tmp_path / "g.parquet"
    pd.DataFrame(rows).to_parquet(pq, index=False)
    with pytest.raises(DataError) as e:
        load_generic(pq, COLS)
    assert (e.value.row, e.value.field) == (2, "score")


def test_single_response_prompt_names_row(tmp_path: Path):
    path = _jsonl(tmp_path / "g.jsonl", GOOD[:3])  # q2 has only "Paris" (line 3)
    with pytest.raises(DataError) as e:
        load_rating_set({"name": "generic", "path": str(path), "columns": COLS})
    assert (e.value.file, e.value.row) == (str(path), 3) and "1 valid response" in str(e.value)
    assert len(load_rating_set({"name": "generic", "path": str(path), "columns": COLS,
                                "min_responses": 1})) == 2


def test_duplicate_ids(tmp_path: Path):
    cols = dict(COLS, response_id="rid")
    rows = [dict(r, rid=f"a{i}") for i, r in enumerate(GOOD)]
    rows[3]["rid"] = "a2"  # same id as line 3, same prompt
    path = _jsonl(tmp_path / "g.jsonl", rows)
    with pytest.raises(DataError) as e:
        load_rating_set({"name": "generic", "path": str(path), "columns": cols})
    assert (e.value.row, e.value.field) == (4, "response_id")
    rs = load_rating_set({"name": "generic", "path": str(path), "columns": cols, "on_bad": "skip"})
    assert rs.skipped == {"duplicate_response_id": 1, "too_few_responses": 1}
    # one prompt_id naming two different prompts
    rows = [dict(r) for r in GOOD]
    rows[1]["question"] = "What is 3+3?"
    with pytest.raises(DataError, match="different prompt") as e:
        load_generic(_jsonl(tmp_path / "h.jsonl", rows), COLS)
    assert (e.value.row, e.value.field) == (2, "qid")


def test_validate_in_memory_set():
    def resp(rid, text, h):
        return Response(rid, text, {"helpfulness": h}, meta={"source_file": "mem", "source_row": int(rid[-1])})
    rs = RatingSet([PromptRecord("p", [{"role": "user", "content": "x"}],
                                 [resp("r1", "ok", 1.0), resp("r2", "fine", float("nan")), resp("r3", "", 2.0),
                                  resp("r4", "good", 3.0)])], attributes=("helpfulness",))
    with pytest.raises(DataError) as e:
        validate_rating_set(rs)
    assert (e.value.file, e.value.row, e.value.field) == ("mem", 2, "helpfulness")
    validate_rating_set(rs, on_bad="skip")
    assert rs.skipped == {"bad_rating_helpfulness": 1, "empty_response": 1}
    assert [r.response_id for r in rs.prompts[0].responses] == ["r1", "r4"]


def test_bad_json_line_and_strength(tmp_path: Path):
    path = _jsonl(tmp_path / "hs2.jsonl", [{"prompt": "a", "response": "b", "helpfulness": 1, "correctness": 1,
                                            "coherence": 1, "complexity": 1, "verbosity": 1}, "{not json"])
    with pytest.raises(DataError, match="row 2"):
        load_helpsteer2(path)
    ok = [{"prompt": "a", "response": t, "helpfulness": 1, "correctness": 1, "coherence": 1, "complexity": 1,
           "verbosity": "x" if t == "c" else 1} for t in ("b", "c")]
    with pytest.raises(DataError) as e:
        load_helpsteer2(_jsonl(tmp_path / "r.jsonl", ok))
    assert (e.value.row, e.value.field) == (2, "verbosity")
    good = _jsonl(tmp_path / "g.jsonl", [dict(ok[0]), dict(ok[1], verbosity=2)])
    pref = _jsonl(tmp_path / "p.jsonl", [{"split": "train", "prompt": "a", "response_1": "b", "response_2": "c",
                                          "preference_strength": 5}])
    with pytest.raises(DataError) as e:
        load_helpsteer2(good, preference_path=pref)
    assert (e.value.file, e.value.row, e.value.field) == (str(pref), 1, "preference_strength")
    rs = load_helpsteer2(good, preference_path=pref, on_bad="skip")
    assert rs.skipped["bad_preference_preference_strength"] == 1 and rs.preferences == []


def test_rm_bench_bad_row(tmp_path: Path):
    path = tmp_path / "chat_filtered.json"
    path.write_text(json.dumps([{"id": 1, "prompt": "p", "subset": "alpacaeval", "chosen": ["a", "b", "c"],
                                 "rejected": ["d", "e", "f"]},
                                {"id": 2, "prompt": "q", "subset": "alpacaeval", "chosen": ["a", "b"],
                                 "rejected": ["d", "e", "f"]}]))
    with pytest.raises(DataError) as e:
        load_rm_bench(path)
    assert (e.value.row, e.value.field) == (2, "chosen")


def test_registry_errors():
    with pytest.raises(ConfigError) as e:
        load_rating_set({"name": "helpsteer3"})
    for name in ("generic", "helpsteer", "helpsteer2", "hh_rlhf", "rm_bench", "simulated"):
        assert name in str(e.value)
    with pytest.raises(ConfigError, match="n_promts"):
        load_rating_set({"name": "simulated", "n_promts": 10})
    with pytest.raises(ConfigError, match="path"):
        load_rating_set({"name": "rm_bench"})
    with pytest.raises(ValueError, match="on_bad"):
        load_rating_set({"name": "simulated", "on_bad": "ignore"})
    assert len(load_rating_set({"name": "simulated", "n_prompts": 30})) == 30
    assert len(load_rating_set("simulated")) == 600


def test_register_custom_loader():
    from rmcore.data.loading import LOADERS

    @register_loader("tiny_test_set")
    def _tiny(spec):
        return RatingSet([PromptRecord("p", [{"role": "user", "content": "x"}],
                                       [Response("a", "t", {}), Response("b", "u", {})])])
    try:
        assert "tiny_test_set" in known_loaders()
        assert len(load_rating_set("tiny_test_set")) == 1
    finally:
        LOADERS.pop("tiny_test_set")
