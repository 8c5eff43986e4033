"""Rankings of policies under unequal prompt coverage, judged head-to-head comparisons, and set
overlap: the statistics of the leaderboard and filtering experiments (pure numpy on tables).

Kendall's tau-b of two score vectors x, y over P items, pairs i < j:

    tau_b = (n_c - n_d) / sqrt((n_0 - n_x) (n_0 - n_y)),

n_c / n_d the concordant / discordant pairs, n_0 = P (P - 1) / 2, n_x and n_y the pairs tied in x
and in y (scipy's default ``kendalltau``); undefined (NaN) when either vector is constant.

Leaderboard under unequal coverage (``coverage_leaderboard``): S is the (P, N) matrix of one reward
model's scores of P policies' responses to N prompts, and the centred matrix subtracts each prompt's
reference score (the anchor policy's response to that prompt, or the mean of every policy's,
subtracted exactly as ``selection.prompt_centered`` does, whatever the order of the policies). Under
an assignment a, policy p is scored only on the prompts of its mix M(a, p): its mean is
sum_{n in M} w_n S[p, n] / sum_{n in M} w_n (w = 1 on the sample, prompt multiplicities in a
bootstrap resample). The judge's value of policy p is the mean over prompts of J[p, n], the
probability that the judge prefers p's response to the anchor's (0.5 for the anchor itself).
Reported per assignment and averaged over assignments: tau of the raw and of the centred ranking
with the judge's full-coverage ranking, their difference (centred minus raw), and tau with the
full-coverage ranking of the same score; the number of assignments whose raw (centred) ranking is
not the full-coverage one. Intervals resample prompts (a prompt keeps its mix), the judge's values,
the full-coverage ranking and every assignment's means recomputed on the same resamples.

Head to head (``head_to_head``): a judge reads x's and y's responses to a prompt in both orders;
p_xy is its probability of "A" with x shown as A (renormalised over the two letters), p_yx with y
as A. Per prompt P(x better) = (p_xy + 1 - p_yx) / 2, and the judge agrees with itself across
orders when both orders prefer the same response (p_xy > 1/2 and p_yx < 1/2, or p_xy < 1/2 and
p_yx > 1/2). The win rate is the mean of P(x better) over prompts; prompts whose judgment is
missing in either order are left out and counted.

Jaccard index of two sets: |A and B| / |A or B|.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from rmcore.data.variance import group_codes

from .bootstrap import (
    mean_of_prompt_values,
    per_prompt_sums,
    prompt_bootstrap,
    ratio_of_sums,
    resample_weights,
    summarize,
)
from .selection import prompt_centered
from .settings import N_BOOT


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b along the last axis (broadcast over the leading ones); NaN where undefined."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    p = x.shape[-1]
    i, j = np.triu_indices(p, 1)
    dx, dy = np.sign(x[..., i] - x[..., j]), np.sign(y[..., i] - y[..., j])
    n0 = len(i)
    num = (dx * dy).sum(axis=-1)
    den = np.sqrt((n0 - (dx == 0).sum(axis=-1)) * (n0 - (dy == 0).sum(axis=-1)))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    bad = ~(np.isfinite(x).all(axis=-1) & np.isfinite(y).all(axis=-1))
    return np.where(bad, np.nan, out)


def jaccard(a: Iterable[Any], b: Iterable[Any]) -> float:
    """|a and b| / |a or b| of two sets (NaN when both are empty)."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else float("nan")


def draw_assignments(n_policies: int, n_mixes: int, n_assignments: int, seed: int = 0) -> np.ndarray:
    """(n_assignments, n_policies) mix of each policy, each drawn uniformly; an assignment putting
    every policy on the same mix is drawn again."""
    if n_mixes < 2 or n_policies < 2:
        raise ValueError("unequal coverage needs at least two policies and two mixes")
    rng = np.random.default_rng(seed)
    out = np.empty((n_assignments, n_policies), dtype=np.int64)
    for a in range(n_assignments):
        row = rng.integers(0, n_mixes, n_policies)
        while (row == row[0]).all():
            row = rng.integers(0, n_mixes, n_policies)
        out[a] = row
    return out


def centred_scores(scores: np.ndarray, *, anchor: int | None) -> np.ndarray:
    """(P, N) scores minus each prompt's reference: the anchor's score (``anchor`` its row), or the
    mean over policies (``anchor`` None). The mean-centred value is exact (``selection.prompt_centered``:
    one correctly rounded division of integers), so it does not depend on the order of the policies
    and equal centred values are equal floats; a prompt with a missing (NaN) score is NaN throughout."""
    s = np.asarray(scores, dtype=float)
    if anchor is not None:
        return s - s[anchor][None, :]
    out = np.full(s.shape, np.nan)
    whole = np.isfinite(s).all(axis=0)  # prompts every policy's score is there for
    p, n = s[:, whole].shape
    if n:
        flat = prompt_centered(s[:, whole].T.ravel(), np.repeat(np.arange(n), p), n)  # groups: the prompts
        out[:, whole] = flat.reshape(n, p).T
    return out


def _weighted_means(values: np.ndarray, mask: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(P, B) means of each row of ``values`` (P, N) over the columns in ``mask`` (N,) under the
    weights ``w`` (B, N); entries that are NaN are left out."""
    ok = np.isfinite(values) & mask[None, :]
    v = np.where(ok, values, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (v @ w.T) / (ok.astype(float) @ w.T)


def coverage_leaderboard(scores: np.ndarray, judge: np.ndarray, mixes: np.ndarray, assignments: np.ndarray, *,
                         anchor: int | None, n_boot: int = N_BOOT,
                         rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """The leaderboard statistics of one reward model (see module doc).

    ``scores`` (P, N); ``judge`` (P, N) probabilities that each policy's response beats the anchor's
    (NaN: not judged); ``mixes`` (M, N) bool; ``assignments`` (A, P) mix index per policy;
    ``anchor``: the reference row of the centred score (None: the mean over policies)."""
    s = np.asarray(scores, dtype=float)
    c = centred_scores(s, anchor=anchor)
    j = np.asarray(judge, dtype=float)
    mixes = np.asarray(mixes, dtype=bool)
    n = s.shape[1]
    w = np.vstack([np.ones((1, n)), resample_weights(n, n_boot, np.random.default_rng(rng))])  # row 0: sample
    everything = np.ones(n, dtype=bool)
    judge_v = _weighted_means(j, everything, w)  # (P, 1 + B)
    out: dict[str, Any] = {}
    for name, x in (("raw", s), ("centred", c)):
        full = _weighted_means(x, everything, w)
        by_mix = np.stack([_weighted_means(x, m, w) for m in mixes])  # (M, P, 1 + B)
        per = by_mix[assignments, np.arange(s.shape[0])[None, :], :]  # (A, P, 1 + B)
        tau_judge = kendall_tau_b(np.moveaxis(per, 1, -1), judge_v.T[None, :, :])  # (A, 1 + B)
        tau_full = kendall_tau_b(np.moveaxis(per, 1, -1), full.T[None, :, :])
        out[name] = {"full": full, "per": per, "tau_judge": tau_judge, "tau_full": tau_full,
                     "full_tau_judge": kendall_tau_b(full.T, judge_v.T)}
    res: dict[str, Any] = {"n_prompts": n, "n_assignments": int(len(assignments)), "n_boot": int(n_boot),
                           "judge_value": judge_v[:, 0].tolist(),
                           "full_coverage": {"raw": out["raw"]["full"][:, 0].tolist(),
                                             "centred": out["centred"]["full"][:, 0].tolist(),
                                             "tau_raw_vs_judge": _summ(out["raw"]["full_tau_judge"], n, n_boot)}}
    for name in ("raw", "centred"):
        o = out[name]
        res[name] = {
            "mean_tau_vs_judge": _summ(np.nanmean(o["tau_judge"], axis=0), n, n_boot),
            "mean_tau_vs_full_coverage": _summ(np.nanmean(o["tau_full"], axis=0), n, n_boot),
            "n_assignments_differing_from_full_coverage": int((o["tau_full"][:, 0] < 1 - 1e-12).sum()),
            "tau_vs_judge_by_assignment": o["tau_judge"][:, 0].tolist(),
            "means_by_assignment": o["per"][:, :, 0].tolist(),
        }
    diff = np.nanmean(out["centred"]["tau_judge"], axis=0) - np.nanmean(out["raw"]["tau_judge"], axis=0)
    res["centred_minus_raw_tau_vs_judge"] = _summ(diff, n, n_boot)
    return res


def _summ(values: np.ndarray, n_prompts: int, n_boot: int) -> dict[str, Any]:
    """summarize() of a (1 + B,) array whose first entry is the sample's value."""
    return summarize(float(values[0]), values[1:], n_prompts, n_boot)


def head_to_head(p_xy: Sequence[float], p_yx: Sequence[float], *, n_boot: int = N_BOOT,
                 rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """Win rate of x over y from both presentation orders, the judge's self-agreement across
    orders, and the per-prompt values (see module doc)."""
    a, b = np.asarray(p_xy, dtype=float), np.asarray(p_yx, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    win = (a[ok] + 1.0 - b[ok]) / 2.0
    agree = ((a[ok] > 0.5) & (b[ok] < 0.5)) | ((a[ok] < 0.5) & (b[ok] > 0.5))
    first = (a[ok] > 0.5) & (b[ok] > 0.5) | (a[ok] < 0.5) & (b[ok] < 0.5)  # both orders name one position
    out: dict[str, Any] = {"n_prompts": int(ok.sum()), "n_missing": int((~ok).sum())}
    if not ok.any():
        return out
    out["win_rate"] = mean_of_prompt_values(win, n_boot=n_boot, rng=rng)
    out["decisive"] = {"wins": int((agree & (a[ok] > 0.5)).sum()), "losses": int((agree & (a[ok] < 0.5)).sum())}
    out["self_agreement"] = mean_of_prompt_values(agree.astype(float), n_boot=n_boot, rng=rng)
    out["same_position_both_orders"] = float(first.mean())
    out["p_a_mean"] = float(np.concatenate([a[ok], b[ok]]).mean())
    return out


def paired_difference(x: Sequence[float], y: Sequence[float], *, n_boot: int = N_BOOT,
                      rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """Mean of x - y over the prompts where both are defined, bootstrapped over prompts."""
    d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    d = d[np.isfinite(d)]
    return mean_of_prompt_values(d, n_boot=n_boot, rng=rng) if len(d) else {"n_prompts": 0}


def pair_agreement(p_chosen: Sequence[float], groups: Sequence[Any], *, n_boot: int = N_BOOT,
                   rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """Share of labelled pairs whose judged P(chosen better) exceeds 1/2 (exactly 1/2 counts half),
    pooled over pairs and bootstrapped over their prompts (``groups``): a judge's agreement with
    the human order."""
    p = np.asarray(p_chosen, dtype=float)
    ok = np.isfinite(p)
    if not ok.any():
        return {"n_pairs": 0}
    hit = (p[ok] > 0.5) + 0.5 * (p[ok] == 0.5)
    codes, uniq = group_codes(np.asarray(groups)[ok])
    sums = per_prompt_sums(codes, np.column_stack([np.ones(len(hit)), hit]), len(uniq))
    out = prompt_bootstrap(sums, ratio_of_sums(), n_boot=n_boot, rng=rng)
    out["n_pairs"] = int(ok.sum())
    return out
