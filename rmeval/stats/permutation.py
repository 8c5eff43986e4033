"""Exact two-sample permutation test on a difference in means (e.g. seed values of two arms).

Every split of the pooled values into groups of the two sizes is enumerated (C(n_a + n_b, n_a) of
them: 252 for 5 against 5), so the p-value is exact, not a Monte Carlo estimate. With 5 against 5
and no overlap, the one-sided p-value is 1/252 ~ 0.004, the smallest the design can give."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

MAX_SPLITS = 2_000_000


def exact_permutation_test(a: Sequence[float], b: Sequence[float], alternative: str = "greater") -> dict[str, Any]:
    """H1: mean(a) > mean(b) (`greater`) or < (`less`). p = share of splits whose difference in
    means is at least as extreme as the observed one (the observed split counts)."""
    if alternative not in ("greater", "less"):
        raise ValueError(f"alternative must be 'greater' or 'less', got {alternative!r}")
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    x, y = x[~np.isnan(x)], y[~np.isnan(y)]
    k, n = len(x), len(x) + len(y)
    out: dict[str, Any] = {"alternative": alternative, "n_a": k, "n_b": len(y)}
    if k == 0 or len(y) == 0:
        return {**out, "difference": float("nan"), "p_value": float("nan"), "n_splits": 0}
    n_splits = math.comb(n, k)
    if n_splits > MAX_SPLITS:
        raise ValueError(f"{n_splits} splits of {k} + {len(y)} values: too many to enumerate exactly")
    pooled = np.concatenate([x, y])
    total = pooled.sum()
    # The difference in means rises with the first group's sum (total fixed), so splits are
    # compared on that sum; a relative tolerance keeps float ties as ties.
    sums = np.fromiter((pooled[list(c)].sum() for c in itertools.combinations(range(n), k)), float, n_splits)
    obs = x.sum()
    tol = 1e-9 * max(1.0, abs(total))
    extreme = sums >= obs - tol if alternative == "greater" else sums <= obs + tol
    return {**out, "difference": float(x.mean() - y.mean()), "p_value": float(extreme.mean()), "n_splits": n_splits}
