"""Findings verdicts read the one-sided exact permutation p of the study's direction: p against
scipy's exact permutation test, the smallest possible p against C(n_a + n_b, n_a) by hand, and the
sweep report's findings section."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import permutation_test

from rmtrain.findings import FINDINGS, findings_markdown, judge, smallest_p

F = next(x for x in FINDINGS if x.higher == "regression" and x.lower == "shuffled_mean")


def _table(hi: list[float], lo: list[float]) -> pd.DataFrame:
    return pd.DataFrame([{"arm": "regression", "seed": s, F.column: v} for s, v in enumerate(hi)]
                        + [{"arm": "shuffled_mean", "seed": s, F.column: v} for s, v in enumerate(lo)])


def _scipy_p(hi: list[float], lo: list[float]) -> float:
    res = permutation_test((hi, lo), lambda x, y: np.mean(x) - np.mean(y), permutation_type="independent",
                           alternative="greater", n_resamples=np.inf)
    return float(res.pvalue)


@pytest.mark.parametrize("hi, lo", [
    ([0.5, 0.6, 0.7], [0.1, 0.2, 0.3]),               # 3 vs 3 apart: 1/20
    ([0.5, 0.6, 0.25], [0.1, 0.2, 0.3]),              # 3 vs 3 overlapping
    ([0.9, 0.8, 0.7, 0.6, 0.5], [0.1, 0.2, 0.3, 0.4, 0.45]),  # 5 vs 5 apart: 1/252
    ([0.4, 0.5, 0.3, 0.45], [0.35, 0.2, 0.5, 0.1]),   # 4 vs 4 overlapping
    ([0.9, 0.8], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.05, 0.15, 0.25]),  # 2 vs 10: 1/66 < 0.05
])
def test_p_is_scipys_exact_permutation_p_and_the_verdict_follows(hi, lo):
    r = judge(_table(hi, lo), F)
    p = _scipy_p(hi, lo)
    assert r["p_value"] == pytest.approx(p, abs=1e-12)
    assert r["smallest_p"] == pytest.approx(1 / math.comb(len(hi) + len(lo), len(hi)))
    assert r["verdict"] == ("holds" if p <= 0.05 + 1e-12 else f"not shown (p = {p:.3f})")


@pytest.mark.parametrize("n_a, n_b, c", [(1, 1, 2), (2, 2, 6), (2, 3, 10), (2, 4, 15), (3, 3, 20), (5, 5, 252)])
def test_smallest_possible_p_and_too_few_seeds(n_a, n_b, c):
    assert smallest_p(n_a, n_b) == (pytest.approx(1 / c), c)
    hi, lo = list(np.linspace(1, 2, n_a)), list(np.linspace(-2, -1, n_b))  # fully separated
    r = judge(_table(hi, lo), F)
    if 1 / c > 0.05:
        assert r["verdict"] == f"too few seeds to test (smallest possible p 1/{c})"
    else:
        assert r["verdict"] == "holds" and r["p_value"] == pytest.approx(1 / c)
    assert r["description"] == "means in the study's order, seed ranges apart"


def test_findings_section_of_a_sweep_report():
    from rmtrain.sweep.report import render_report, summary_frame

    rows = [{"arm": a, "model": "m", "seed": s, "state": "done",
             "figures": {"share_original": v, "heldout_pair_accuracy": 0.6}}
            for a, vals in (("regression", [0.5, 0.6, 0.7]), ("shuffled_mean", [0.1, 0.2, 0.3]))
            for s, v in enumerate(vals)]
    df = summary_frame(rows)
    text = render_report(df, ["regression", "shuffled_mean"], title="t", rows=rows, selected={}, human_share={},
                         plots={})
    section = text[text.index("m: the study's findings on this sweep"):]
    row = next(line for line in section.splitlines() if line.startswith("| shuffled prompt means lower the share"))
    assert "| 3 vs 3 |" in row and "0.050 (min 0.050)" in row and "**holds**" in row
    assert "seed ranges apart" in row
    assert findings_markdown(df).count("**not measured**") == len(FINDINGS) - 1
