"""Robustness of the suitability test (Reward Auditor, appendix B.1): is ΔM normal, and does the
verdict depend on the test statistic or on the test?

Per perturbation, on ΔM over every item of the perturbed set (0 for a twin the scorer cannot tell
from its original, as in the main test):

- normality of ΔM: Shapiro–Wilk W and its p (``scipy.stats.shapiro``; 3 ≤ n), and D'Agostino–
  Pearson K² = Z_skew² + Z_kurt² and its χ²₂ p (``scipy.stats.normaltest``, the paper's test; n ≥ 20,
  where the kurtosis test's normal approximation holds) with Table 2's stars (p < 0.05 / 0.01 /
  0.001). A small p rejects normality;
- location statistics under the same sign-flip scheme as the audit's t (the same seed gives item i
  the same sign in every statistic): the median and the 20%-trimmed mean (``scipy.stats.trim_mean``,
  ⌊0.2 n⌋ cut from each end), one-sided p = (b + 1) / (B + 1), b = #{stat(s ⊙ ΔM) ≥ stat(ΔM)}. The
  mean needs no column of its own: Σ ΔM² does not change under sign flips and t is increasing in
  Σ ΔM on the attainable range, so the mean's p is exactly the t's;
- the tests beside the permutation test: the parametric paired t-test (one-sided, Student t with
  n − 1 df) and the Wilcoxon signed-rank test (one-sided, ``scipy.stats.wilcoxon``: zeros dropped,
  exact null distribution for ≤ 50 non-zero differences without ties, else the normal
  approximation with tie correction);
- agreement across cells (perturbations, and models of a panel): Spearman ρ between the p-values
  of each pair of methods, as the paper's Figures 4-6 (ρ and its two-sided p; needs 3 cells).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from rmeval.stats.confidence_drop import DEFAULT_B, at_least, sign_bits, stars

TRIM = 0.2
METHODS = ("p_permutation_t", "p_permutation_median", "p_permutation_trimmed_mean", "p_ttest", "p_wilcoxon")


def _statistics(x: np.ndarray, trim: float) -> np.ndarray:
    """(median, trimmed mean) along the last axis."""
    return np.stack([np.median(x, axis=-1), stats.trim_mean(x, trim, axis=-1)], axis=-1)


def normality(delta: np.ndarray) -> dict[str, float]:
    """Shapiro–Wilk and D'Agostino–Pearson tests of ΔM (NaN where a test does not apply)."""
    x = np.asarray(delta, dtype=np.float64)
    out = {"shapiro_w": float("nan"), "shapiro_p": float("nan"), "dagostino_k2": float("nan"),
           "dagostino_p": float("nan")}
    if x.size < 3 or np.ptp(x) == 0:
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # n > 5000: scipy warns the p may be inaccurate
        w = stats.shapiro(x)
    out["shapiro_w"], out["shapiro_p"] = float(w.statistic), float(w.pvalue)
    if x.size >= 20:
        k2 = stats.normaltest(x)
        out["dagostino_k2"], out["dagostino_p"] = float(k2.statistic), float(k2.pvalue)
        out["dagostino_stars"] = stars(float(k2.pvalue))
    return out


def robustness(deltas: Mapping[str, np.ndarray], changed: Mapping[str, np.ndarray] | None = None, *,
               n_permutations: int = DEFAULT_B, seed: int = 0, trim: float = TRIM,
               tested: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    """Per code (only ``tested`` when given): the normality tests, the sign-flip p of the median and
    the trimmed mean, the t-test and Wilcoxon p. ``deltas``/``changed`` as in
    ``suitability_inference`` (item-aligned, NaN: no twin)."""
    codes = [c for c in deltas if tested is None or c in tested]
    out: dict[str, dict[str, float]] = {}
    if not codes:
        return out
    rows = max(len(deltas[c]) for c in codes)
    cols, keep = [], []
    for c in codes:
        x = np.full(rows, np.nan)
        x[: len(deltas[c])] = np.asarray(deltas[c], dtype=np.float64)
        ok = ~np.isnan(x)
        ch = np.zeros(rows, dtype=bool)
        ch[: len(deltas[c])] = (np.asarray(changed[c], dtype=bool) if changed is not None and c in changed
                                else np.nan_to_num(x[: len(deltas[c])]) != 0)
        cols.append(np.where(ch & ok, x, 0.0))
        keep.append(ok)
    obs = [_statistics(col[k], trim) for col, k in zip(cols, keep)]
    b = [np.zeros(2, dtype=np.int64) for _ in codes]
    for bits in sign_bits(rows, n_permutations, seed):
        signs = 2.0 * bits - 1.0
        for j, (col, k) in enumerate(zip(cols, keep)):
            b[j] += at_least(_statistics(signs[:, k] * col[k], trim), obs[j]).sum(0)
    for j, c in enumerate(codes):
        x = cols[j][keep[j]]
        p_med, p_trim = (b[j] + 1.0) / (n_permutations + 1.0)
        rec = {**normality(x), "median_delta": float(obs[j][0]), "trimmed_mean_delta": float(obs[j][1]),
               "p_permutation_median": float(p_med), "p_permutation_trimmed_mean": float(p_trim)}
        rec["p_ttest"] = (float(stats.ttest_1samp(x, 0.0, alternative="greater").pvalue)
                          if x.size > 1 and np.ptp(x) > 0 else float("nan"))
        nz = x[x != 0]
        if nz.size:
            w = stats.wilcoxon(nz, alternative="greater")
            rec["wilcoxon_w"], rec["p_wilcoxon"] = float(w.statistic), float(w.pvalue)
        else:
            rec["wilcoxon_w"], rec["p_wilcoxon"] = float("nan"), float("nan")
        out[c] = rec
    return out


def method_agreement(cells: Sequence[Mapping[str, Any]], methods: Sequence[str] = METHODS) -> dict[str, Any]:
    """Spearman ρ (and two-sided p) between the p-values of every pair of ``methods`` over the
    ``cells`` (one record per tested perturbation and model, holding each method's p); pairs with
    fewer than 3 finite cells give NaN."""
    out: dict[str, Any] = {"n_cells": len(cells), "pairs": {}}
    for a, b in itertools.combinations(methods, 2):
        x = np.array([float(c.get(a, np.nan)) for c in cells])
        y = np.array([float(c.get(b, np.nan)) for c in cells])
        ok = np.isfinite(x) & np.isfinite(y)
        rho = p = float("nan")
        if ok.sum() >= 3 and np.ptp(x[ok]) > 0 and np.ptp(y[ok]) > 0:
            res = stats.spearmanr(x[ok], y[ok])
            rho, p = float(res.statistic), float(res.pvalue)
        out["pairs"][f"{a} vs {b}"] = {"spearman": rho, "p_value": p, "n": int(ok.sum())}
    return out
