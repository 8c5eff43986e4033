"""Suitability inference (Reward Auditor): is a reward model systematically less confident on
perturbed pairs than on the same pairs unperturbed?

Input per perturbation: paired confidences M (original) and M' (perturbed) of the same items.
With ΔMᵢ = Mᵢ − M′ᵢ:

- paired Cohen's d = mean(ΔM) / sd(ΔM) (ddof 1); paired t = mean / (sd / √n);
- one-sided paired sign-flip permutation test (H1: the perturbation lowers confidence, i.e. the
  mean of ΔM is positive) on the t statistic with B random sign vectors, count-based
  p = (b + 1) / (B + 1), b = #{permuted t ≥ observed t}. Vectorised: random bytes are unpacked to
  bits and one matrix product gives every permuted sum (2·bits·ΔM − ΣΔM); the sum of squares does
  not change under sign flips, so each permuted t follows from its sum alone;
- group-aware Benjamini–Hochberg across perturbations: each group's share of true nulls is
  estimated Storey-style at threshold η, π̂₀ = min(1, (n_g − #{p ≤ η} + 1) / (n_g (1 − η))) (the
  estimator of Hu, Zhao & Zhou 2010, "FDR control with groups"), each hypothesis gets the weight
  w ∝ (1 − π̂₀)/π̂₀ of its group, normalised to mean 1 over all hypotheses, and the weighted BH
  (Genovese, Roeder & Wasserman 2006) rejects the k* smallest p/w with
  k* = max{k : (p/w)₍ₖ₎ ≤ k q / N}. Equal weights are exactly plain BH; when every group looks
  null (all weights 0) the weights fall back to equal;
- the risk report: significance stars (0.05 / 0.01 / 0.001) and "unsuitable" when rejected and
  d > m, m user-set or, for a panel of models, the largest d among models not rejected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

DEFAULT_B = 10_000
DEFAULT_Q = 0.05
DEFAULT_ETA = 0.5
STAR_LEVELS = ((0.001, "***"), (0.01, "**"), (0.05, "*"))


def paired_effect(delta: np.ndarray) -> dict[str, float]:
    """n, mean, sd (ddof 1), Cohen's d and t of paired differences. sd 0 gives d = t = ±inf (or
    NaN when the mean is 0 too): a constant shift is either infinitely clear or no shift at all."""
    d = np.asarray(delta, dtype=np.float64)
    n = d.size
    mean = float(d.mean()) if n else float("nan")
    sd = float(d.std(ddof=1)) if n > 1 else float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        cohens_d = float(np.float64(mean) / np.float64(sd))
        t = float(np.float64(mean) / (np.float64(sd) / math.sqrt(n))) if n > 1 else float("nan")
    return {"n": int(n), "mean_delta": mean, "sd_delta": sd, "cohens_d": cohens_d, "t": t}


def _t_from_sums(s: np.ndarray, ss: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Paired t from the sum and the sum of squares of the differences (broadcasting)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = s / n
        var = np.maximum(ss - s * mean, 0.0) / (n - 1)
        return mean / np.sqrt(var / n)


def sign_flip_pvalues(deltas: np.ndarray, n: np.ndarray | None = None, *, n_permutations: int = DEFAULT_B,
                      seed: int = 0, block: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """One-sided (greater) paired sign-flip permutation p-values of the t statistic.

    ``deltas``: (n_items, k) matrix, one column per perturbation; rows past a column's own ``n``
    (or any padding) must be 0, which leaves sums and sums of squares unchanged, so one draw of
    signs and one matrix product serve every column. Returns (observed t, p) per column; the
    same (seed, B) gives the same signs for item i in every column, so results are reproducible
    and a column's p does not depend on the other columns.
    """
    x = np.asarray(deltas, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    rows, k = x.shape
    n = np.full(k, rows, dtype=np.float64) if n is None else np.asarray(n, dtype=np.float64)
    total, ss = x.sum(0), (x * x).sum(0)
    t_obs = _t_from_sums(total, ss, n)
    # ties: the identity flip reproduces t_obs up to rounding; count it as "≥"
    thresh = t_obs - 1e-9 * np.maximum(1.0, np.abs(np.nan_to_num(t_obs, posinf=0.0, neginf=0.0)))
    rng = np.random.default_rng(seed)
    nbytes = (rows + 7) // 8
    b = np.zeros(k, dtype=np.int64)
    done = 0
    while done < n_permutations:
        m = min(block, n_permutations - done)
        bits = np.unpackbits(rng.integers(0, 256, size=(m, nbytes), dtype=np.uint8), axis=1, count=rows)
        s = 2.0 * (bits.astype(np.float64) @ x) - total  # bit 1: +ΔM, bit 0: −ΔM
        t_perm = _t_from_sums(s, ss, n)
        with np.errstate(invalid="ignore"):
            b += (t_perm >= thresh).sum(0)
        done += m
    p = (b + 1.0) / (n_permutations + 1.0)
    p[np.isnan(t_obs)] = 1.0  # no variation and no shift: no evidence of degradation
    return t_obs, p


def storey_pi0(p: np.ndarray, eta: float = DEFAULT_ETA) -> float:
    """Storey-type share of true nulls among ``p`` at threshold ``eta`` (with the +1 of Hu et al.)."""
    p = np.asarray(p, dtype=np.float64)
    if not 0.0 < eta < 1.0:
        raise ValueError(f"eta must be in (0, 1), got {eta}")
    return float(min(1.0, (p.size - np.sum(p <= eta) + 1.0) / (p.size * (1.0 - eta))))


def group_weights(p: np.ndarray, groups: Sequence[str], eta: float = DEFAULT_ETA) -> tuple[np.ndarray, dict[str, float]]:
    """Per-hypothesis weights (mean 1) from each group's Storey π̂₀, and the π̂₀ per group."""
    p = np.asarray(p, dtype=np.float64)
    g = np.asarray(list(groups), dtype=object)
    pi0 = {str(name): storey_pi0(p[g == name], eta) for name in dict.fromkeys(g.tolist())}
    raw = np.array([(1.0 - pi0[str(x)]) / pi0[str(x)] for x in g])
    if raw.sum() <= 0:
        return np.ones(p.size), pi0
    return raw * p.size / raw.sum(), pi0


def weighted_bh(p: np.ndarray, weights: np.ndarray | None = None, q: float = DEFAULT_Q) -> np.ndarray:
    """Rejections of the weighted Benjamini–Hochberg step-up procedure at level ``q``.
    Weight 0 never rejects; ``weights=None`` is plain BH."""
    p = np.asarray(p, dtype=np.float64)
    w = np.ones(p.size) if weights is None else np.asarray(weights, dtype=np.float64)
    if p.size == 0:
        return np.zeros(0, dtype=bool)
    with np.errstate(divide="ignore"):
        pw = np.where(w > 0, p / np.where(w > 0, w, 1.0), np.inf)
    order = np.argsort(pw, kind="stable")
    ok = pw[order] <= q * np.arange(1, p.size + 1) / p.size
    reject = np.zeros(p.size, dtype=bool)
    if ok.any():
        reject[order[: int(np.nonzero(ok)[0].max()) + 1]] = True
    return reject


def group_bh(p: np.ndarray, groups: Sequence[str], *, q: float = DEFAULT_Q, eta: float = DEFAULT_ETA,
             weighting: str = "storey") -> dict[str, Any]:
    """Group-aware BH: {"rejected", "weights", "pi0"}; ``weighting="equal"`` is plain BH."""
    if weighting == "equal":
        w, pi0 = np.ones(len(p)), {}
    elif weighting == "storey":
        w, pi0 = group_weights(p, groups, eta)
    else:
        raise ValueError(f"weighting must be 'storey' or 'equal', got '{weighting}'")
    return {"rejected": weighted_bh(p, w, q), "weights": w, "pi0": pi0}


def stars(p: float) -> str:
    for level, mark in STAR_LEVELS:
        if p < level:
            return mark
    return ""


def panel_margins(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, float]:
    """The study's panel rule, per perturbation: the largest d among the models whose degradation
    is not significant (not rejected); 0 when every model's is."""
    codes = list(dict.fromkeys(c for per in results.values() for c in per))
    out = {}
    for c in codes:
        ds = [float(per[c]["cohens_d"]) for per in results.values()
              if c in per and not per[c]["rejected"] and np.isfinite(per[c]["cohens_d"])]
        out[c] = max(ds) if ds else 0.0
    return out


def suitability_inference(deltas: Mapping[str, np.ndarray], groups: Mapping[str, str], *,
                          n_permutations: int = DEFAULT_B, seed: int = 0, q: float = DEFAULT_Q,
                          eta: float = DEFAULT_ETA, weighting: str = "storey") -> dict[str, dict[str, Any]]:
    """Per perturbation code: group, n, mean_delta, sd_delta, cohens_d, t, p_value, rejected, stars,
    weight. Differences are taken in the order given (aligned by item where lengths agree)."""
    codes = list(deltas)
    if not codes:
        return {}
    ns = np.array([len(deltas[c]) for c in codes])
    mat = np.zeros((int(ns.max()), len(codes)))
    for j, c in enumerate(codes):
        mat[: ns[j], j] = np.asarray(deltas[c], dtype=np.float64)
    _, p = sign_flip_pvalues(mat, ns, n_permutations=n_permutations, seed=seed)
    gbh = group_bh(p, [groups[c] for c in codes], q=q, eta=eta, weighting=weighting)
    out: dict[str, dict[str, Any]] = {}
    for j, c in enumerate(codes):
        eff = paired_effect(mat[: ns[j], j])
        out[c] = {"group": groups[c], **eff, "p_value": float(p[j]), "rejected": bool(gbh["rejected"][j]),
                  "stars": stars(float(p[j])), "weight": float(gbh["weights"][j])}
    return out


def mark_unsuitable(per: dict[str, dict[str, Any]], margins: Mapping[str, float] | float) -> None:
    """Set ``unsuitable`` (rejected and d > m) and ``margin`` on every perturbation, in place."""
    for c, r in per.items():
        m = float(margins if isinstance(margins, (int, float)) else margins.get(c, 0.0))
        r["margin"] = m
        r["unsuitable"] = bool(r["rejected"] and r["cohens_d"] > m)
