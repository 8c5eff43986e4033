"""Between-prompt variance share: the one implementation of one-way random-effects ICC(1).

It lives with the data layer because both sides need it: the simulator calibrates its ratings to
a target share, and ``rmeval.stats.share`` bootstraps it over prompts. ANOVA estimator for unequal
group sizes, deliberately NOT truncated at zero (a negative share is information: values vary less
between prompts than chance would give)::

    MSB = SSB/(k-1),  MSW = SSW/(N-k),  n0 = (N - sum n_i^2 / N)/(k-1)
    share = (MSB - MSW) / (MSB + (n0 - 1) MSW)
    sigma_b^2 = (MSB - MSW) / n0,  sigma_w^2 = MSW     (the variance components; share = b / (b + w))

Groups with a single value carry no within-group information; they are left out and counted.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def group_codes(keys: Any) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes 0..k-1 for group keys (order of first appearance) and the unique keys."""
    import pandas as pd  # pandas: the statistics' settings and memory checks are read at --help

    codes, uniques = pd.factorize(pd.Series(keys), sort=False)
    return codes.astype(np.int64), np.asarray(uniques)


def mean_squares_from_sums(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(MSB, MSW, n0) from the sums of :func:`icc_sufficient`: groups, N, sum n_i^2, sum y,
    sum S_i^2/n_i, sum y^2."""
    g, n, n2, t, a, q = (s[..., i] for i in range(6))
    msb = (a - t * t / n) / (g - 1)
    msw = (q - a) / (n - g)
    n0 = (n - n2 / n) / (g - 1)
    return msb, msw, n0


def icc_from_sums(s: np.ndarray) -> np.ndarray:
    """ICC(1) from the sums of :func:`icc_sufficient` (module doc)."""
    msb, msw, n0 = mean_squares_from_sums(s)
    return (msb - msw) / (msb + (n0 - 1) * msw)


def components_from_sums(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The variance components of the one-way random-effects model: between-group
    sigma_b^2 = (MSB - MSW) / n0 (not truncated at zero) and within-group sigma_w^2 = MSW; the
    share is sigma_b^2 / (sigma_b^2 + sigma_w^2)."""
    msb, msw, n0 = mean_squares_from_sums(s)
    return (msb - msw) / n0, msw


def keep_multi(values: np.ndarray, groups: Any) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Drop NaN values and single-value groups; return (values, codes, k, n_dropped)."""
    v = np.asarray(values, dtype=float)
    g = np.asarray(groups)
    ok = np.isfinite(v)
    v, g = v[ok], g[ok]
    codes, uniq = group_codes(g)
    sizes = np.bincount(codes, minlength=len(uniq))
    multi = sizes[codes] >= 2
    n_dropped = int((sizes < 2).sum())
    codes, uniq = group_codes(g[multi])
    return v[multi], codes, len(uniq), n_dropped


def icc_sufficient(values: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    """(k, 6) per-group sufficient statistics of ICC(1)."""
    y = values - values.mean()  # centring only improves numerical accuracy; ICC is shift-invariant
    n = np.bincount(codes, minlength=k).astype(float)
    s = np.bincount(codes, weights=y, minlength=k)
    q = np.bincount(codes, weights=y * y, minlength=k)
    return np.column_stack([np.ones(k), n, n * n, s, s * s / n, q])


def icc1(values: np.ndarray, groups: Any) -> float:
    """ICC(1) point estimate (groups with one value are ignored; NaN with fewer than two groups)."""
    v, codes, k, _ = keep_multi(values, groups)
    if k < 2:
        return float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(icc_from_sums(icc_sufficient(v, codes, k).sum(axis=0)[None, :])[0])
