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


# -- ties, RM-Bench, RewardBench -----------------------------------------------------------------------------

def _rmbench_table() -> tuple[pd.DataFrame, pd.DataFrame]:
    # one prompt; chosen styles 0..2 score 1, 2, 3; rejected styles 0..2 score 1, 2, 0
    chosen, rejected = [1.0, 2.0, 3.0], [1.0, 2.0, 0.0]
    scores = pd.DataFrame({"prompt_id": "p", "response_id": [f"c{i}" for i in range(3)] + [f"r{j}" for j in range(3)],
                           "score": chosen + rejected})
    prefs = pd.DataFrame([{"prompt_id": "p", "chosen_id": f"c{i}", "rejected_id": f"r{j}", "chosen_style": i,
                           "rejected_style": j} for i in range(3) for j in range(3)])
    return prefs, scores


def test_rm_bench_numbers_with_ties_wrong_and_half():
    prefs, scores = _rmbench_table()
    # By hand, cell (i, j) = chosen i beats rejected j: [[tie, 0, 1], [1, tie, 1], [1, 1, 1]]
    wrong = pairwise_accuracy(prefs, scores, n_boot=10, ties="wrong")
    assert wrong["rmbench"]["matrix"] == [[0, 0, 1], [1, 0, 1], [1, 1, 1]]
    assert wrong["rmbench"]["hard"]["estimate"] == pytest.approx(2 / 3)  # upper triangle 0, 1, 1
    assert wrong["rmbench"]["normal"]["estimate"] == pytest.approx(1 / 3)  # diagonal 0, 0, 1
    assert wrong["rmbench"]["easy"]["estimate"] == pytest.approx(1.0)
    assert wrong["rmbench"]["average"]["estimate"] == pytest.approx(2 / 3)
    assert wrong["accuracy"]["estimate"] == pytest.approx(6 / 9) and wrong["n_ties"] == 2
    half = pairwise_accuracy(prefs, scores, n_boot=10, ties="half")
    assert half["rmbench"]["normal"]["estimate"] == pytest.approx(2 / 3)  # 0.5, 0.5, 1
    assert half["rmbench"]["average"]["estimate"] == pytest.approx(7 / 9)
    assert half["accuracy"]["estimate"] == pytest.approx(7 / 9)
    with pytest.raises(ValueError, match="ties"):
        pairwise_accuracy(prefs, scores, ties="zero")


def test_rewardbench_section_weighting_by_hand():
    # subset: outcomes per pair (1 right, 0 wrong, t tie); every pair its own prompt
    plan = [("alpacaeval-easy", 1), ("alpacaeval-easy", "t"), ("mt-bench-easy", 1), ("hep-go", 0),
            ("math-prm", 1), ("math-prm", 1), ("donotanswer", "t")]
    rows, score_rows = [], []
    for i, (subset, outcome) in enumerate(plan):
        c = {1: 1.0, 0: -1.0, "t": 0.0}[outcome]
        rows.append({"prompt_id": f"p{i}", "chosen_id": "c", "rejected_id": "r", "subset": subset})
        score_rows += [{"prompt_id": f"p{i}", "response_id": "c", "score": c},
                       {"prompt_id": f"p{i}", "response_id": "r", "score": 0.0}]
    prefs, scores = pd.DataFrame(rows), pd.DataFrame(score_rows)
    for ties, tie in (("wrong", 0.0), ("half", 0.5)):
        rb = pairwise_accuracy(prefs, scores, n_boot=10, ties=ties)["rewardbench"]
        # RewardBench's EXAMPLE_COUNTS: alpacaeval-easy 100, mt-bench-easy 28, math-prm 984, hep-go 164
        chat = (100 * (1 + tie) / 2 + 28 * 1) / (100 + 28)
        reasoning = (984 * 1 + 164 * 0) / (984 + 164)
        safety = tie  # donotanswer alone
        assert rb["sections"]["Chat"]["estimate"] == pytest.approx(chat)
        assert rb["sections"]["Reasoning"]["estimate"] == pytest.approx(reasoning)
        assert rb["sections"]["Safety"]["estimate"] == pytest.approx(safety)
        assert "Chat Hard" not in rb["sections"]  # no subset of it present
        assert rb["score"]["estimate"] == pytest.approx((chat + reasoning + safety) / 3)


def test_no_rewardbench_section_without_its_subsets():
    prefs, scores = _rmbench_table()
    assert "rewardbench" not in pairwise_accuracy(prefs.assign(subset="chat"), scores, n_boot=10)


def test_rewardbench_missing_section_reports_both_means_by_hand():
    from rmeval.audit.pairwise import pairwise_markdown

    # no Chat Hard subset; every pair its own prompt; 1 right, 0 wrong
    plan = [("alpacaeval-easy", 1), ("alpacaeval-easy", 0), ("mt-bench-easy", 1), ("donotanswer", 1),
            ("donotanswer", 1), ("hep-go", 0)]
    prefs = pd.DataFrame([{"prompt_id": f"p{i}", "chosen_id": "c", "rejected_id": "r", "subset": s}
                          for i, (s, _) in enumerate(plan)])
    scores = _scores({**{(f"p{i}", "c"): 1.0 if ok else -1.0 for i, (_, ok) in enumerate(plan)},
                      **{(f"p{i}", "r"): 0.0 for i in range(len(plan))}})
    res = pairwise_accuracy(prefs, scores, n_boot=200, rng=0)
    rb = res["rewardbench"]
    chat = (100 * 0.5 + 28 * 1.0) / (100 + 28)  # 0.609375
    safety, reasoning = 1.0, 0.0
    assert rb["missing_sections"] == ["Chat Hard"]
    assert rb["score"]["estimate"] == pytest.approx((chat + safety + reasoning) / 3)  # 0.536458...
    assert rb["score_missing_as_zero"]["estimate"] == pytest.approx((chat + safety + reasoning + 0.0) / 4)  # 0.40234375
    # the same resamples, divided by 4 instead of 3: the interval scales by 3/4
    assert rb["score_missing_as_zero"]["ci95"] == pytest.approx([0.75 * v for v in rb["score"]["ci95"]])
    md = pairwise_markdown("m", res)
    assert "Sections missing: Chat Hard." in md
    assert "mean of the 3 sections present (0.536)" in md
    assert "counts a missing section 0 and averages all 4: 0.402 [" in md


def test_rewardbench_all_sections_present_no_missing_line():
    from rmeval.audit.pairwise import pairwise_markdown

    subsets = ["alpacaeval-easy", "mt-bench-hard", "donotanswer", "hep-go"]
    prefs = pd.DataFrame([{"prompt_id": f"p{i}", "chosen_id": "c", "rejected_id": "r", "subset": s}
                          for i, s in enumerate(subsets)])
    scores = _scores({**{(f"p{i}", "c"): 1.0 for i in range(4)}, **{(f"p{i}", "r"): float(i % 2) for i in range(4)}})
    res = pairwise_accuracy(prefs, scores, n_boot=50, rng=0)
    rb = res["rewardbench"]
    # p0, p2 right (1 > 0); p1, p3 tied (1 = 1, half): sections 1, 0.5, 1, 0.5
    assert rb["score"]["estimate"] == pytest.approx(0.75)
    assert "missing_sections" not in rb and "score_missing_as_zero" not in rb
    assert "Sections missing" not in pairwise_markdown("m", res)
