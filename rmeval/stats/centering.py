"""Centring variants for global selection, each compared with the raw score on the same resamples.

A centred score is the score minus an estimate of its prompt's mean. The estimate carries its own
sampling noise, so the study centres on:

* ``siblings_m`` (m = 1, 2, 3): the mean of m sibling responses -- the next m responses of the same
  prompt in row order, cyclically, so every response serves as a baseline equally often. A prompt
  with fewer than m siblings uses all it has (counted in ``n_prompts_short``); an m that leaves
  every prompt with all its siblings is ``siblings_all`` and is not repeated;
* ``siblings_all``: all siblings (leave-one-out; the ``centered`` selection of ``top_selection``);
* ``siblings_shrunk``: the leave-one-out mean shrunk toward the grand mean by an empirical-Bayes
  weight, mu + B_i (mean_i - mu) with B_i = tau^2 / (tau^2 + s_w^2 / m_i);
* ``pool`` / ``pool_shrunk``: the mean of an independent reference pool of responses to the same
  prompt (scored by the same model, never rated candidates), plain and shrunk the same way.

Here s_w^2 is the mean within-prompt variance of the baseline responses, m_i their number for
prompt i, and tau^2 the between-prompt variance of their means net of s_w^2 / m (floored at 0).
The weights, like the centred scores, are fitted once and held fixed across resamples, so the
intervals are conditional on them.

For every variant: the mean rating of the top fraction kept by the centred score, the pooled
Spearman correlation of the centred score with the raw rating and with the prompt-centred rating,
and each one's paired difference from the raw score (variant minus raw) on the same prompt
resamples. Spearman under a resample is the Spearman of the expanded sample (a prompt drawn twice
counts twice, ties get average ranks), computed from weights without materialising it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .bootstrap import resample_weights, rows_with_siblings, summarize
from .selection import loo_centered


def weighted_ranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(B, n) average ranks of ``x`` in the sample where row i appears w[b, i] times."""
    return _ranks_t(x, np.ascontiguousarray(np.atleast_2d(w).T)).T


def _ranks_t(x: np.ndarray, wt: np.ndarray) -> np.ndarray:
    """:func:`weighted_ranks` on transposed (n, B) weights: gathers of whole rows are contiguous,
    which is what makes the vectorised ranks cheap."""
    uniq, inv = np.unique(x, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    ws = wt[order]
    if len(uniq) < len(x):  # ties: sum the weights of each distinct value
        starts = np.flatnonzero(np.r_[True, np.diff(inv[order]) != 0])
        ws = np.add.reduceat(ws, starts, axis=0)
    rank_g = np.cumsum(ws, axis=0)
    rank_g -= ws
    rank_g += (ws + 1.0) / 2.0
    return rank_g[inv]


def _top_mean_t(order: np.ndarray, rating: np.ndarray, wt: np.ndarray, fraction: float) -> np.ndarray:
    """``selection._top_mean`` on transposed (n, B) weights (contiguous row gathers): the mean
    rating of the top ``round(fraction * total weight)`` responses in ``order``."""
    w = wt[order]
    m = np.round(fraction * w.sum(axis=0))
    cum = np.cumsum(w, axis=0)
    kept = np.clip(m - (cum - w), 0.0, w)  # how much of each response's weight is kept
    return (kept * rating[order][:, None]).sum(axis=0) / m


def _weighted_pearson(rx: np.ndarray, ry: np.ndarray, w: np.ndarray) -> np.ndarray:
    tot = w.sum(axis=1, keepdims=True)
    mx = (w * rx).sum(axis=1, keepdims=True) / tot
    my = (w * ry).sum(axis=1, keepdims=True) / tot
    dx, dy = rx - mx, ry - my
    return (w * dx * dy).sum(axis=1) / np.sqrt((w * dx * dx).sum(axis=1) * (w * dy * dy).sum(axis=1))


def weighted_spearman(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(B,) Spearman correlations of x with y in each weighted (expanded) sample."""
    w = np.atleast_2d(np.asarray(w, dtype=float))
    return _weighted_pearson(weighted_ranks(x, w), weighted_ranks(y, w), w)


def eb_shrunk_means(means: np.ndarray, within_var: float, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """mu + B_i (mean_i - mu) with B_i = tau^2 / (tau^2 + within_var / m_i); returns (shrunk, B)."""
    mu = float(means.mean())
    tau2 = max(float(means.var(ddof=1)) - within_var * float(np.mean(1.0 / m)), 0.0)
    b = tau2 / (tau2 + within_var / m) if tau2 > 0 else np.zeros_like(means)
    return mu + b * (means - mu), b


def _cyclic_sibling_mean(s: np.ndarray, codes: np.ndarray, k: int, m: int) -> tuple[np.ndarray, int]:
    """Mean of the next m siblings (row order, cyclic); prompts with < m siblings use all."""
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=k)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    sorted_s = s[order]
    pos = np.arange(len(s)) - np.repeat(starts, sizes)
    n_i = np.repeat(sizes, sizes)
    use = np.minimum(m, n_i - 1)
    base = np.zeros(len(s))
    for j in range(1, m + 1):  # m <= 3: a tiny loop over sibling offsets, vectorised over responses
        take = j <= use
        idx = np.repeat(starts, sizes) + (pos + j) % n_i
        base += np.where(take, sorted_s[idx], 0.0)
    out = np.empty(len(s))
    out[order] = base / use
    return out, int((sizes - 1 < m).sum())


def _within_var(values: np.ndarray, codes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(prompt means, group sizes, mean within-prompt variance)."""
    n = np.bincount(codes, minlength=k).astype(float)
    mean = np.bincount(codes, weights=values, minlength=k) / n
    ss = np.bincount(codes, weights=(values - mean[codes]) ** 2, minlength=k)
    return mean, n, float(np.mean(ss / np.maximum(n - 1, 1)))


def centering_variants(score: np.ndarray, rating: np.ndarray, groups: Any, *, top_fraction: float = 0.3,
                       siblings: tuple[int, ...] = (1, 2, 3), pool: pd.DataFrame | None = None,
                       n_boot: int = 2000, rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """{raw, variants: {name: {top_mean, top_delta, spearman_raw_rating, spearman_raw_delta,
    spearman_centered_rating, spearman_centered_delta, ...}}, eb_weight, ...} (see module doc).

    ``pool``: optional table (prompt_id, score) of independent reference responses' scores."""
    g_all = np.asarray(groups)
    (s, h), codes, k, n_dropped = rows_with_siblings(g_all, score, rating)
    if k < 3:
        return {}
    ok = np.isfinite(np.asarray(score, float)) & np.isfinite(np.asarray(rating, float))
    kept_groups = pd.Series(g_all[ok])
    kept_groups = kept_groups[kept_groups.map(kept_groups.value_counts()) >= 2]
    prompt_ids = pd.unique(kept_groups)  # code i <-> prompt_ids[i] (order of first appearance)
    hc = loo_centered(h, codes, k)
    n = np.bincount(codes, minlength=k).astype(float)
    loo_base = s - loo_centered(s, codes, k)
    baselines: dict[str, np.ndarray] = {}
    extra: dict[str, Any] = {}
    for m in siblings:
        if m >= n.max() - 1:  # every prompt would use all its siblings: the same as siblings_all
            continue
        baselines[f"siblings_{m}"], short = _cyclic_sibling_mean(s, codes, k, m)
        extra[f"siblings_{m}"] = {"n_prompts_short": short}
    baselines["siblings_all"] = loo_base
    mean, _, s_w2 = _within_var(s, codes, k)
    # leave-one-out means rest on n_i - 1 responses; their centre is shrunk like the pool's
    shrunk_loo, b_loo = eb_shrunk_means(loo_base, s_w2, n[codes] - 1)
    baselines["siblings_shrunk"] = shrunk_loo
    extra["siblings_shrunk"] = {"eb_weight_mean": float(np.mean(b_loo))}
    if pool is not None and len(pool):
        pm = pool.groupby(pool["prompt_id"].astype(str), sort=False)["score"].agg(["mean", "var", "size"])
        have = pd.Index(pm.index).get_indexer(pd.Index(prompt_ids).astype(str))
        if (have < 0).any():
            missing = pd.Index(prompt_ids)[have < 0]
            extra["pool_missing_prompts"] = int(len(missing))
        if (have >= 0).any():
            p_mean = pm["mean"].to_numpy(float)
            p_size = pm["size"].to_numpy(float)
            p_var = float(np.nanmean(pm["var"].to_numpy(float)))
            shrunk, b = eb_shrunk_means(p_mean, p_var, p_size)
            idx = have[codes]
            usable = idx >= 0
            base = np.where(usable, p_mean[np.maximum(idx, 0)], np.nan)
            baselines["pool"] = base
            baselines["pool_shrunk"] = np.where(usable, shrunk[np.maximum(idx, 0)], np.nan)
            extra["pool"] = {"pool_size_mean": float(p_size.mean())}
            extra["pool_shrunk"] = {"eb_weight_mean": float(b.mean()), "eb_weight_range": [float(b.min()), float(b.max())]}
    w_prompt = resample_weights(k, n_boot, np.random.default_rng(rng))
    w_resp_t = np.ascontiguousarray(w_prompt.T)[codes]  # (n, B): a response carries its prompt's weight
    ones_t = np.ones((len(s), 1))
    targets: dict[bool, Any] = {}

    def rating_ranks(mask: np.ndarray) -> Any:
        """Weighted ranks of the raw and the centred rating among the rows in ``mask`` (ranks are
        taken within the rows compared), with their weighted sums; cached for the full row set.
        Weights are held transposed, (n, B), so every gather is of contiguous rows."""
        key = bool(mask.all())
        if key not in targets or not key:
            out = []
            for wt in (w_resp_t * mask[:, None], ones_t * mask[:, None]):
                tw = wt.sum(axis=0)
                parts = []
                for y in (h, hc):
                    ry = _ranks_t(np.where(mask, y, 0.0), wt)
                    wy = wt * ry
                    parts.append((ry, wy.sum(axis=0), (wy * ry).sum(axis=0)))
                out.append((wt, tw, parts))
            targets[key] = out
        return targets[key]

    def spearmans(x: np.ndarray, wt: np.ndarray, tw: np.ndarray, parts: list) -> list[np.ndarray]:
        rx = _ranks_t(x, wt)
        wx = wt * rx
        sx, sxx = wx.sum(axis=0), (wx * rx).sum(axis=0)
        vx = sxx - sx * sx / tw
        return [((wx * ry).sum(axis=0) - sx * sy / tw) / np.sqrt(vx * (syy - sy * sy / tw))
                for ry, sy, syy in parts]

    def evaluate(x: np.ndarray, mask: np.ndarray) -> dict[str, tuple[float, np.ndarray]]:
        """Top mean and both Spearmans of score x on rows ``mask`` (full sample and resamples)."""
        (wrt, twr, parts_b), (ont, ton, parts_f) = rating_ranks(mask)
        order = np.argsort(-np.where(mask, x, -np.inf), kind="stable")
        xs = np.where(mask, x, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            rb, rcb = spearmans(xs, wrt, twr, parts_b)
            rf, rcf = spearmans(xs, ont, ton, parts_f)
            return {"top_mean": (float(_top_mean_t(order, h, ont, top_fraction)[0]),
                                 _top_mean_t(order, h, wrt, top_fraction)),
                    "spearman_raw_rating": (float(rf[0]), rb),
                    "spearman_centered_rating": (float(rcf[0]), rcb)}

    all_rows = np.ones(len(s), dtype=bool)
    raw = evaluate(s, all_rows)
    out_raw = {name: summarize(e, b, k, n_boot) for name, (e, b) in raw.items()}
    variants: dict[str, Any] = {}
    for name, base in baselines.items():
        mask = np.isfinite(base)
        c = s - np.where(mask, base, 0.0)
        res = evaluate(c, mask)
        # the raw score on the same rows: pool variants may cover fewer prompts than the siblings
        ref = raw if mask.all() else evaluate(s, mask)
        v: dict[str, Any] = {}
        for stat, (e, b) in res.items():
            v[stat] = summarize(e, b, k, n_boot)
            v[f"{stat}_delta"] = summarize(e - ref[stat][0], b - ref[stat][1], k, n_boot)
        v["n_responses"] = int(mask.sum())
        v.update(extra.get(name, {}))
        variants[name] = v
    return {"raw": out_raw, "variants": variants, "top_fraction": float(top_fraction),
            "n_responses": int(len(s)), "n_dropped": n_dropped,
            **({"pool_missing_prompts": extra["pool_missing_prompts"]} if "pool_missing_prompts" in extra else {})}
