"""Speed of the suitability inference: 10 perturbations x 1,000 items x 10,000 sign-flip permutations
(target < 0.5 s), against drawing each sign as its own random integer, plus the appendix-B.1
robustness statistics on the same sizes and this machine's fp32 matrix-product rate for context.

    .venv/bin/python scripts/bench_suitability.py [--items 1000] [--perturbations 10] [--permutations 10000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rmeval.stats.confidence_drop import suitability_inference
from rmeval.stats.confidence_drop_robustness import robustness


def naive(deltas: np.ndarray, B: int, seed: int) -> np.ndarray:
    """Each sign its own random integer: the baseline the issue measured (~1 s)."""
    rng = np.random.default_rng(seed)
    n = deltas.shape[0]
    signs = rng.integers(0, 2, size=(B, n)).astype(np.float64) * 2 - 1
    s = signs @ deltas
    ss = (deltas ** 2).sum(0)
    mean = s / n
    t = mean / np.sqrt(np.maximum(ss - s * mean, 0) / (n - 1) / n)
    return t


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--perturbations", type=int, default=10)
    ap.add_argument("--permutations", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    codes = [f"P{i}" for i in range(args.perturbations)]
    deltas = {c: rng.normal(0.01 * i, 0.1, args.items) for i, c in enumerate(codes)}
    groups = {c: ("controlled" if i < args.perturbations // 2 else "stylized") for i, c in enumerate(codes)}
    ours = best_of(lambda: suitability_inference(deltas, groups, n_permutations=args.permutations, seed=0),
                   args.repeats)
    rob = best_of(lambda: robustness(deltas, n_permutations=args.permutations, seed=0), 1)
    mat = np.column_stack([deltas[c] for c in codes])
    base = best_of(lambda: naive(mat, args.permutations, 0), args.repeats)
    a = rng.standard_normal((2048, 2048), dtype=np.float32)
    mm = best_of(lambda: a @ a, args.repeats)
    flips = args.perturbations * args.items * args.permutations
    print(f"suitability inference, {args.perturbations} perturbations x {args.items} items x "
          f"{args.permutations} permutations ({flips:.1e} sign flips): {ours:.3f} s (target < 0.5 s)")
    print(f"one random integer per sign (same matrix product): {base:.3f} s -> ratio {base / ours:.2f}x")
    print(f"B.1 robustness (median and 20%-trimmed mean under the same sign flips, normality, Wilcoxon): "
          f"{rob:.2f} s ({rob / ours:.0f}x the t test alone)")
    print(f"fp32 matmul 2048^3: {2 * 2048 ** 3 / mm / 1e9:.1f} GFLOP/s ({mm * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
