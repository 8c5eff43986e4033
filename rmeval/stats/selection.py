"""Global selection with and without sibling centring.

Keeping the top fraction of ALL responses by raw score rewards responses to "easy" prompts when the
score carries a prompt effect; centring each score on its siblings (leave-one-out mean of the
other responses to the same prompt, the study's "mean score of other responses to the same
prompt") removes that effect. The difference in the human rating of the kept sets shows what
centring buys.

The centred rating that the Spearman correlations compare with is the study's prompt-centred human
rating: the rating minus the mean rating of ALL the prompt's responses (itself included). With
unequal group sizes it is not a rescaling of the leave-one-out centred rating
(h - mean_others = n/(n-1) (h - mean_all), a factor that differs between prompts), so the two rank
responses differently; ``loo_centered`` remains for the scores.

Both centrings are exact, so that exact ties stay ties whatever the row order. In floating point a
group's sum depends on the order of its terms (0.1 + 0.2 + 0.7 is 1.0, 0.7 + 0.2 + 0.1 is
0.9999999999999999), and so would two equal centred values, and with them the kept set and the
ranks. Every finite float is an integer over a power of two, so one power of two S makes every
value an integer X_i = S x_i; with the group's total T_g = sum_j X_j (integers: exact in any
order) the two centred values are single, correctly rounded divisions of integers::

    leave-one-out:  x_i - (t_g - x_i) / (n_g - 1) = (n_g X_i - T_g) / ((n_g - 1) S)
    prompt-centred: x_i - t_g / n_g               = (n_g X_i - T_g) / (n_g S)

Two responses whose centred values are equal get the same float; on integer ratings (S = 1) the
prompt-centred ratings 2 - 5/3 and 3 - 8/3, both 1/3, are one float, where the float formula gives
0.33333333333333326 and 0.3333333333333335.

The kept set (``top_mean``, the one rule of every top-fraction selection in ``rmeval.stats``):
the top round(fraction * N) responses by score (``np.round``, half to even), N the total weight.
Responses tied on the score at the cut are kept in part: each of a tied block's rows counts with
weight (slots left) / (the block's weight), so the figure is the EXPECTED kept mean when ties are
broken uniformly at random -- a function of the scores and ratings alone, not of the row order.
Without ties at the cut it is the plain mean of the kept ratings.

The bootstrap resamples prompts; a resampled prompt drawn twice contributes its responses twice.
Because centring is within-prompt, each response's centred score does not change across
resamples, so the responses are sorted once and each resample is a cumulative-weight cut of that
one order -- fully vectorised, and exact with duplicated prompts (fractional weight at the cut; a
tied block's copies share the slots left like any other tied rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import spearmanr

from .bootstrap import resample_weights, rows_with_siblings, summarize
from .settings import N_BOOT


def _exact_centred(values: np.ndarray, codes: np.ndarray, k: int, left_out: int) -> np.ndarray | None:
    """(n_g X_i - T_g) / ((n_g - left_out) S) per row, on integers (module doc; left_out 1: the
    leave-one-out value, 0: the prompt-centred one); None where a value is not finite or a result
    overflows a float (the float formula then stands)."""
    v = np.asarray(values, dtype=float)
    if not np.isfinite(v).all():
        return None
    ratios = [x.as_integer_ratio() for x in v.tolist()]  # x = num / den, den a power of two
    scale = max((den for _, den in ratios), default=1)
    ints = [num * (scale // den) for num, den in ratios]
    group = codes.tolist()
    tot = [0] * k
    for g, x in zip(group, ints):
        tot[g] += x
    n = np.bincount(codes, minlength=k).tolist()
    try:
        return np.array([(n[g] * x - tot[g]) / ((n[g] - left_out) * scale) for g, x in zip(group, ints)], dtype=float)
    except OverflowError:
        return None


def loo_centered(values: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    """value minus the mean of the OTHER values in its group (groups of size >= 2), exactly: one
    correctly rounded division of integers (module doc), so equal values are equal floats."""
    exact = _exact_centred(values, codes, k, left_out=1)
    if exact is not None:
        return exact
    n = np.bincount(codes, minlength=k).astype(float)
    tot = np.bincount(codes, weights=values, minlength=k)
    return values - (tot[codes] - values) / (n[codes] - 1)


def prompt_centered(values: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    """value minus the mean of ALL the values in its group (itself included): the study's
    prompt-centred rating, exactly as ``loo_centered``."""
    exact = _exact_centred(values, codes, k, left_out=0)
    if exact is not None:
        return exact
    n = np.bincount(codes, minlength=k).astype(float)
    return values - (np.bincount(codes, weights=values, minlength=k) / n)[codes]


def top_mean(score: np.ndarray, rating: np.ndarray, weights_t: np.ndarray, fraction: float) -> np.ndarray:
    """(B,) mean rating of the top ``round(fraction * W)`` of the weight by ``score`` (best first),
    for each column of the (n, B) response weights ``weights_t`` (W: a column's total). Ties on the
    score at the cut are kept with fractional weight -- the expected mean under uniformly random
    tie-breaking (module doc) -- so the result does not depend on the row order. Rows of weight 0
    take no part (a caller masks rows out with weight 0 and any score, e.g. -inf)."""
    score = np.asarray(score, dtype=float)
    order = np.argsort(-score, kind="stable")
    w = weights_t[order]
    r = np.asarray(rating, dtype=float)[order]
    m = np.round(fraction * w.sum(axis=0))
    sorted_s = score[order]
    new_block = np.r_[True, sorted_s[1:] != sorted_s[:-1]]
    if new_block.all():  # no ties: each row is kept whole, in part (the one row at the cut) or not
        cum = np.cumsum(w, axis=0)
        kept = np.clip(m - (cum - w), 0.0, w)
        return (kept * r[:, None]).sum(axis=0) / m
    starts = np.flatnonzero(new_block)
    wb = np.add.reduceat(w, starts, axis=0)  # each tied block's weight and weighted rating sum
    rb = np.add.reduceat(w * r[:, None], starts, axis=0)
    cum = np.cumsum(wb, axis=0)
    kept = np.clip(m - (cum - wb), 0.0, wb)  # the slots each block fills
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(wb > 0, kept / wb, 0.0)
    return (share * rb).sum(axis=0) / m


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho; NaN (null in the JSON) without scipy's warning where either side is constant
    (a collapsed model's scores): the figure is undefined, which the record says."""
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y)[0])


def top_selection(score: np.ndarray, rating: np.ndarray, groups: Any, *, top_fraction: float = 0.3,
                  n_boot: int = N_BOOT, rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """{top30_raw, top30_centered, delta (centred - raw, paired), spearman, n_responses, n_dropped}.

    ``spearman``: pooled Spearman correlations of the raw and the leave-one-out centred score with
    the raw and the prompt-centred rating (module doc)."""
    # leave-one-out centring needs a sibling
    (s, h), codes, k, n_dropped = rows_with_siblings(groups, score, rating)
    if k < 2:
        return {}
    c = loo_centered(s, codes, k)
    hc = prompt_centered(h, codes, k)
    ones = np.ones((len(s), 1))
    w_prompt = resample_weights(k, n_boot, np.random.default_rng(rng))
    w_resp = np.ascontiguousarray(w_prompt.T)[codes]  # (n, B); the same resampled prompts for both: paired
    est_raw = float(top_mean(s, h, ones, top_fraction)[0])
    est_cen = float(top_mean(c, h, ones, top_fraction)[0])
    boot_raw = top_mean(s, h, w_resp, top_fraction)
    boot_cen = top_mean(c, h, w_resp, top_fraction)
    pct = int(round(100 * top_fraction))
    out: dict[str, Any] = {
        f"top{pct}_raw": summarize(est_raw, boot_raw, k, n_boot),
        f"top{pct}_centered": summarize(est_cen, boot_cen, k, n_boot),
        "delta": summarize(est_cen - est_raw, boot_cen - boot_raw, k, n_boot),
        "spearman": {
            "raw_vs_raw": _spearman(s, h),
            "centered_vs_centered": _spearman(c, hc),
            "raw_vs_centered": _spearman(s, hc),
            "centered_vs_raw": _spearman(c, h),
        },
        "n_kept": int(round(top_fraction * len(s))),
        "n_responses": int(len(s)),
        "n_dropped": n_dropped,
    }
    return out
