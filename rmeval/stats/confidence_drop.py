"""Suitability inference (Reward Auditor): is a reward model systematically less confident on
perturbed pairs than on the same pairs unperturbed?

Input per perturbation: paired confidences M (original) and M' (perturbed) of the same items, on
the metric chosen upstream (log σ(r_c − r_r) by default). With ΔMᵢ = Mᵢ − M′ᵢ over every item of
the perturbed set (a twin the scorer cannot tell from its original is a ΔM of exactly 0):

- paired Cohen's d = mean(ΔM) / sd(ΔM) (ddof 1); paired t = mean / (sd / √n);
- one-sided paired sign-flip permutation test (H1: the perturbation lowers confidence, i.e. the
  mean of ΔM is positive) on the t statistic with B random sign vectors, count-based
  p = (b + 1) / (B + 1), b = #{permuted t ≥ observed t}. Vectorised: random bytes are unpacked to
  bits and one matrix product gives every permuted sum (2·bits·ΔM − ΣΔM); the sum of squares does
  not change under sign flips, so each permuted t follows from its sum alone. A ΔM of 0 flips to
  itself, so zeros change n (hence d) but not the permutation distribution of the sum: the p of
  the whole set equals the p of its changed items;
- the paper's procedure (``procedure="paper"``, the default): group-aware Benjamini–Hochberg
  across the L tested perturbations (Reward Auditor's rule, the weighted step-up of the released
  ``_perform_bh_correction``): with q_g the null share of hypothesis i's group,
  reject Hᵢ when pᵢ ≤ q·k̂ / (L·q_g(i)), k̂ = max{k : #{i : pᵢ ≤ q·k / (L·q_g(i))} ≥ k} (no rejection
  when no k qualifies). The null shares are
  * ``storey`` (default): estimated per group from the data with Storey's estimator and the +1
    (Li & Barber's structure-adaptive BH), q_g = min(1, (1 + #{pᵢ > η, i ∈ g}) / (n_g (1 − η)));
    a group of one or two hypotheses always gets q_g = 1 (plain BH thresholds for it);
  * ``fixed``: given per group in (0, 1] (groups not named: 1, as the released code);
  * ``equal``: q_g = 1 for every group, which is exactly plain BH;
- the released script's procedure (``procedure="released"``; ``hggzjx/RewardAuditor``,
  ``scripts/audit_utils.py``): its ``group_aware_benjamini_hochberg_procedure`` is called without
  q weights and its group test (a key starting with "prompt") never matches its keys
  ("(prompt) EF"), so every weight is 1: plain BH at q over every perturbation asked for, L_rel of
  them, an untestable one (no changed twin: t = 0, every permuted t = 0, p = (B + 1)/(B + 1))
  counted at p = 1; a perturbation with one changed twin keeps its sign-flip p. Its effect is on
  the loss −M (M = log σ, its loss −log σ): e_rel = mean(−ΔM) / sd₀(ΔM), sd₀ with ddof 0 (0 when
  sd₀ = 0), negative for a drop in confidence; its risk per perturbation is e_rel when rejected,
  else 0; its stars mark only rejected tests, p ≤ 0.0001 / 0.001 / 0.01 / 0.05 (four levels, ≤);
- the panel margin, per perturbation: m = max{d : p ≥ α} over the models of a panel (raw p;
  α = 0.05 unless set; 0 when every model's p is below α);
- the risk report: significance stars (paper: every tested p, p < 0.05 / 0.01 / 0.001; released:
  above); "unsuitable" when rejected (by the procedure shown) and d > m; the suitability risk of a
  model is the sum of d over its unsuitable perturbations. Both procedures' decisions are kept
  side by side whichever is shown.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from rmcore.io.files import is_finite

DEFAULT_B = 10_000
DEFAULT_Q = 0.05
DEFAULT_ETA = 0.5
DEFAULT_ALPHA = 0.05
WEIGHTINGS = ("storey", "fixed", "equal")
PROCEDURES = ("paper", "released")
STAR_LEVELS = ((0.001, "***"), (0.01, "**"), (0.05, "*"))
RELEASED_STAR_LEVELS = ((0.0001, "****"), (0.001, "***"), (0.01, "**"), (0.05, "*"))


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


def sign_bits(rows: int, n_permutations: int, seed: int, block: int = 4096) -> Iterator[np.ndarray]:
    """The random sign vectors of the sign-flip tests, in blocks of (≤ block, rows) bits (1: +ΔM,
    0: −ΔM). One stream per (seed, B): every statistic tested with the same seed sees the same
    signs, and item i gets the same sign in every column."""
    rng = np.random.default_rng(seed)
    nbytes = (rows + 7) // 8
    done = 0
    while done < n_permutations:
        m = min(block, n_permutations - done)
        yield np.unpackbits(rng.integers(0, 256, size=(m, nbytes), dtype=np.uint8), axis=1, count=rows)
        done += m


def at_least(values: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """values ≥ observed, with the identity flip's rounding counted as a tie (≥)."""
    thresh = observed - 1e-9 * np.maximum(1.0, np.abs(np.nan_to_num(observed, posinf=0.0, neginf=0.0)))
    with np.errstate(invalid="ignore"):
        return values >= thresh


def sign_flip_pvalues(deltas: np.ndarray, n: np.ndarray | None = None, *, n_permutations: int = DEFAULT_B,
                      seed: int = 0, block: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """One-sided (greater) paired sign-flip permutation p-values of the t statistic.

    ``deltas``: (n_items, k) matrix, one column per perturbation; rows that are not a column's
    observations (padding, an item without a twin) must be 0 and ``n`` the number of observations
    per column: a 0 leaves sums and sums of squares unchanged, so one draw of signs and one matrix
    product serve every column. Returns (observed t, p) per column; the same (seed, B) gives the
    same signs for item i in every column, so results are reproducible and a column's p does not
    depend on the other columns.
    """
    x = np.asarray(deltas, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    rows, k = x.shape
    n = np.full(k, rows, dtype=np.float64) if n is None else np.asarray(n, dtype=np.float64)
    total, ss = x.sum(0), (x * x).sum(0)
    t_obs = _t_from_sums(total, ss, n)
    b = np.zeros(k, dtype=np.int64)
    for bits in sign_bits(rows, n_permutations, seed, block):
        s = 2.0 * (bits.astype(np.float64) @ x) - total  # bit 1: +ΔM, bit 0: −ΔM
        b += at_least(_t_from_sums(s, ss, n), t_obs).sum(0)
    p = (b + 1.0) / (n_permutations + 1.0)
    p[np.isnan(t_obs)] = 1.0  # no variation and no shift: no evidence of degradation
    return t_obs, p


def storey_null_share(p: np.ndarray, eta: float = DEFAULT_ETA) -> np.ndarray | float:
    """Storey's estimate of the share of true nulls among ``p`` (along the last axis) with the +1:
    min(1, (1 + #{p > η}) / (n (1 − η))); 1 for no p-values."""
    p = np.asarray(p, dtype=np.float64)
    if not 0.0 < eta < 1.0:
        raise ValueError(f"eta must be in (0, 1), got {eta}")
    n = p.shape[-1]
    share = np.minimum(1.0, (1.0 + np.sum(p > eta, axis=-1)) / (n * (1.0 - eta))) if n else np.ones(p.shape[:-1])
    return float(share) if np.ndim(share) == 0 else share


def weighted_step_up(p: np.ndarray, qg: np.ndarray, q: float = DEFAULT_Q) -> tuple[np.ndarray, np.ndarray]:
    """Reward Auditor's rule on p-values (..., L) with per-hypothesis null shares ``qg`` (same
    shape): k̂ = max{k : #{i : pᵢ ≤ q·k/(L·qgᵢ)} ≥ k} (0 when none), reject pᵢ ≤ q·k̂/(L·qgᵢ).
    Batched over leading axes; returns (rejected, k̂)."""
    p, qg = np.broadcast_arrays(np.asarray(p, dtype=np.float64), np.asarray(qg, dtype=np.float64))
    L = p.shape[-1]
    if L == 0:
        return np.zeros(p.shape, dtype=bool), np.zeros(p.shape[:-1], dtype=np.int64)
    ks = np.arange(1, L + 1, dtype=np.float64)
    # counts[..., k-1] = #{i : p_i <= q k / (L qg_i)}
    counts = (p[..., None, :] <= q * ks[:, None] / (L * qg[..., None, :])).sum(-1)
    ok = counts >= ks
    k_hat = np.where(ok.any(-1), L - np.argmax(ok[..., ::-1], axis=-1), 0)
    rejected = (p <= q * k_hat[..., None] / (L * qg)) & (k_hat[..., None] > 0)
    return rejected, k_hat


def null_shares(p: np.ndarray, groups: Sequence[str], *, weighting: str = "storey", eta: float = DEFAULT_ETA,
                fixed: Mapping[str, float] | None = None) -> dict[str, float]:
    """q_g per group (in order of first appearance) for the ``weighting`` mode (module doc)."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got '{weighting}'")
    p = np.asarray(p, dtype=np.float64)
    g = np.asarray(list(groups), dtype=object)
    names = [str(x) for x in dict.fromkeys(g.tolist())]
    if weighting == "equal":
        return {name: 1.0 for name in names}
    if weighting == "fixed":
        out = {name: float((fixed or {}).get(name, 1.0)) for name in names}
        bad = {k: v for k, v in out.items() if not (0.0 < v <= 1.0)}
        if bad:
            raise ValueError(f"null shares must be in (0, 1], got {bad}")
        return out
    return {name: float(storey_null_share(p[g == name], eta)) for name in names}


def group_bh(p: np.ndarray, groups: Sequence[str], *, q: float = DEFAULT_Q, eta: float = DEFAULT_ETA,
             weighting: str = "storey", fixed: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Group-aware BH (module doc): {"rejected", "null_share" (per group), "k" (k̂),
    "threshold" (per hypothesis, q·max(k̂, 1)/(L·q_g))}; ``weighting="equal"`` is plain BH."""
    p = np.asarray(p, dtype=np.float64)
    shares = null_shares(p, groups, weighting=weighting, eta=eta, fixed=fixed)
    qg = np.array([shares[str(x)] for x in groups], dtype=np.float64)
    rejected, k_hat = weighted_step_up(p, qg, q)
    threshold = q * max(int(k_hat), 1) / (max(p.size, 1) * qg)
    return {"rejected": rejected, "null_share": shares, "k": int(k_hat), "threshold": threshold}


def stars(p: float) -> str:
    """The paper procedure's stars: p < 0.001 / 0.01 / 0.05, whether rejected or not."""
    for level, mark in STAR_LEVELS:
        if p < level:
            return mark
    return ""


def released_stars(p: float, rejected: bool) -> str:
    """The released script's stars: only a rejected test, p ≤ 0.0001 / 0.001 / 0.01 / 0.05 (a
    rejected p above 0.05, possible at q > 0.05, gets none, as its "ns" string)."""
    if not rejected:
        return ""
    for level, mark in RELEASED_STAR_LEVELS:
        if p <= level:
            return mark
    return ""


def released_effect(delta: np.ndarray) -> float:
    """The released script's effect on ΔM = M − M′ (M the log confidence): its M is the loss −M,
    so its difference is −ΔM, divided by the population sd (ddof 0); 0 when that sd is 0."""
    d = -np.asarray(delta, dtype=np.float64)
    if d.size == 0:
        return float("nan")
    sd = float(d.std(ddof=0))
    return float(d.mean() / sd) if sd != 0 else 0.0


def released_bh(p: np.ndarray, q: float = DEFAULT_Q) -> dict[str, Any]:
    """The released script's decisions on the p-values of every perturbation asked for (NaN, an
    untestable one: p = 1): plain BH at q over all of them (module doc). {"p_value" (NaN → 1),
    "rejected", "k", "threshold" (q·max(k̂, 1)/L, one for all), "stars"}."""
    p = np.where(np.isnan(np.asarray(p, dtype=np.float64)), 1.0, np.asarray(p, dtype=np.float64))
    rejected, k_hat = weighted_step_up(p, np.ones_like(p), q)  # every weight 1 (module doc)
    return {"p_value": p, "rejected": rejected, "k": int(k_hat), "threshold": q * max(int(k_hat), 1) / max(p.size, 1),
            "stars": [released_stars(float(x), bool(r)) for x, r in zip(p, rejected)]}


def panel_margins(results: Mapping[str, Mapping[str, Mapping[str, Any]]],
                  alpha: float = DEFAULT_ALPHA) -> dict[str, float]:
    """The panel rule, per perturbation: m = max{d : p ≥ α} over the models (raw p; untested
    perturbations and non-finite d are left out); 0 when every model's p is below α."""
    codes = list(dict.fromkeys(c for per in results.values() for c in per))
    out = {}
    for c in codes:
        ds = [float(per[c]["cohens_d"]) for per in results.values()
              if c in per and is_finite(per[c]["p_value"]) and per[c]["p_value"] >= alpha
              and is_finite(per[c]["cohens_d"])]
        out[c] = max(ds) if ds else 0.0
    return out


def suitability_inference(deltas: Mapping[str, np.ndarray], groups: Mapping[str, str], *,
                          changed: Mapping[str, np.ndarray] | None = None, n_permutations: int = DEFAULT_B,
                          seed: int = 0, q: float = DEFAULT_Q, eta: float = DEFAULT_ETA, weighting: str = "storey",
                          fixed: Mapping[str, float] | None = None, procedure: str = "paper") -> dict[str, Any]:
    """Per perturbation code: group, n, n_changed, mean_delta, sd_delta, cohens_d, t (all over the
    whole set), cohens_d_changed, p_value, rejected, stars, bh_threshold, and ``decisions`` with
    both procedures' p_value, rejected, stars and threshold (the released one's effect_size and
    robustness_risk too); and per group its null share. ``rejected``, ``stars`` and
    ``bh_threshold`` are those of ``procedure`` (module doc). ``deltas[c]`` holds ΔM over the items
    of the perturbed set, item-aligned across codes (NaN: no twin of that item for c);
    ``changed[c]`` marks the twins whose scorer input changed (default: ΔM ≠ 0), the others count
    as ΔM = 0. A code with fewer than 2 changed twins is not tested by the paper's procedure
    (outside its BH family, ``p_value`` NaN); the released one counts every code."""
    if procedure not in PROCEDURES:
        raise ValueError(f"procedure must be one of {', '.join(PROCEDURES)}, got '{procedure}'")
    codes = list(deltas)
    if not codes:
        return {"perturbations": {}, "groups": {}, "k": 0,
                "decisions": {"shown": procedure, **{x: {"L": 0, "k": 0, "rejected": []} for x in PROCEDURES}}}
    rows = max(len(deltas[c]) for c in codes)
    mat = np.zeros((rows, len(codes)))
    present = np.zeros((rows, len(codes)), dtype=bool)
    chg = np.zeros((rows, len(codes)), dtype=bool)
    for j, c in enumerate(codes):
        x = np.asarray(deltas[c], dtype=np.float64)
        ok = ~np.isnan(x)
        ch = (np.asarray(changed[c], dtype=bool) if changed is not None and c in changed else x != 0) & ok
        present[: x.size, j], chg[: x.size, j] = ok, ch
        mat[: x.size, j] = np.where(ch, x, 0.0)  # an unchanged twin is a change of exactly 0
    n = present.sum(0)
    n_changed = chg.sum(0)
    tested = [j for j in range(len(codes)) if n_changed[j] >= 2]
    # the released script tests one changed twin too; with none its p is 1 (module doc). A
    # column's p does not depend on the others, so one call serves both procedures.
    flipped = [j for j in range(len(codes)) if n_changed[j] >= 1]
    p_all = np.ones(len(codes))
    if flipped:
        _, p_f = sign_flip_pvalues(mat[:, flipped], n[flipped], n_permutations=n_permutations, seed=seed)
        p_all[flipped] = p_f
    p = np.full(len(codes), np.nan)
    p[tested] = p_all[tested]
    gbh = group_bh(p[tested], [groups[codes[j]] for j in tested], q=q, eta=eta, weighting=weighting, fixed=fixed)
    rel = released_bh(p_all, q)
    out: dict[str, dict[str, Any]] = {}
    for j, c in enumerate(codes):
        eff = paired_effect(mat[present[:, j], j])
        rec = {"group": groups[c], **eff, "n_changed": int(n_changed[j]),
               "cohens_d_changed": paired_effect(mat[chg[:, j], j])["cohens_d"]}
        e_rel = released_effect(mat[present[:, j], j])
        released = {"p_value": float(rel["p_value"][j]), "rejected": bool(rel["rejected"][j]),
                    "stars": rel["stars"][j], "threshold": float(rel["threshold"]), "effect_size": e_rel,
                    "robustness_risk": e_rel if rel["rejected"][j] else 0.0}
        if j in tested:
            k = tested.index(j)
            paper = {"p_value": float(p[j]), "rejected": bool(gbh["rejected"][k]), "stars": stars(float(p[j])),
                     "threshold": float(gbh["threshold"][k])}
        else:
            rec["note"] = ("the scorer's input is unchanged on every item: not tested" if n_changed[j] == 0
                           else "fewer than 2 changed items: not tested")
            paper = {"p_value": float("nan"), "rejected": False, "stars": "", "threshold": float("nan")}
        shown = paper if procedure == "paper" else released
        rec.update({"p_value": paper["p_value"], "rejected": shown["rejected"], "stars": shown["stars"],
                    "bh_threshold": shown["threshold"], "decisions": {"paper": paper, "released": released}})
        out[c] = rec
    sizes = {g: sum(1 for j in tested if groups[codes[j]] == g) for g in gbh["null_share"]}
    decisions = {"shown": procedure,
                 "paper": {"L": len(tested), "k": gbh["k"],
                           "rejected": [codes[j] for k, j in enumerate(tested) if gbh["rejected"][k]]},
                 "released": {"L": len(codes), "k": rel["k"],
                              "rejected": [c for j, c in enumerate(codes) if rel["rejected"][j]]}}
    return {"perturbations": out, "k": gbh["k"] if procedure == "paper" else rel["k"], "decisions": decisions,
            "groups": {g: {"null_share": v, "n_tested": sizes[g], "source": _share_source(weighting, g, fixed)}
                       for g, v in gbh["null_share"].items()}}


def _share_source(weighting: str, group: str, fixed: Mapping[str, float] | None) -> str:
    if weighting == "fixed":
        return "fixed" if group in (fixed or {}) else "1 (not named)"
    return {"storey": "estimated (Storey, +1)", "equal": "1 (plain BH)"}[weighting]


def mark_unsuitable(per: dict[str, dict[str, Any]], margins: Mapping[str, float] | float) -> float:
    """Set ``margin``, ``unsuitable`` (rejected and d > m) and ``risk`` (d when unsuitable, else 0)
    on every perturbation, in place; returns the suitability risk, the sum of ``risk``."""
    total = 0.0
    for c, r in per.items():
        m = float(margins if isinstance(margins, (int, float)) else margins.get(c, 0.0))
        r["margin"] = m
        r["unsuitable"] = bool(r["rejected"] and r["cohens_d"] > m)  # NaN d: never
        r["risk"] = float(r["cohens_d"]) if r["unsuitable"] else 0.0
        total += r["risk"]
    return total
