"""Global selection with and without sibling centring.

Keeping the top fraction of ALL responses by raw score rewards responses to "easy" prompts when the
score carries a prompt effect; centring each score on its siblings (leave-one-out mean of the
other responses to the same prompt) removes that effect. The difference in the human rating of
the kept sets shows what centring buys.

The bootstrap resamples prompts; a resampled prompt drawn twice contributes its responses twice.
Because centring is within-prompt, each response's centred score does not change across
resamples, so the responses are sorted once and each resample is a cumulative-weight cut of that
one order -- fully vectorised, and exact with duplicated prompts (fractional weight at the cut).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import spearmanr

from .bootstrap import resample_weights, rows_with_siblings, summarize


def loo_centered(values: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    """value minus the mean of the OTHER values in its group (groups of size >= 2)."""
    n = np.bincount(codes, minlength=k).astype(float)
    tot = np.bincount(codes, weights=values, minlength=k)
    return values - (tot[codes] - values) / (n[codes] - 1)


def _top_mean(order: np.ndarray, rating: np.ndarray, w_resp: np.ndarray, fraction: float) -> np.ndarray:
    """Mean rating of the top ``round(fraction * N)`` responses in ``order`` (best first), for
    each row of response weights ``w_resp`` (B, n)."""
    w = w_resp[:, order]
    total = w.sum(axis=1)
    m = np.round(fraction * total)
    cum = np.cumsum(w, axis=1)
    kept = np.clip(m[:, None] - (cum - w), 0.0, w)  # how much of each response's weight is kept
    return (kept * rating[order][None, :]).sum(axis=1) / m


def top_selection(score: np.ndarray, rating: np.ndarray, groups: Any, *, top_fraction: float = 0.3,
                  n_boot: int = 2000, rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """{top30_raw, top30_centered, delta (centred - raw, paired), spearman, n_responses, n_dropped}."""
    # leave-one-out centring needs a sibling
    (s, h), codes, k, n_dropped = rows_with_siblings(groups, score, rating)
    if k < 2:
        return {}
    c = loo_centered(s, codes, k)
    hc = loo_centered(h, codes, k)
    # stable descending order; ties broken by position so the cut is deterministic
    order_raw = np.argsort(-s, kind="stable")
    order_cen = np.argsort(-c, kind="stable")
    ones = np.ones((1, len(s)))
    w_prompt = resample_weights(k, n_boot, np.random.default_rng(rng))
    w_resp = w_prompt[:, codes]  # same resampled prompts for both selections: a paired bootstrap
    est_raw = float(_top_mean(order_raw, h, ones, top_fraction)[0])
    est_cen = float(_top_mean(order_cen, h, ones, top_fraction)[0])
    boot_raw = _top_mean(order_raw, h, w_resp, top_fraction)
    boot_cen = _top_mean(order_cen, h, w_resp, top_fraction)
    pct = int(round(100 * top_fraction))
    out: dict[str, Any] = {
        f"top{pct}_raw": summarize(est_raw, boot_raw, k, n_boot),
        f"top{pct}_centered": summarize(est_cen, boot_cen, k, n_boot),
        "delta": summarize(est_cen - est_raw, boot_cen - boot_raw, k, n_boot),
        "spearman": {
            "raw_vs_raw": float(spearmanr(s, h)[0]),
            "centered_vs_centered": float(spearmanr(c, hc)[0]),
            "raw_vs_centered": float(spearmanr(s, hc)[0]),
            "centered_vs_raw": float(spearmanr(c, h)[0]),
        },
        "n_kept": int(round(top_fraction * len(s))),
        "n_responses": int(len(s)),
        "n_dropped": n_dropped,
    }
    return out
