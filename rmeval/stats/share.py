"""Between-prompt variance share with a prompt bootstrap.

The ICC(1) estimator itself is :mod:`rmcore.data.variance` (one implementation for the simulator
and the audit). Prompts with a single response carry no within-prompt information; they are left
out and counted (``n_dropped``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rmcore.data.variance import icc1, icc_from_sums, icc_sufficient, keep_multi

from .bootstrap import (
    PromptSetResamples,
    bootstrap_stat,
    per_prompt_sums,
    resample_weights,
    rows_with_siblings,
    summarize,
)
from .settings import N_BOOT

__all__ = ["icc1", "residual_share", "share", "share_pair"]


def share(values: np.ndarray, groups: Any, *, n_boot: int = N_BOOT,
          rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """{estimate, ci95, n_prompts, n_boot, n_dropped}: ICC(1) with a prompt bootstrap."""
    v, codes, k, n_dropped = keep_multi(values, groups)
    if k < 2:
        return summarize(float("nan"), None, k, 0, n_dropped=n_dropped)
    x = icc_sufficient(v, codes, k)
    w = resample_weights(k, n_boot, np.random.default_rng(rng))
    est, boot = bootstrap_stat(x, icc_from_sums, w)
    return summarize(est, boot, k, n_boot, n_dropped=n_dropped)


def _residual_icc_from_sums(s: np.ndarray) -> np.ndarray:
    """ICC(1) of y residualised on x by OLS over the (resampled) responses, from group sums.

    Columns: groups, N, sum n_i^2, Sx, Sy, Qx, Qy, Sxy, Sy^2/n, Sx^2/n, SxSy/n (all summed).
    Refitting the regression inside each resample keeps the length adjustment's own
    uncertainty in the interval.
    """
    g, n, n2, sx, sy, qx, qy, sxy, ayy, axx, axy = (s[..., i] for i in range(11))
    b = (sxy - sx * sy / n) / (qx - sx * sx / n)
    a = (sy - b * sx) / n
    t_r = sy - a * n - b * sx
    a_r = ayy + a * a * n + b * b * axx - 2 * a * sy - 2 * b * axy + 2 * a * b * sx
    q_r = qy + a * a * n + b * b * qx - 2 * a * sy - 2 * b * sxy + 2 * a * b * sx
    return icc_from_sums(np.stack([g, n, n2, t_r, a_r, q_r], axis=-1))


def residual_share(values: np.ndarray, covariate: np.ndarray, groups: Any, *, n_boot: int = N_BOOT,
                   rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """Share of ``values`` after OLS residualisation on ``covariate`` across all responses."""
    (v, c), codes, k, n_dropped = rows_with_siblings(groups, values, covariate)
    if k < 2:
        return summarize(float("nan"), None, k, 0, n_dropped=n_dropped)
    per, _ = _share_columns(v, codes, k, c)
    w = resample_weights(k, n_boot, np.random.default_rng(rng))
    est, boot = bootstrap_stat(per, _residual_icc_from_sums, w)
    return summarize(est, boot, k, n_boot, n_dropped=n_dropped)


def _share_columns(values: np.ndarray, codes: np.ndarray, k: int,
                   covariate: np.ndarray | None) -> tuple[np.ndarray, Any]:
    """(per-prompt sums, stat) of the plain share, or of the share after log-length-style OLS
    residualisation on ``covariate`` (see :func:`residual_share`)."""
    if covariate is None:
        return icc_sufficient(values, codes, k), icc_from_sums
    y, x = values - values.mean(), covariate - covariate.mean()
    sums = per_prompt_sums(codes, np.column_stack([x, y, x * x, y * y, x * y]), k)
    n = np.bincount(codes, minlength=k).astype(float)
    sx, sy = sums[:, 0], sums[:, 1]
    per = np.column_stack([np.ones(k), n, n * n, sx, sy, sums[:, 2], sums[:, 3], sums[:, 4],
                           sy * sy / n, sx * sx / n, sx * sy / n])
    return per, _residual_icc_from_sums


def share_pair(a: np.ndarray, b: np.ndarray, groups: Any, *, covariate: np.ndarray | None = None,
               n_boot: int = N_BOOT, rng: np.random.Generator | int | None = 0,
               names: tuple[str, str] = ("a", "b"), resamples: PromptSetResamples | None = None) -> dict[str, Any]:
    """Shares of two measurements of the SAME responses and their paired difference a - b.

    Rows where either value (or the covariate) is not finite are left out for both, so the two
    shares rest on the same responses and prompts; both are computed on the same prompt
    resamples, which is what makes the difference's interval paired. The resamples are
    ``resamples.weights(prompts)`` when a :class:`PromptSetResamples` is given (the audit's
    ``n_boot`` and ``seed``, one matrix per prompt set), else ``n_boot`` draws from ``rng``. With
    ``covariate`` both are log-length-style residual shares. Returns {names[0], names[1],
    difference, n_responses}.
    """
    cols = (a, b) if covariate is None else (a, b, covariate)
    kept, codes, k, n_dropped, prompts = rows_with_siblings(groups, *cols, return_prompts=True)
    if k < 2:
        return {}
    cov = kept[2] if covariate is not None else None
    per_a, fn = _share_columns(kept[0], codes, k, cov)
    per_b, _ = _share_columns(kept[1], codes, k, cov)
    if resamples is not None:
        w = resamples.weights(prompts)
    else:
        w = resample_weights(k, n_boot, np.random.default_rng(rng))
    n_boot = w.shape[0]
    est_a, boot_a = bootstrap_stat(per_a, fn, w)
    est_b, boot_b = bootstrap_stat(per_b, fn, w)
    return {names[0]: summarize(est_a, boot_a, k, n_boot, n_dropped=n_dropped),
            names[1]: summarize(est_b, boot_b, k, n_boot, n_dropped=n_dropped),
            "difference": summarize(est_a - est_b, boot_a - boot_b, k, n_boot),
            "n_responses": int(len(kept[0]))}
