"""Prompt-level percentile bootstrap.

Why prompts: responses to one prompt are not independent, so the resampling unit is the prompt.
Every statistic here is written as a function of *per-prompt sufficient statistics* (a (k, m)
array, one row per prompt). A bootstrap resample is then a (B, k) matrix of prompt multiplicities
``W`` and the resampled sums are one matrix product ``W @ X`` -- no Python loop over resamples,
which is what keeps a whole audit under a few seconds.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from rmcore.data.variance import group_codes
from rmcore.errors import ConfigError

from .settings import N_BOOT

Stat = Callable[[np.ndarray], np.ndarray]
DRAW_BLOCK = 1 << 20  # cells of the resample matrix drawn at once (its int64 temporaries: 8 MiB each)


def resample_indices(k: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, k) prompt indices drawn with replacement."""
    return rng.integers(0, k, size=(n_boot, k))


def index_weights(idx: np.ndarray, k: int) -> np.ndarray:
    """(B, k) index matrix -> (B, k) multiplicities (how often each prompt was drawn)."""
    b = idx.shape[0]
    flat = (idx + (np.arange(b) * k)[:, None]).ravel()
    return np.bincount(flat, minlength=b * k).reshape(b, k).astype(float)


def resample_weights(k: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, k) multiplicities of a prompt-level resample with replacement, drawn in blocks of
    rows: the generator's stream is the same in blocks as in one draw (the matrix is identical),
    and the draw's integer temporaries are a block's, not three more matrices of the result's size."""
    rows = max(1, DRAW_BLOCK // max(k, 1))
    if rows >= n_boot:
        return index_weights(resample_indices(k, n_boot, rng), k)
    out = np.empty((n_boot, k))
    for start in range(0, n_boot, rows):
        stop = min(start + rows, n_boot)
        out[start:stop] = index_weights(resample_indices(k, stop - start, rng), k)
    return out


# Bytes the audit's statistics hold at their peak per resample and response: about eight float64
# (resamples, responses) arrays (the centring variants'; measured 64 bytes with tracemalloc,
# rmeval.stats.audit_sections.compute_audit on 200 prompts x 4 responses at n_boot 20000).
AUDIT_BYTES = 64


def machine_memory() -> int | None:
    """This machine's memory in bytes (the physical memory, or a container's smaller limit where
    cgroup v2 sets one); None where neither is known."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = None
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            limit = f.read().strip()
        if limit.isdigit():
            total = min(int(limit), total) if total else int(limit)
    except OSError:
        pass
    return total


def format_bytes(n: float) -> str:
    """``175 TiB``, ``23.4 GiB``: three significant figures, binary units."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    for unit in units:
        if abs(n) < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"


def check_memory(need: int, setting: str) -> None:
    """A one-line ConfigError when ``need`` bytes (what ``setting`` implies, e.g. ``--n-boot
    1000000000000 over 50 prompts``) exceed this machine's memory: said before any scoring, where
    numpy would fail with a MemoryError after it."""
    have = machine_memory()
    if have is not None and need > have:
        raise ConfigError(f"{setting}: the bootstrap needs about {format_bytes(need)} of memory; this machine has "
                          f"{format_bytes(have)}")


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


def prompt_bootstrap(per_prompt: np.ndarray, stat: Stat, *, n_boot: int = N_BOOT,
                     rng: np.random.Generator | int | None = 0,
                     weights: np.ndarray | None = None, **extra: Any) -> dict[str, Any]:
    """{estimate, ci95, n_prompts, n_boot} for a statistic of per-prompt sufficient statistics."""
    per_prompt = np.asarray(per_prompt, dtype=float)
    k = per_prompt.shape[0]
    if weights is None:
        weights = resample_weights(k, n_boot, np.random.default_rng(rng))
    est, boot = bootstrap_stat(per_prompt, stat, weights)
    return summarize(est, boot, k, weights.shape[0], **extra)


def mean_of_prompt_values(values: np.ndarray, *, n_boot: int = N_BOOT,
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
