from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rmcore.errors import DataError
from rmeval.tables import (
    load_preferences,
    load_ratings,
    load_scores,
    validate_preferences,
    validate_ratings,
    validate_scores,
)


def _ratings(n=20):
    return pd.DataFrame({"prompt_id": [f"p{i // 2}" for i in range(n)], "response_id": [f"r{i}" for i in range(n)],
                         "helpfulness": np.arange(n) % 5, "single_turn": True})


def _scores(n=20):
    return pd.DataFrame({"prompt_id": [f"p{i // 2}" for i in range(n)], "response_id": [f"r{i}" for i in range(n)],
                         "condition": "original", "variant": 0, "donor_prompt_id": None,
                         "score": np.linspace(0, 1, n)})


def test_valid_tables_pass_and_normalise():
    r = validate_ratings(_ratings(), attribute="helpfulness")
    s = validate_scores(_scores(), r)
    assert s["score"].dtype == float and len(s) == 20
    assert r["helpfulness"].dtype == float


def test_nan_score_names_row_and_field():
    s = _scores()
    s.loc[17, "score"] = np.nan
    with pytest.raises(DataError, match=r"row 18, field 'score'"):
        validate_scores(s, _ratings())


def test_unrated_response_is_named():
    s = _scores()
    s.loc[4, "response_id"] = "ghost"
    with pytest.raises(DataError, match=r"row 5, field 'response_id'.*no rating"):
        validate_scores(s, _ratings())


def test_unknown_prompt_and_donor_prompt():
    s = _scores()
    s.loc[3, "prompt_id"] = "nowhere"
    with pytest.raises(DataError, match=r"row 4, field 'prompt_id'"):
        validate_scores(s, _ratings())
    s = _scores()
    s.loc[5, "condition"] = "random"
    s.loc[5, "donor_prompt_id"] = "pXX"
    with pytest.raises(DataError, match=r"row 6, field 'donor_prompt_id'"):
        validate_scores(s, _ratings())


def test_unknown_condition_and_duplicates():
    s = _scores()
    s.loc[2, "condition"] = "shuffled"
    with pytest.raises(DataError, match=r"row 3, field 'condition'.*unknown condition"):
        validate_scores(s)
    s = pd.concat([_scores(), _scores().iloc[[6]]], ignore_index=True)
    with pytest.raises(DataError, match=r"row 21.*duplicate.*first at row 7"):
        validate_scores(s)


def test_missing_column_and_bad_ratings():
    with pytest.raises(DataError, match="score"):
        validate_scores(_scores().drop(columns="score"))
    r = _ratings().astype({"helpfulness": object})
    r.loc[9, "helpfulness"] = "great"
    with pytest.raises(DataError, match=r"row 10, field 'helpfulness'"):
        validate_ratings(r, attribute="helpfulness")
    with pytest.raises(DataError, match="correctness"):
        validate_ratings(_ratings(), attribute="correctness")


def test_preferences_validation():
    p = pd.DataFrame({"prompt_id": ["a", "b"], "chosen_id": ["x", None], "rejected_id": ["y", "z"]})
    with pytest.raises(DataError, match=r"row 2, field 'chosen_id'"):
        validate_preferences(p)
    p = pd.DataFrame({"prompt_id": ["a"], "chosen_id": ["x"], "rejected_id": ["y"], "chosen_style": [5]})
    with pytest.raises(DataError, match=r"row 1, field 'chosen_style'"):
        validate_preferences(p)


@pytest.mark.parametrize("ext", ["parquet", "jsonl"])
def test_load_round_trip(tmp_path, ext):
    r, s = _ratings(), _scores()
    p = pd.DataFrame({"prompt_id": ["p0"], "chosen_id": ["r0"], "rejected_id": ["r1"]})
    for name, df in (("ratings", r), ("scores", s), ("prefs", p)):
        path = tmp_path / f"{name}.{ext}"
        if ext == "parquet":
            df.to_parquet(path, index=False)
        else:
            df.to_json(path, orient="records", lines=True)
    rr = load_ratings(tmp_path / f"ratings.{ext}", attribute="helpfulness")
    ss = load_scores(tmp_path / f"scores.{ext}", rr)
    pp = load_preferences(tmp_path / f"prefs.{ext}")
    assert len(rr) == 20 and len(ss) == 20 and len(pp) == 1
    np.testing.assert_allclose(ss["score"], s["score"])
    bad = s.copy()
    bad.loc[11, "score"] = None
    path = tmp_path / f"bad.{ext}"
    bad.to_parquet(path, index=False) if ext == "parquet" else bad.to_json(path, orient="records", lines=True)
    with pytest.raises(DataError, match=rf"file .*bad.{ext}, row 12, field 'score'"):
        load_scores(path, rr)
