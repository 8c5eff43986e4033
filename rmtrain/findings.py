"""Which of the matched-training study's qualitative findings a sweep reproduces.

The study (What Pairwise Evaluation Misses, section 9 and appendix C) reports, for arms trained on
HelpSteer2 at two Qwen3 sizes, orderings between arms. Each finding here is one such ordering of
per-arm means of a summary.csv column; a sweep's report states for each whether its seed values
show it, never forcing it:

- ``holds``: the arm means are in the study's order and every seed of the first arm is beyond
  every seed of the second (the one-sided exact permutation test then reaches its smallest p);
- ``holds on the means only``: the means are in order but the seed ranges overlap;
- ``does not hold``: the means are in the opposite order (or equal);
- ``not measured``: an arm or the column is missing from the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from rmcore.markdown import MISSING, num, table


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


def judge(summary: pd.DataFrame, finding: Finding) -> dict[str, Any]:
    """One finding on a summary table (one row per run: ``arm``, ``seed`` and the finding's column)."""
    out: dict[str, Any] = {"finding": finding.name, "column": finding.column, "higher": finding.higher,
                           "lower": finding.lower, "study": finding.study}
    if finding.column not in summary.columns:
        return {**out, "verdict": "not measured"}
    vals = {a: pd.to_numeric(summary.loc[summary["arm"] == a, finding.column], errors="coerce").dropna()
            for a in (finding.higher, finding.lower)}
    if any(v.empty for v in vals.values()):
        return {**out, "verdict": "not measured"}
    hi, lo = vals[finding.higher], vals[finding.lower]
    out.update(mean_higher=float(hi.mean()), mean_lower=float(lo.mean()), n_higher=len(hi), n_lower=len(lo),
               range_higher=(float(hi.min()), float(hi.max())), range_lower=(float(lo.min()), float(lo.max())))
    if not hi.mean() > lo.mean():
        out["verdict"] = "does not hold"
    elif hi.min() > lo.max():
        out["verdict"] = "holds"
    else:
        out["verdict"] = "holds on the means only"
    return out


def study_findings(summary: pd.DataFrame, findings: tuple[Finding, ...] = FINDINGS) -> list[dict[str, Any]]:
    return [judge(summary, f) for f in findings]


def findings_markdown(summary: pd.DataFrame, *, title: str = "The study's findings on this sweep",
                      context: str | None = None) -> str:
    """A report section: one row per finding, with both arms' seed means and ranges and the verdict."""
    lines = [f"## {title}", ""]
    lines.append(context or ("Each row is an ordering between arms that the matched-training study reports; "
                             "the verdict reads this sweep's seed values (see `rmtrain.findings`)."))
    rows = []
    for r in study_findings(summary):
        if "mean_higher" in r:
            seen = (f"{num(r['mean_higher'], 2)} [{num(r['range_higher'][0], 2)}, {num(r['range_higher'][1], 2)}] vs "
                    f"{num(r['mean_lower'], 2)} [{num(r['range_lower'][0], 2)}, {num(r['range_lower'][1], 2)}]")
        else:
            seen = MISSING
        rows.append([r["finding"], f"{r['higher']} > {r['lower']} on `{r['column']}`", seen, f"**{r['verdict']}**",
                     r["study"]])
    lines += [""] + table(["finding", "arms", "this sweep (mean [seed range])", "verdict", "study"], rows)
    return "\n".join(lines) + "\n"
