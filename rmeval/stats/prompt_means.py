"""Prompt-level agreement: correlations of prompt means, the leave-one-out rating correlation and
the longer-minus-shorter prompt split.

* ``prompt_mean_correlation``: Pearson correlation across prompts of the mean of one measurement
  (a model's score) with the mean of another (the human rating, or the score under another
  prompt condition) over the same responses. When both means rest on the same few responses the
  response-level noise they share inflates it (on HelpSteer2 both rest on the same two).
* ``disjoint_half_correlation``: the same with the two means taken on disjoint halves of each
  prompt's responses (first half by position vs the rest), symmetrised: the mean of
  corr(x on half A, y on half B) and corr(x on half B, y on half A). Shared response noise cannot
  enter it. With x = y it is the humans' own split-half correlation.
* ``loo_correlation``: pooled Pearson correlation over responses of each value with the mean of
  the OTHER values of its prompt (HelpSteer2's two sequentially rated responses give -0.08).
* ``prompt_split_difference``: mean over responses to the prompts above the median of a prompt
  feature (prompt length) minus the mean over the rest, in SDs of the values and in raw units
  (the core is ``rmeval.stats.splits``, shared with the model-side prompt splits).

Every statistic is a function of per-prompt sums, bootstrapped over prompts like the others.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .bootstrap import bootstrap_stat, per_prompt_sums, resample_weights, rows_with_siblings, summarize
from .settings import N_BOOT
from .splits import above_median, split_in_sd, split_points, split_sums
from .transplant import pearson_from_sums  # the one Pearson-from-sums


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x, y = x - x.mean(), y - y.mean()  # Pearson is shift-invariant; centring avoids cancellation
    return np.column_stack([np.ones_like(x), x, y, x * x, y * y, x * y])


def _weights(k: int, n_boot: int, rng: Any, weights: np.ndarray | None) -> np.ndarray:
    return weights if weights is not None else resample_weights(k, n_boot, np.random.default_rng(rng))


def _means(values: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    n = np.bincount(codes, minlength=k).astype(float)
    return np.bincount(codes, weights=values, minlength=k) / n


def prompt_mean_correlation(x: np.ndarray, y: np.ndarray, groups: Any, *, n_boot: int = N_BOOT,
                            rng: np.random.Generator | int | None = 0,
                            weights: np.ndarray | None = None) -> dict[str, Any]:
    """Pearson r across prompts of mean x with mean y (rows finite in both; >= 2 per prompt)."""
    (xv, yv), codes, k, n_dropped = rows_with_siblings(groups, x, y)
    if k < 3:
        return summarize(float("nan"), None, k, 0, n_dropped=n_dropped)
    per = _pearson_rows(_means(xv, codes, k), _means(yv, codes, k))
    w = _weights(k, n_boot, rng, weights)
    est, boot = bootstrap_stat(per, pearson_from_sums, w)
    return summarize(est, boot, k, w.shape[0], n_dropped=n_dropped)


def half_masks(codes: np.ndarray, k: int) -> np.ndarray:
    """True for the first floor(n_i / 2) responses of each prompt (in row order): half A."""
    order = np.argsort(codes, kind="stable")
    pos = np.empty(len(codes), dtype=np.int64)
    sizes = np.bincount(codes, minlength=k)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pos[order] = np.arange(len(codes)) - np.repeat(starts, sizes)
    return pos < (sizes // 2)[codes]


def disjoint_half_correlation(x: np.ndarray, y: np.ndarray, groups: Any, *, n_boot: int = N_BOOT,
                              rng: np.random.Generator | int | None = 0,
                              weights: np.ndarray | None = None) -> dict[str, Any]:
    """Symmetrised correlation across prompts of mean x on one half of a prompt's responses with
    mean y on the other half (see module doc)."""
    (xv, yv), codes, k, n_dropped = rows_with_siblings(groups, x, y)
    if k < 3:
        return summarize(float("nan"), None, k, 0, n_dropped=n_dropped)
    a = half_masks(codes, k)
    b = ~a

    def half_mean(v: np.ndarray, m: np.ndarray) -> np.ndarray:
        return np.bincount(codes[m], weights=v[m], minlength=k) / np.bincount(codes[m], minlength=k)

    per = np.column_stack([_pearson_rows(half_mean(xv, a), half_mean(yv, b)),
                           _pearson_rows(half_mean(xv, b), half_mean(yv, a))])

    def stat(s: np.ndarray) -> np.ndarray:
        return 0.5 * (pearson_from_sums(s[..., :6]) + pearson_from_sums(s[..., 6:]))

    w = _weights(k, n_boot, rng, weights)
    est, boot = bootstrap_stat(per, stat, w)
    return summarize(est, boot, k, w.shape[0], n_dropped=n_dropped)


def loo_correlation(values: np.ndarray, groups: Any, *, n_boot: int = N_BOOT,
                    rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """Pooled Pearson r over responses of each value with the mean of its siblings' values."""
    (v,), codes, k, n_dropped = rows_with_siblings(groups, values)
    if k < 3:
        return summarize(float("nan"), None, k, 0, n_dropped=n_dropped)
    n = np.bincount(codes, minlength=k).astype(float)
    tot = np.bincount(codes, weights=v, minlength=k)
    sib = (tot[codes] - v) / (n[codes] - 1)
    per = per_prompt_sums(codes, _pearson_rows(v, sib), k)
    w = resample_weights(k, n_boot, np.random.default_rng(rng))
    est, boot = bootstrap_stat(per, pearson_from_sums, w)
    return summarize(est, boot, k, n_boot, n_dropped=n_dropped, n_responses=int(len(v)))


def prompt_split_difference(values: np.ndarray, groups: Any, prompt_feature: np.ndarray, *,
                            n_boot: int = N_BOOT, rng: np.random.Generator | int | None = 0
                            ) -> dict[str, Any]:
    """Mean value on prompts whose feature is above the median prompt's minus the mean on the
    rest (``prompt_feature`` is given per row and must be constant within a prompt).

    {estimate (in SDs of the values, SD recomputed per resample), points (raw units),
    n_long_prompts, n_short_prompts}. The split is fixed once on the full sample."""
    (v, f), codes, k, n_dropped = rows_with_siblings(groups, values, prompt_feature)
    if k < 4:
        return {}
    long_prompt = above_median(f, codes, k)
    per = split_sums(v, codes, k, long_prompt[codes])
    w = resample_weights(k, n_boot, np.random.default_rng(rng))
    est, boot = bootstrap_stat(per, split_in_sd, w)
    est_p, boot_p = bootstrap_stat(per, split_points, w)
    return summarize(est, boot, k, n_boot, points=summarize(est_p, boot_p, k, n_boot),
                     n_long_prompts=int(long_prompt.sum()), n_short_prompts=int((~long_prompt).sum()),
                     n_dropped=n_dropped)
