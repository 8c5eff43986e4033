from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rmcore.errors import DataError
from rmeval.stats.pairwise import pairwise_accuracy


def _scores(d):
    return pd.DataFrame([(p, r, s) for (p, r), s in d.items()], columns=["prompt_id", "response_id", "score"])


def test_accuracy_with_ties_and_subsets_by_hand():
    sc = _scores({("p1", "a"): 2.0, ("p1", "b"): 1.0, ("p2", "a"): 0.0, ("p2", "b"): 0.0,
                  ("p3", "a"): -1.0, ("p3", "b"): 1.0, ("p4", "a"): 5.0, ("p4", "b"): 4.0})
    prefs = pd.DataFrame({"prompt_id": ["p1", "p2", "p3", "p4"], "chosen_id": ["a", "a", "a", "a"],
                          "rejected_id": ["b", "b", "b", "b"], "subset": ["x", "x", "y", "y"],
                          "section": ["chat", "chat", "chat", "safety"]})
    res = pairwise_accuracy(prefs, sc, n_boot=200, rng=0)
    assert res["accuracy"]["estimate"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert res["accuracy"]["n_pairs"] == 4
    assert res["by_subset"]["x"]["estimate"] == pytest.approx(0.75)
    assert res["by_subset"]["y"]["estimate"] == pytest.approx(0.5)
    assert res["by_section"]["chat"]["estimate"] == pytest.approx(0.5)
    assert res["by_section"]["safety"]["estimate"] == pytest.approx(1.0)
    assert "rmbench" not in res


def test_rmbench_matrix_by_hand():
    # two prompts, each with 3 chosen and 3 rejected styles; scores chosen so each cell is known.
    # prompt q1: chosen [1, 2, 3], rejected [0.5, 2.5, 3.5]; prompt q2: chosen [1,1,1], rejected [0,1,2]
    ch = {"q1": [1.0, 2.0, 3.0], "q2": [1.0, 1.0, 1.0]}
    rj = {"q1": [0.5, 2.5, 3.5], "q2": [0.0, 1.0, 2.0]}
    d, rows = {}, []
    for q in ch:
        for i in range(3):
            d[(q, f"c{i}")] = ch[q][i]
            d[(q, f"r{i}")] = rj[q][i]
        for i in range(3):
            for j in range(3):
                rows.append((q, f"c{i}", f"r{j}", i, j))
    prefs = pd.DataFrame(rows, columns=["prompt_id", "chosen_id", "rejected_id", "chosen_style", "rejected_style"])
    res = pairwise_accuracy(prefs, _scores(d), n_boot=200, rng=0)
    # cell (i, j) = mean over prompts of 1[c_i > r_j] (+0.5 on ties), worked out by hand:
    # q1: row0 [1,0,0], row1 [1,0,0], row2 [1,1,0];  q2: row0 [1,.5,0], row1 [1,.5,0], row2 [1,.5,0]
    expect = np.array([[1.0, 0.25, 0.0], [1.0, 0.25, 0.0], [1.0, 0.75, 0.0]])
    np.testing.assert_allclose(np.array(res["rmbench"]["matrix"]), expect)
    rb = res["rmbench"]
    # RM-Bench: hard = upper-right triangle (chosen less styled), easy = lower-left, normal = diagonal
    assert rb["hard"]["estimate"] == pytest.approx((0.25 + 0.0 + 0.0) / 3)
    assert rb["normal"]["estimate"] == pytest.approx((1.0 + 0.25 + 0.0) / 3)
    assert rb["easy"]["estimate"] == pytest.approx((1.0 + 1.0 + 0.75) / 3)
    assert rb["average"]["estimate"] == pytest.approx((0.25 / 3 + 1.25 / 3 + 2.75 / 3) / 3)
    assert rb["counts"] == [[2, 2, 2]] * 3


def test_missing_score_names_row_and_field():
    sc = _scores({("p1", "a"): 1.0, ("p1", "b"): 0.0})
    prefs = pd.DataFrame({"prompt_id": ["p1", "p1"], "chosen_id": ["a", "a"], "rejected_id": ["b", "zz"]})
    with pytest.raises(DataError, match=r"row 1, field 'rejected_id'"):
        pairwise_accuracy(prefs, sc, n_boot=10)
