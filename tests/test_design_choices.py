"""Design choices made explicit (issue 10, item 5), each checked against values derived by hand
or an independent fit: bt_margin's margin orientation, near-duplicate donors, the sibling
regression's score SD, tied pairs and RewardBench's section weighting."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import torch

from rmcore.data.schema import PromptRecord, RatingSet, Response
from rmcore.errors import ConfigError
from rmeval.conditions import build_condition, donor_exclusions
from rmeval.stats.pairwise import pairwise_accuracy
from rmeval.stats.regression import sibling_regression
from rmtrain.arms import PairTable, make_arm


def _nll(x: float) -> float:  # -log sigmoid(x)
    return math.log1p(math.exp(-x))


# -- bt_margin: margin_orientation -------------------------------------------------------------------

def _pairs() -> PairTable:
    # gaps by rating: +2 (label agrees), -1 (label disagrees), 0 (ratings tie)
    return PairTable(prompt_id=np.array(["a", "b", "c"], dtype=object), chosen_id=np.array(["1", "3", "5"], dtype=object),
                     rejected_id=np.array(["2", "4", "6"], dtype=object), y_chosen=np.array([4.0, 1.0, 3.0]),
                     y_rejected=np.array([2.0, 2.0, 3.0]), prompt_mean=np.array([3.0, 1.5, 3.0]))


@pytest.mark.parametrize("orientation, gaps, signs", [("label", [2, -1, 0], [1, 1, 1]),
                                                      ("rating", [2, 1, 0], [1, -1, 1])])
def test_bt_margin_orientation_by_hand(orientation, gaps, signs):
    arm = make_arm("bt_margin", {"margin_orientation": orientation})
    t = arm.targets(_pairs(), seed=0)
    np.testing.assert_array_equal(t["gap"], gaps)
    np.testing.assert_array_equal(t["orientation"], signs)
    rc, rr = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    loss = arm.loss(rc, rr, {k: torch.tensor(v, dtype=torch.float64) for k, v in t.items()})
    # label: -log s(1 - 2), -log s(0 + 1), -log s(0.5); rating: the second pair flipped, asks |gap| = 1
    second = _nll(1.0) if orientation == "label" else _nll(-1.0)
    assert float(loss) == pytest.approx((_nll(-1.0) + second + _nll(0.5)) / 3, abs=1e-12)


def test_bt_margin_default_is_label_and_bad_value_is_an_error():
    assert make_arm("bt_margin").config.margin_orientation == "label"
    with pytest.raises(ConfigError, match="margin_orientation must be 'label' or 'rating'"):
        make_arm("bt_margin", {"margin_orientation": "ratings"})


# -- wrong-prompt donors: near-duplicates excluded and counted ----------------------------------------

def _prompt(pid: str, messages: list[dict]) -> PromptRecord:
    return PromptRecord(pid, messages, [Response(f"{pid}:r0", f"reply {pid}", {"helpfulness": 1.0}),
                                        Response(f"{pid}:r1", f"other {pid}", {"helpfulness": 2.0})])


def test_near_duplicate_first_turns_are_never_donors():
    u = lambda t: {"role": "user", "content": t}  # noqa: E731
    a = lambda t: {"role": "assistant", "content": t}  # noqa: E731
    rs = RatingSet(prompts=[
        _prompt("A", [u("How do I bake bread at home?")]),
        # HelpSteer2 style: the same first turn, then a follow-up: not a wrong prompt for A's responses
        _prompt("B", [u("how do I bake  bread at home"), a("Knead it."), u("And for how long?")]),
        _prompt("C", [u("What is the capital of France?")]),
        _prompt("D", [u("Tell me a joke about cats.")]),
        _prompt("E", [u("Bread recipes at home, how do I bake them?")]),
    ], attributes=("helpfulness",))
    assert donor_exclusions(rs.prompts) == {"n_pairs": 2, "n_prompts": 2}  # A->B and B->A
    for cond in ("random", "overlap", "length"):
        items = build_condition(cond, rs, n_donors=3, seed=0)
        donors = {(it.prompt_id, it.donor_prompt_id) for it in items}
        assert ("A", "B") not in donors and ("B", "A") not in donors, cond
        # A keeps exactly the three other prompts as donors
        assert {d for p, d in donors if p == "A"} == {"C", "D", "E"}, cond


# -- sibling regression: the score SD every statistic uses ---------------------------------------------

def test_sibling_regression_uses_the_sd_of_every_original_score():
    rng = np.random.default_rng(4)
    sizes = np.r_[np.full(40, 3), 1]  # the last prompt has one response: no siblings, dropped
    g = np.repeat(np.arange(len(sizes)), sizes)
    h = np.repeat(rng.normal(size=len(sizes)), sizes) + rng.normal(size=len(g))
    h[5] = np.nan  # an unrated response: out of the regression, still a scored response
    s = 0.6 * h + rng.normal(size=len(g)) + 2.0
    s[5] = 9.0
    res = sibling_regression(s, h, g, n_boot=200, rng=0)

    df = pd.DataFrame({"g": g, "h": h, "s": s}).dropna()
    df = df[df.groupby("g")["h"].transform("size") >= 2]
    tot, cnt = df.groupby("g")["h"].transform("sum"), df.groupby("g")["h"].transform("size")
    df["sib"] = (tot - df["h"]) / (cnt - 1)
    raw = sm.OLS(df["s"], sm.add_constant(df[["h", "sib"]])).fit().params
    sd_all = np.std(s, ddof=1)  # every finite original score, as the transplant margins use
    assert res["shown"]["estimate"] == pytest.approx(raw["h"] / sd_all, abs=1e-10)
    assert res["sibling"]["estimate"] == pytest.approx(raw["sib"] / sd_all, abs=1e-10)
    assert res["shown"]["estimate"] != pytest.approx(raw["h"] / df["s"].std(ddof=1), abs=1e-3)
    assert res["n_dropped"] == 1 and res["shown"]["n_prompts"] == 40


# -- pairwise accuracy: ties, RM-Bench, RewardBench -------------------------------------------------------

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
