"""Prompt-level percentile bootstrap.

Why prompts: responses to one prompt are not independent, so the resampling unit is the prompt.
Every statistic here is written as a function of *per-prompt sufficient statistics* (a (k, m)
array, one row per prompt). A bootstrap resample is then a (B, k) matrix of prompt multiplicities
``W`` and the resampled sums are one matrix product ``W @ X`` -- no Python loop over resamples,
which is what keeps a whole audit under a few seconds.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from rmcore.variance import group_codes

Stat = Callable[[np.ndarray], np.ndarray]


def resample_indices(k: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, k) prompt indices drawn with replacement."""
    return rng.integers(0, k, size=(n_boot, k))


def index_weights(idx: np.ndarray, k: int) -> np.ndarray:
    """(B, k) index matrix -> (B, k) multiplicities (how often each prompt was drawn)."""
    b = idx.shape[0]
    flat = (idx + (np.arange(b) * k)[:, None]).ravel()
    return np.bincount(flat, minlength=b * k).reshape(b, k).astype(float)


def resample_weights(k: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, k) multiplicities of a prompt-level resample with replacement."""
    return index_weights(resample_indices(k, n_boot, rng), k)


def percentile_ci(boot: np.ndarray, level: float = 0.95) -> list[float]:
    """Percentile interval; resamples where the statistic is undefined (NaN) are ignored."""
    boot = np.asarray(boot, dtype=float)
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return [float("nan"), float("nan")]
    a = (1.0 - level) / 2.0
    lo, hi = np.percentile(boot, [100 * a, 100 * (1 - a)])
    return [float(lo), float(hi)]


def summarize(estimate: float, boot: np.ndarray | None, n_prompts: int, n_boot: int,
              **extra: Any) -> dict[str, Any]:
    """The one result shape every statistic reports."""
    ci = percentile_ci(boot) if boot is not None else [float("nan"), float("nan")]
    out: dict[str, Any] = {"estimate": float(estimate), "ci95": ci, "n_prompts": int(n_prompts),
                           "n_boot": int(n_boot)}
    out.update(extra)
    return out


def bootstrap_stat(per_prompt: np.ndarray, stat: Stat, weights: np.ndarray) -> tuple[float, np.ndarray]:
    """Point estimate and bootstrap replicates of ``stat(sum over prompts of per_prompt)``.

    ``per_prompt`` is (k, m); ``stat`` maps an (..., m) array of sums to (...) values;
    ``weights`` is a (B, k) multiplicity matrix from :func:`resample_weights`.
    """
    per_prompt = np.asarray(per_prompt, dtype=float)
    if per_prompt.ndim == 1:
        per_prompt = per_prompt[:, None]
    full = per_prompt.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        est = float(stat(full[None, :])[0])
        boot = np.asarray(stat(weights @ per_prompt), dtype=float)
    return est, boot


def prompt_bootstrap(per_prompt: np.ndarray, stat: Stat, *, n_boot: int = 2000,
                     rng: np.random.Generator | int | None = 0,
                     weights: np.ndarray | None = None, **extra: Any) -> dict[str, Any]:
    """{estimate, ci95, n_prompts, n_boot} for a statistic of per-prompt sufficient statistics."""
    per_prompt = np.asarray(per_prompt, dtype=float)
    k = per_prompt.shape[0]
    if weights is None:
        weights = resample_weights(k, n_boot, np.random.default_rng(rng))
    est, boot = bootstrap_stat(per_prompt, stat, weights)
    return summarize(est, boot, k, weights.shape[0], **extra)


def mean_of_prompt_values(values: np.ndarray, *, n_boot: int = 2000,
                          rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """Mean of one value per prompt, bootstrapped over prompts (the simplest case)."""
    v = np.asarray(values, dtype=float)
    x = np.column_stack([np.ones_like(v), v])
    return prompt_bootstrap(x, lambda s: s[..., 1] / s[..., 0], n_boot=n_boot, rng=rng)


def ratio_of_sums(num_col: int = 1, den_col: int = 0) -> Stat:
    """stat for a pooled mean: sum(value) / sum(count) over the resampled prompts."""
    return lambda s: s[..., num_col] / s[..., den_col]


def rows_with_siblings(groups: Any, *columns: Any, return_prompts: bool = False) -> tuple:
    """Rows whose columns are all finite and whose prompt keeps >= 2 such rows (a prompt with one
    response has no within-prompt variation and no sibling).

    Returns (filtered float columns, prompt codes 0..k-1, k, number of prompts dropped) and, with
    ``return_prompts``, the prompt id of each code as a fifth element."""
    cols = [np.asarray(c, dtype=float) for c in columns]
    g = np.asarray(groups)
    ok = np.logical_and.reduce([np.isfinite(c) for c in cols])
    cols, g = [c[ok] for c in cols], g[ok]
    codes, uniq = group_codes(g)
    sizes = np.bincount(codes, minlength=len(uniq))
    keep = sizes[codes] >= 2
    n_dropped = int((sizes < 2).sum())
    codes, uniq = group_codes(g[keep])
    if return_prompts:
        return [c[keep] for c in cols], codes, len(uniq), n_dropped, uniq
    return [c[keep] for c in cols], codes, len(uniq), n_dropped


class PromptSetResamples:
    """One resample matrix per prompt SET: statistics on the same prompts share it (their
    differences are paired and it is drawn once), and its stream is keyed by the prompt ids, so
    adding or removing another statistic never moves an interval."""

    def __init__(self, seed: int, n_boot: int) -> None:
        self.seed, self.n_boot = int(seed), int(n_boot)
        self._cache: dict[tuple, np.ndarray] = {}

    def weights(self, prompts: np.ndarray) -> np.ndarray:
        key = tuple(str(p) for p in prompts)
        if key not in self._cache:
            tag = zlib.crc32("\x1f".join(key).encode())
            rng = np.random.default_rng([self.seed, 0x5E7, tag])
            self._cache[key] = resample_weights(len(key), self.n_boot, rng)
        return self._cache[key]


def per_prompt_sums(codes: np.ndarray, columns: np.ndarray, k: int) -> np.ndarray:
    """(n, m) per-row values -> (k, m) per-prompt sums (rows grouped by integer code)."""
    columns = np.asarray(columns, dtype=float)
    if columns.ndim == 1:
        columns = columns[:, None]
    out = np.zeros((k, columns.shape[1]))
    np.add.at(out, codes, columns)
    return out
