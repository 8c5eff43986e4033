"""Which of the matched-training study's qualitative findings a sweep reproduces.

The study (What Pairwise Evaluation Misses, section 9 and appendix C) reports, for arms trained on
HelpSteer2 at two Qwen3 sizes, orderings between arms. Each finding here is one such ordering,
"``higher`` has a larger mean of a summary.csv column than ``lower``", tested on the sweep's seed
values by the one-sided exact permutation test of that named direction
(:func:`rmeval.stats.permutation.exact_permutation_test`, ``alternative="greater"``): every split
of the pooled n_a + n_b seed values into groups of n_a and n_b is enumerated, and p is the share
of splits whose difference in means is at least the observed one. Its smallest possible value is
1 / C(n_a + n_b, n_a): 1/2 for one seed per arm, 1/6 for two, 1/20 for three, 1/252 for five.

Verdict (``ALPHA`` = 0.05), never forced:

- ``holds``: p <= 0.05;
- ``not shown (p = ...)``: p > 0.05 with a design that could have shown it;
- ``too few seeds to test (smallest possible p 1/C)``: 1 / C(n_a + n_b, n_a) > 0.05, so no
  outcome reaches p <= 0.05 (fewer than three seeds per arm in a balanced sweep);
- ``not measured``: an arm or the column is missing from the sweep.

Beside it a description of the seed values, not a verdict: means in the study's order with the
seed ranges apart or overlapping, means in the opposite order, or equal means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rmcore.io.markdown import MISSING, num, table
from rmeval.stats.permutation import MAX_SPLITS, exact_permutation_test

ALPHA = 0.05


@dataclass(frozen=True)
class Finding:
    """'`higher` has a larger `column` than `lower`' (per-arm means), with the study's figures."""

    name: str
    column: str
    higher: str
    lower: str
    study: str  # the published figures, for the reader


FINDINGS: tuple[Finding, ...] = (
    Finding("shuffled prompt means lower the share", "share_original", "regression", "shuffled_mean",
            "1.7B: share 0.20 shuffled vs 0.33 with true means"),
    Finding("regression's random-wrong-prompt margin exceeds Bradley-Terry's", "transplant_random_margin_sd",
            "regression", "bradley_terry", "0.6B: 2.3-2.7 vs 1.6-2.1 SD; 1.7B: 2.5-2.9 vs 1.7-2.3 SD"),
    Finding("Bradley-Terry's share is above regression's", "share_original", "bradley_terry", "regression",
            "regression's share is lower at both sizes"),
    Finding("shuffled prompt means keep the wrong-prompt margin", "transplant_random_margin_sd", "shuffled_mean",
            "bradley_terry", "1.7B: shuffled-mean margin 2.91 SD, above Bradley-Terry's 1.7-2.3"),
    Finding("binarized targets lower the margin below regression's", "transplant_random_margin_sd", "regression",
            "binarized", "1.7B: binarized 1.95 SD, 0.81 below regression, every seed below every regression seed"),
)


def smallest_p(n_a: int, n_b: int) -> tuple[float, int]:
    """(1 / C(n_a + n_b, n_a), C): the smallest p the exact test can give for these seed counts."""
    c = math.comb(n_a + n_b, n_a)
    return 1.0 / c, c


def describe(hi: pd.Series, lo: pd.Series) -> str:
    """What the seed values show, without a test."""
    if hi.mean() > lo.mean():
        if hi.min() > lo.max():
            return "means in the study's order, seed ranges apart"
        return "means in the study's order, seed ranges overlap"
    if hi.mean() < lo.mean():
        return "means in the opposite order"
    return "equal means"


def judge(summary: pd.DataFrame, finding: Finding, alpha: float = ALPHA) -> dict[str, Any]:
    """One finding on a summary table (one row per run: ``arm``, ``seed`` and the finding's column):
    the verdict from the one-sided exact permutation p of ``higher > lower`` (module doc)."""
    out: dict[str, Any] = {"finding": finding.name, "column": finding.column, "higher": finding.higher,
                           "lower": finding.lower, "study": finding.study}
    if finding.column not in summary.columns:
        return {**out, "verdict": "not measured"}
    vals = {a: pd.to_numeric(summary.loc[summary["arm"] == a, finding.column], errors="coerce").dropna()
            for a in (finding.higher, finding.lower)}
    if any(v.empty for v in vals.values()):
        return {**out, "verdict": "not measured"}
    hi, lo = vals[finding.higher], vals[finding.lower]
    p_min, n_splits = smallest_p(len(hi), len(lo))
    if n_splits > MAX_SPLITS:  # past what exact enumeration allows; never a guessed verdict
        return {**out, "verdict": f"not tested ({n_splits} splits, too many to enumerate)"}
    test = exact_permutation_test(hi.to_numpy(), lo.to_numpy(), "greater")
    out.update(mean_higher=float(hi.mean()), mean_lower=float(lo.mean()), n_higher=len(hi), n_lower=len(lo),
               range_higher=(float(hi.min()), float(hi.max())), range_lower=(float(lo.min()), float(lo.max())),
               description=describe(hi, lo), p_value=test["p_value"], smallest_p=p_min, n_splits=n_splits,
               alpha=alpha)
    if p_min > alpha:
        out["verdict"] = f"too few seeds to test (smallest possible p 1/{n_splits})"
    elif test["p_value"] <= alpha:
        out["verdict"] = "holds"
    else:
        out["verdict"] = f"not shown (p = {num(test['p_value'], 3)})"
    return out


def study_findings(summary: pd.DataFrame, findings: tuple[Finding, ...] = FINDINGS) -> list[dict[str, Any]]:
    return [judge(summary, f) for f in findings]


def findings_markdown(summary: pd.DataFrame, *, title: str = "The study's findings on this sweep",
                      context: str | None = None) -> str:
    """A report section: one row per finding, with both arms' seed means and ranges, what they
    show, the one-sided exact p of the study's direction and the verdict."""
    lines = [f"## {title}", ""]
    lines.append(context or (
        "Each row is an ordering between arms that the matched-training study reports. The verdict reads "
        "the one-sided exact permutation p of the study's direction on this sweep's seed values: `holds` at "
        f"p <= {ALPHA}; below three seeds per arm no outcome can reach that (the smallest possible p is "
        "1/C(n_a + n_b, n_a), 1/6 for two seeds each), and the row says so. The description states what "
        "the means and seed ranges show; it is not a verdict (see `rmtrain.findings`)."))
    rows = []
    for r in study_findings(summary):
        if "mean_higher" in r:
            seen = (f"{num(r['mean_higher'], 2)} [{num(r['range_higher'][0], 2)}, {num(r['range_higher'][1], 2)}] vs "
                    f"{num(r['mean_lower'], 2)} [{num(r['range_lower'][0], 2)}, {num(r['range_lower'][1], 2)}]")
            seeds = f"{r['n_higher']} vs {r['n_lower']}"
            p = f"{num(r['p_value'], 3)} (min {num(r['smallest_p'], 3)})"
        else:
            seen = seeds = p = MISSING
        rows.append([r["finding"], f"{r['higher']} > {r['lower']} on `{r['column']}`", seeds, seen,
                     r.get("description", MISSING), p, f"**{r['verdict']}**", r["study"]])
    lines += [""] + table(["finding", "arms", "seeds", "this sweep (mean [seed range])", "description",
                           "one-sided exact p", "verdict", "study"], rows)
    return "\n".join(lines) + "\n"
