"""False discovery rate and power of the group-aware Benjamini–Hochberg of the suitability audit
(``rmeval.stats.confidence_drop``: reject p_i <= q k / (L q_g(i))) in its modes, by simulation.

Each replication draws one-sided z-test p-values, p = 1 − Φ(Z), independent, Z ~ N(0, 1) for a
true null and N(μ, 1) for a signal, in two groups (controlled, stylized) of the sizes a layout
gives; the same p-values go through every mode:

- storey: null shares estimated per group (Storey with the +1, η = 0.5): the paper's procedure,
  matchrm's default;
- oracle: null shares fixed at each group's true null share (at least 1/n_g), the best a fixed
  share can do;
- 0.8/0.5: null shares fixed at 0.8 (controlled) and 0.5 (stylized), the values the released code's
  docstring suggests, whatever the truth;
- BH: every share 1, plain Benjamini–Hochberg over the tested perturbations;
- released: the released script's rule (``--procedure released``): plain BH over every perturbation
  asked for, an untestable one (no changed twin) counted at p = 1. Where every perturbation is
  testable it is BH exactly; a layout's ``untestable`` perturbations enter only its family.

The untestable perturbations are true nulls that no mode can reject (p = 1 > q); the FDR counts the
tested ones.

FDR = mean of V / max(R, 1) (V false rejections, R rejections); power = mean share of the signals
rejected. Monte Carlo standard errors: FDR about sqrt(FDR (1 − FDR) / reps).

    .venv/bin/python scripts/sim_group_bh.py [--reps 100000] [--q 0.05] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import norm

from rmeval.stats.confidence_drop import storey_null_share, weighted_step_up

# (name, (n_controlled, n_stylized) tested, (signals controlled, signals stylized), mu, untestable)
LAYOUTS = [
    ("global null, 5 + 5", (5, 5), (0, 0), 0.0, 0),
    ("signals in one group: 0 + 3 at mu 3", (5, 5), (0, 3), 3.0, 0),
    ("signals in one group: 0 + 5 at mu 2.5", (5, 5), (0, 5), 2.5, 0),
    ("spread: 2 + 2 at mu 3", (5, 5), (2, 2), 3.0, 0),
    ("spread: 3 + 4 at mu 3", (5, 5), (3, 4), 3.0, 0),
    ("spread: 2 + 5 at mu 2.5", (5, 5), (2, 5), 2.5, 0),
    ("unequal groups 3 + 7, global null", (3, 7), (0, 0), 0.0, 0),
    ("unequal groups 3 + 7: 0 + 4 at mu 3", (3, 7), (0, 4), 3.0, 0),
    ("unequal groups 2 + 8: 2 + 0 at mu 3", (2, 8), (2, 0), 3.0, 0),
    ("unequal groups 2 + 8: 1 + 6 at mu 2.5", (2, 8), (1, 6), 2.5, 0),
    # one controlled perturbation the scorer cannot see (PH on RM-Bench code): 4 + 5 tested
    ("one untestable, global null, 4 + 5", (4, 5), (0, 0), 0.0, 1),
    ("one untestable: 0 + 5 at mu 2.5", (4, 5), (0, 5), 2.5, 1),
    ("one untestable: 2 + 2 at mu 3", (4, 5), (2, 2), 3.0, 1),
    ("one untestable: 3 + 4 at mu 3", (4, 5), (3, 4), 3.0, 1),
]
MODES = ("storey", "oracle", "0.8/0.5", "BH", "released")


def simulate(sizes: tuple[int, int], signals: tuple[int, int], mu: float, *, reps: int, q: float, eta: float,
             rng: np.random.Generator, untestable: int = 0, chunk: int = 20_000) -> dict[str, tuple[float, float]]:
    """{mode: (FDR, power)} over ``reps`` replications of one layout (``untestable``: perturbations
    at p = 1 in the released family only)."""
    n_c, n_s = sizes
    L = n_c + n_s
    is_signal = np.zeros(L, dtype=bool)
    is_signal[: signals[0]] = True
    is_signal[n_c: n_c + signals[1]] = True
    group = np.array([0] * n_c + [1] * n_s)
    oracle = np.array([max((n - s) / n, 1 / n) for n, s in zip(sizes, signals)])[group]
    fixed = np.array([0.8, 0.5])[group]
    fdp = {m: 0.0 for m in MODES}
    power = {m: 0.0 for m in MODES}
    done = 0
    while done < reps:
        r = min(chunk, reps - done)
        z = rng.standard_normal((r, L)) + mu * is_signal
        p = norm.sf(z)
        est = np.empty((r, L))
        for g, cols in ((0, slice(0, n_c)), (1, slice(n_c, L))):
            est[:, group == g] = storey_null_share(p[:, cols], eta)[:, None]
        # the released family: the tested p-values and the untestable ones at p = 1, every weight 1
        p_rel = np.concatenate([p, np.ones((r, untestable))], axis=1)
        for mode, qg in (("storey", est), ("oracle", oracle), ("0.8/0.5", fixed), ("BH", np.ones(L)),
                         ("released", None)):
            if qg is None:
                rej = weighted_step_up(p_rel, np.ones_like(p_rel), q)[0][:, :L]  # p = 1 is never rejected
            else:
                rej, _ = weighted_step_up(p, np.broadcast_to(qg, p.shape), q)
            n_rej = rej.sum(1)
            fdp[mode] += float((rej[:, ~is_signal].sum(1) / np.maximum(n_rej, 1)).sum())
            if is_signal.any():
                power[mode] += float(rej[:, is_signal].mean(1).sum())
        done += r
    return {m: (fdp[m] / reps, power[m] / reps if is_signal.any() else float("nan")) for m in MODES}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=100_000)
    ap.add_argument("--q", type=float, default=0.05)
    ap.add_argument("--eta", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.reps < 1 or not 0 < args.q < 1 or not 0 < args.eta < 1:
        ap.error("--reps >= 1, --q and --eta in (0, 1)")
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    print(f"group-aware BH at q = {args.q}, eta = {args.eta}, {args.reps} replications per layout "
          f"(MC s.e. of an FDR near q: {np.sqrt(args.q * (1 - args.q) / args.reps):.4f})\n")
    head = ("| layout | " + " | ".join(f"FDR {m}" for m in MODES) + " | "
            + " | ".join(f"power {m}" for m in MODES) + " |")
    print(head)
    print("|---|" + "---|" * (2 * len(MODES)))
    for name, sizes, signals, mu, untestable in LAYOUTS:
        res = simulate(sizes, signals, mu, reps=args.reps, q=args.q, eta=args.eta, rng=rng, untestable=untestable)
        cells = [f"{res[m][0]:.4f}" for m in MODES] + [
            "—" if np.isnan(res[m][1]) else f"{res[m][1]:.3f}" for m in MODES]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\n{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
