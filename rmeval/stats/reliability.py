"""Rater reliability from per-annotator ratings, and the reliability-corrected human share.

Under an independent additive-noise model a rating is true quality plus rater noise; the noise
adds to the within-prompt variance only, so the observed share is the share of the true
quality times the ratings' reliability R. The corrected share is share / R, its interval the
share's interval over R (R held fixed: it is usually borrowed from another rating set, so the
correction is a sensitivity analysis, not a ceiling). Reliabilities from annotations grouped by
response (HelpSteer2's ``disagreements`` file):

* ``single_rater``: ICC(1) of the individual annotations grouped by response -- the reliability
  of one rater (the study: 0.48 on HelpSteer2);
* ``one_vs_rest``: pooled correlation of each annotation with the mean of the response's other
  annotations (0.62);
* ``kept_three``: ICC(1) over each response's three most agreeing annotations (smallest
  variance), the three the released label averages (0.78);
* ``mean_of_k``: Spearman-Brown step-up of ``single_rater`` to a mean of k raters (k = 3 gives
  the released HelpSteer2 rating's 0.73), and of ``one_vs_rest`` likewise (0.83).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np

from rmcore.data.variance import group_codes, icc1

from .prompt_means import loo_correlation
from .settings import N_BOOT


def spearman_brown(r: float, k: float) -> float:
    """Reliability of the mean of k raters whose single-rater reliability is r."""
    return float(k * r / (1.0 + (k - 1.0) * r))


def _kept_three(values: np.ndarray, codes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The three annotations of each response (with >= 3) whose variance is smallest."""
    vals, grp = [], []
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=k)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    sv = values[order]
    for g in np.flatnonzero(sizes >= 3):
        a = sv[starts[g]:starts[g] + sizes[g]]
        best = min(combinations(range(len(a)), 3), key=lambda c: (np.var(a[list(c)]), c))
        vals += [a[i] for i in best]
        grp += [g] * 3
    return np.asarray(vals, dtype=float), np.asarray(grp)


def rater_reliability(values: np.ndarray, response_ids: Any, *, k: float = 3.0, n_boot: int = N_BOOT,
                      rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """Reliabilities of one attribute's annotations (one row per annotation; see module doc)."""
    v = np.asarray(values, dtype=float)
    codes, uniq = group_codes(np.asarray(response_ids))
    single = icc1(v, codes)
    ovr = loo_correlation(v, codes, n_boot=n_boot, rng=rng)
    kv, kg = _kept_three(v, codes, len(uniq))
    kept = icc1(kv, kg) if len(kv) else float("nan")
    sizes = np.bincount(codes, minlength=len(uniq))
    return {
        "single_rater": float(single),
        "one_vs_rest": float(ovr["estimate"]),
        "one_vs_rest_ci95": ovr["ci95"],
        "kept_three": float(kept),
        f"mean_of_{k:g}": spearman_brown(single, k),
        f"one_vs_rest_mean_of_{k:g}": spearman_brown(float(ovr["estimate"]), k),
        "n_responses": int(len(uniq)),
        "n_annotations": int(len(v)),
        "annotations_per_response": {str(int(n)): int(c) for n, c in zip(*np.unique(sizes, return_counts=True))},
    }


def corrected_share(share_result: dict[str, Any], reliability: float) -> dict[str, Any]:
    """share / R with the share's interval over R (R fixed)."""
    r = float(reliability)
    if not 0.0 < r <= 1.0:
        raise ValueError(f"a reliability must be in (0, 1], got {r}")
    lo, hi = share_result["ci95"]
    return {"estimate": float(share_result["estimate"]) / r, "ci95": [float(lo) / r, float(hi) / r],
            "reliability": r, "n_prompts": share_result.get("n_prompts")}
