"""Diagnostics of a generative judge scored as the expected rating digit (the study's Table 5).

A judge asked for a rating from 1 to 5 is read from its next-token distribution: p(d) is the
softmax over the digit tokens only, and the score is the expected digit E = sum_d d p(d). Two
things can make that score misleading, and the per-row table the scorer records
(``rmeval.scoring.judge.DIGIT_COLUMNS``: ``digit_mass`` and ``log_p_1..log_p_5``) shows both:

- **Digit mass** m = sum over the digit tokens of the softmax over the WHOLE vocabulary. When m is
  small the judge wanted to write something other than a rating, and E rests on a renormalised
  remainder. Reported per condition: mean, median, minimum and the share of rows with m < 0.9
  (``threshold``), that share with a prompt-bootstrap interval (rows grouped by the response's own
  prompt); ``transplants`` pools the rows of every wrong-prompt condition present. The study: one
  judge under 0.9 on 8% of its HelpSteer rows and 24% of its transplanted rows.
- **Ceiling.** The top-digit distribution is the share of original-condition rows whose most
  likely digit is d (argmax_d p(d); the lowest digit on a tie). A judge that puts most rows at 5
  compresses E near the top of the scale, which lowers its between-prompt share. The share is
  therefore also computed on the logit of the probability of the scale's top digit,
  logit p(5) = log p(5) - log(1 - p(5)) (from the log probabilities, exact near 0 and 1): a
  monotone, ceiling-free reading of how sure the judge is that a response is excellent; the study's
  70B judge: 0.38 on that logit against 0.32 on E, and 0.46 on pooled ranks of E.

``share`` holds, on the original condition's rows, the between-prompt share (ICC(1),
``rmeval.stats.share``) of E and of logit p(5) on the same responses and prompt resamples, their
paired difference (logit minus expected), and the share of the pooled ranks of E.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from scipy.stats import rankdata

from rmcore.errors import DataError

from ..tables import TRANSPLANT_KINDS
from .bootstrap import group_codes, per_prompt_sums, prompt_bootstrap, ratio_of_sums
from .settings import N_BOOT
from .share import share, share_pair

# the per-row table a generative judge records beside its scores: digit mass, log p(1..5)
DIGIT_COLUMNS = ("digit_mass", "log_p_1", "log_p_2", "log_p_3", "log_p_4", "log_p_5")
MASS_THRESHOLD = 0.9
# one stream per statistic, so adding a condition never moves another's interval
_STREAMS = {"share": 1, "ranks": 2, "mass": 3}


def _rng(seed: int, name: str, *extra: int) -> np.random.Generator:
    return np.random.default_rng([seed, _STREAMS[name], *extra])


def digit_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per row: ``expected_digit`` E, ``top_digit`` (the most likely digit) and ``logit_top``
    (logit of p(5)) from the log probabilities."""
    lp = table[list(DIGIT_COLUMNS[1:])].to_numpy(float)
    digits = np.arange(1, lp.shape[1] + 1)
    out = pd.DataFrame(index=table.index)
    out["expected_digit"] = np.exp(lp) @ digits
    out["top_digit"] = digits[np.argmax(lp, axis=1)]
    out["logit_top"] = lp[:, -1] - logsumexp(lp[:, :-1], axis=1)
    return out


def _mass_share(mass: np.ndarray, prompts: np.ndarray, threshold: float, n_boot: int,
                rng: np.random.Generator) -> dict[str, Any]:
    """Rows with mass under the threshold, as a share of rows, bootstrapped over prompts."""
    codes, uniq = group_codes(prompts)
    per = per_prompt_sums(codes, np.column_stack([np.ones_like(mass), (mass < threshold).astype(float)]), len(uniq))
    return prompt_bootstrap(per, ratio_of_sums(1, 0), n_boot=n_boot, rng=rng)


def _mass_block(mass: np.ndarray, prompts: np.ndarray, threshold: float, n_boot: int,
                rng: np.random.Generator) -> dict[str, Any]:
    return {"n_rows": int(len(mass)), "mean": float(mass.mean()), "median": float(np.median(mass)),
            "min": float(mass.min()), "share_below": _mass_share(mass, prompts, threshold, n_boot, rng)}


def judge_diagnostics(table: pd.DataFrame, *, threshold: float = MASS_THRESHOLD, n_boot: int = N_BOOT,
                      seed: int = 0) -> dict[str, Any]:
    """The ``judge_diagnostics`` section of an audit from the judge's per-row table (the scores
    table's keys and ``DIGIT_COLUMNS``): ``digit_mass`` per condition (and pooled over the
    transplants), ``top_digit`` and ``share`` on the original condition (see the module doc)."""
    missing = [c for c in ("prompt_id", "condition", *DIGIT_COLUMNS) if c not in table.columns]
    if missing:
        raise DataError(f"judge diagnostics table lacks column(s) {missing}; it has {list(table.columns)}",
                        field=missing[0])
    t = table[np.isfinite(table[list(DIGIT_COLUMNS)].to_numpy(float)).all(axis=1)]
    out: dict[str, Any] = {"threshold": float(threshold), "n_rows": int(len(t)),
                           "n_rows_not_finite": int(len(table) - len(t))}
    if not len(t):
        return out
    t = pd.concat([t.reset_index(drop=True), digit_summary(t.reset_index(drop=True))], axis=1)
    conditions = list(dict.fromkeys(t["condition"]))
    mass: dict[str, Any] = {}
    for i, cond in enumerate(conditions):
        g = t[t["condition"] == cond]
        mass[cond] = _mass_block(g["digit_mass"].to_numpy(float), g["prompt_id"].to_numpy(), threshold, n_boot,
                                 _rng(seed, "mass", i))
    tr = t[t["condition"].isin(TRANSPLANT_KINDS)]
    if len(tr) and tr["condition"].nunique() > 1:  # one kind alone is already its own row
        mass["transplants"] = _mass_block(tr["digit_mass"].to_numpy(float), tr["prompt_id"].to_numpy(), threshold,
                                          n_boot, _rng(seed, "mass", len(conditions)))
    out["digit_mass"] = mass
    o = t[t["condition"] == "original"]
    if len(o):
        counts = o["top_digit"].value_counts()
        n = int(len(o))
        out["top_digit"] = {"condition": "original", "n_rows": n,
                            "counts": {str(d): int(counts.get(d, 0)) for d in range(1, 6)},
                            "shares": {str(d): float(counts.get(d, 0) / n) for d in range(1, 6)}}
        g = o["prompt_id"].to_numpy()
        pair = share_pair(o["logit_top"].to_numpy(float), o["expected_digit"].to_numpy(float), g,
                          names=("logit_top_digit", "expected_digit"), n_boot=n_boot, rng=_rng(seed, "share"))
        if pair:
            pair["ranks"] = share(rankdata(o["expected_digit"].to_numpy(float)), g, n_boot=n_boot,
                                  rng=_rng(seed, "ranks"))
            out["share"] = pair
    return out
