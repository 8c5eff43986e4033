"""Sibling-rating regression: does a response's score depend on how good its siblings are?

OLS with intercept of the z-scored original score on the shown response's rating and the mean
rating of the OTHER responses to the same prompt. A reward model that judges the response alone
has b_sibling ~ 0; one that mostly scores the prompt has b_sibling ~ b_shown (for k = 2 the prompt
mean enters both). With k responses per prompt:

    between-prompt slope = b_shown + b_sibling,   within-prompt slope = b_shown - b_sibling/(k-1)

The score is z-scored with the SD the other statistics use (transplant margins, shifts): the SD of
every finite original score, recomputed in each resample of prompts, including responses the
regression itself cannot use (unrated, or a prompt's only rated response).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .bootstrap import group_codes, per_prompt_sums, resample_weights, rows_with_siblings, summarize
from .settings import N_BOOT_REGRESSION

_IU = np.triu_indices(3)


def _coefs_from_sums(s: np.ndarray) -> np.ndarray:
    """(..., 12) sums -> (..., 2) [b_shown, b_sibling] on the z-scored score.

    Columns: 6 upper-triangle entries of X'X, 3 of X'y (y centred raw score), then n, sum y, sum y^2
    of every finite score (the SD's rows). Slopes on z = slopes on raw / SD(raw), with the SD
    recomputed in each resample.
    """
    shape = s.shape[:-1]
    xtx = np.zeros(shape + (3, 3))
    xtx[..., _IU[0], _IU[1]] = s[..., :6]
    xtx[..., _IU[1], _IU[0]] = s[..., :6]
    xty = s[..., 6:9]
    try:
        beta = np.linalg.solve(xtx, xty[..., None])[..., 0]
    except np.linalg.LinAlgError:  # a degenerate resample (e.g. constant ratings): pseudo-inverse
        beta = (np.linalg.pinv(xtx) @ xty[..., None])[..., 0]
    n, sy, qy = s[..., 9], s[..., 10], s[..., 11]
    sd = np.sqrt((qy - sy * sy / n) / (n - 1))
    return beta[..., 1:3] / sd[..., None]


def sibling_keys(score: np.ndarray, rating: np.ndarray, groups: Any) -> np.ndarray:
    """Prompt of each row the regression keeps (as in ``sibling_design``)."""
    g = np.asarray(groups)
    ok = np.isfinite(np.asarray(score, dtype=float)) & np.isfinite(np.asarray(rating, dtype=float))
    codes, uniq = group_codes(g[ok])
    sizes = np.bincount(codes, minlength=len(uniq))
    return g[ok][sizes[codes] >= 2]


def sibling_design(score: np.ndarray, rating: np.ndarray, groups: Any
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Rows kept (finite score and rating, >= 2 rated responses per prompt) as
    (score, rating, sibling mean rating, prompt codes, n_dropped_prompts)."""
    (s, h), codes, k, n_dropped = rows_with_siblings(groups, score, rating)
    n = np.bincount(codes, minlength=k).astype(float)
    tot = np.bincount(codes, weights=h, minlength=k)
    sib = (tot[codes] - h) / (n[codes] - 1)
    return s, h, sib, codes, n_dropped


def coefs_from_sums(s: np.ndarray) -> np.ndarray:
    """(..., 12) per-prompt sums of ``sibling_sums`` added up -> (..., 2) [b_shown, b_sibling]."""
    return _coefs_from_sums(s)


def sibling_sums(score: np.ndarray, rating: np.ndarray, groups: Any) -> tuple[np.ndarray, np.ndarray]:
    """The regression's per-prompt sufficient statistics: ((k, 12) sums, one row per prompt with a
    finite score, and the prompt id of each row). A resample of prompts is a weighted sum of the
    rows, whose coefficients ``coefs_from_sums`` gives."""
    s, h, sib, codes, _ = sibling_design(score, rating, groups)
    # every finite score, for the SD; the regression rows are mapped onto the same prompt codes
    score, g = np.asarray(score, dtype=float), np.asarray(groups)
    fin = np.isfinite(score)
    all_codes, all_prompts = group_codes(g[fin])
    _, kept_prompts = group_codes(sibling_keys(score, rating, groups))
    reg_codes = pd.Index(all_prompts).get_indexer(kept_prompts)[codes]
    k_all = len(all_prompts)
    centre = s.mean() if len(s) else 0.0
    y, ya = s - centre, score[fin] - centre
    x = np.column_stack([np.ones_like(h), h, sib])
    outer = (x[:, :, None] * x[:, None, :])[:, _IU[0], _IU[1]]
    per = np.column_stack([per_prompt_sums(reg_codes, np.column_stack([outer, x * y[:, None]]), k_all),
                           per_prompt_sums(all_codes, np.column_stack([np.ones_like(ya), ya, ya * ya]), k_all)])
    return per, all_prompts


def sibling_regression(score: np.ndarray, rating: np.ndarray, groups: Any, *, n_boot: int = N_BOOT_REGRESSION,
                       rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """{shown, sibling, [between_slope, within_slope]} each {estimate, ci95, n_prompts, n_boot}."""
    s, _, _, codes, n_dropped = sibling_design(score, rating, groups)
    k = int(codes.max()) + 1 if codes.size else 0
    if k < 3:
        return {}
    per, all_prompts = sibling_sums(score, rating, groups)
    k_all = len(all_prompts)
    w = resample_weights(k_all, n_boot, np.random.default_rng(rng))
    sizes = np.bincount(codes, minlength=k)
    full = per.sum(axis=0)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        coef_full = _coefs_from_sums(full)[0]
        coef_boot = _coefs_from_sums(w @ per)  # one solve per resample, shared by all outputs
    out: dict[str, Any] = {
        "shown": summarize(coef_full[0], coef_boot[:, 0], k, n_boot),
        "sibling": summarize(coef_full[1], coef_boot[:, 1], k, n_boot),
    }
    if np.all(sizes == sizes[0]):  # the slopes are only defined when every prompt has k responses
        kk = int(sizes[0])
        out["between_slope"] = summarize(coef_full.sum(), coef_boot.sum(axis=1), k, n_boot)
        out["within_slope"] = summarize(coef_full[0] - coef_full[1] / (kk - 1),
                                        coef_boot[:, 0] - coef_boot[:, 1] / (kk - 1), k, n_boot)
    out["n_responses"] = int(len(s))
    out["n_dropped"] = n_dropped
    return out

