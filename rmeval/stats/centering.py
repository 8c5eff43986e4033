"""Centring variants for global selection, each compared with the raw score on the same resamples.

A centred score is the score minus an estimate of its prompt's mean. The estimate carries its own
sampling noise, so the study centres on:

* ``siblings_m`` (m = 1, 2, 3): the mean of m sibling responses -- the next m responses of the same
  prompt in row order, cyclically, so every response serves as a baseline equally often. A prompt
  with fewer than m siblings uses all it has (counted in ``n_prompts_short``); an m that leaves
  every prompt with all its siblings is ``siblings_all`` and is not repeated;
* ``siblings_all``: all siblings (leave-one-out; the ``centered`` selection of ``top_selection``),
  computed exactly, as the prompt-centred rating is (``selection``'s module doc: exact ties stay
  ties whatever the row order);
* ``siblings_shrunk``: the leave-one-out mean shrunk toward the grand mean by an empirical-Bayes
  weight, mu + B_i (mean_i - mu) with B_i = tau^2 / (tau^2 + s_w^2 / m_i);
* ``pool`` / ``pool_shrunk``: the mean of an independent reference pool of responses to the same
  prompt (scored by the same model, never rated candidates), plain and shrunk the same way: the
  study's shrinkage baseline mu + B (P_p - mu), P_p the prompt's pool mean, mu its mean over
  prompts, B = tau^2 / (tau^2 + s_w^2 / k) for a pool of k per prompt;
* ``pool_m`` (m in ``pool_sizes``, below the pool's size): the mean of the prompt's first m pool
  responses (in ``sample`` order when the table has that column, so a pool of two policies
  alternates between them), the pool-size analogue of ``siblings_m``;
* ``pool_partial``: partial centring s - lambda (P_p - mu), mu the mean of the pool means over
  prompts (the shrinkage baseline's mu), lambda in 0, 0.1, ..., 1 chosen on one of two prompt
  folds and applied to the other. The folds are a fixed split of the prompt ids (half each, by a
  seeded hash, so every model of an audit gets the same folds); on each fold lambda maximises the
  mean rating of the top fraction of that fold's responses (the smallest lambda among ties: the
  least centring that does as well), and the responses of the other fold are centred with it.
  The study writes s - lambda P_p; within a fold the two differ by the constant lambda mu, so the
  chosen lambdas are the same, but when the folds choose different lambdas the pooled selection
  of s - lambda P_p moves one fold against the other by (lambda_0 - lambda_1) times the score's
  arbitrary origin (adding 10 to every candidate and pool score changed the kept set). Centring on
  the pool mean's deviation from mu makes every variant invariant to a constant shift of all
  scores.

Here s_w^2 is the mean within-prompt variance of the baseline responses, m_i their number for
prompt i, and tau^2 the between-prompt variance of their means net of s_w^2 / m (floored at 0).
The weights, like the centred scores and the chosen lambdas, are fitted once and held fixed across
resamples, so the intervals are conditional on them.

The 1/m extrapolation (``extrapolation``): a baseline of m references carries sampling variance
proportional to 1/m, so the cost of centring is fitted as delta(m) = a + b / m by least squares
over the sibling baselines of a fixed size (m = 1, 2, 3, and all siblings when every prompt has
the same number), and likewise over the pool sizes; the intercept a is the limit as m grows, on the
same resamples as the deltas. It assumes the cost is linear in the baseline's variance, and is
reported as such.

For every variant: the mean rating of the top fraction kept by the centred score (ties at the cut
kept with fractional weight, the expected mean under random tie-breaking: ``selection.top_mean``),
the pooled Spearman correlation of the centred score with the raw rating and with the
prompt-centred rating (the rating minus the mean rating of all the prompt's responses),
and each one's paired difference from the raw score (variant minus raw) on the same prompt
resamples. Spearman under a resample is the Spearman of the expanded sample (a prompt drawn twice
counts twice, ties get average ranks), computed from weights without materialising it.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pandas as pd

from .bootstrap import resample_weights, rows_with_siblings, summarize
from .selection import loo_centered, prompt_centered, top_mean
from .settings import N_BOOT


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


LAMBDAS = tuple(round(0.1 * i, 1) for i in range(11))  # partial-centring weights 0, 0.1, ..., 1
POOL_SIZES = (1, 2, 3, 6)


def prompt_folds(prompt_ids: Any, seed: int = 0) -> np.ndarray:
    """0/1 fold of each prompt: the prompts ordered by a seeded hash of their id, the first half
    fold 0. A function of the ids alone, so every model scored on the same prompts gets the same
    folds, and a statistic's bootstrap stream is left untouched."""
    ids = [str(p) for p in prompt_ids]
    h = np.array([zlib.crc32(f"{seed}\x1f{p}".encode()) for p in ids], dtype=np.int64)
    order = np.lexsort((np.array(ids, dtype=object).astype(str), h))
    folds = np.ones(len(ids), dtype=np.int64)
    folds[order[: len(ids) // 2]] = 0
    return folds


def top_fraction_mean(score: np.ndarray, rating: np.ndarray, top_fraction: float) -> float:
    """Mean rating of the top round(fraction * n) responses by score (ties at the cut: the expected
    mean under random tie-breaking, ``selection.top_mean``)."""
    return float(top_mean(score, rating, np.ones((len(score), 1)), top_fraction)[0])


def choose_lambda(score: np.ndarray, rating: np.ndarray, base: np.ndarray, *,
                  lambdas: tuple[float, ...] = LAMBDAS, top_fraction: float = 0.3) -> tuple[float, list[float]]:
    """(lambda, curve): the weight whose centred score score - lambda * base keeps the top fraction
    with the highest mean rating (the smallest among ties), and that mean for every lambda."""
    curve = [top_fraction_mean(score - lam * base, rating, top_fraction) for lam in lambdas]
    best = max(curve)
    return float(lambdas[next(i for i, v in enumerate(curve) if v >= best - 1e-12)]), curve


def cross_fitted_lambda(score: np.ndarray, rating: np.ndarray, base: np.ndarray, fold: np.ndarray, *,
                        lambdas: tuple[float, ...] = LAMBDAS,
                        top_fraction: float = 0.3) -> tuple[np.ndarray, dict[str, Any]]:
    """Per response the weight chosen on the OTHER fold (``fold``: 0/1 per response), and what was
    chosen: {lambda_chosen: {fold_0, fold_1}, curves, lambdas, n_responses_by_fold}."""
    chosen, curves = {}, {}
    for f in (0, 1):
        m = fold == f
        chosen[f], curves[f] = choose_lambda(score[m], rating[m], base[m], lambdas=lambdas,
                                             top_fraction=top_fraction)
    weight = np.where(fold == 0, chosen[1], chosen[0])
    info = {"lambda_chosen": {f"fold_{f}": chosen[f] for f in (0, 1)},
            "applied": "the lambda chosen on fold 0 centres fold 1 and vice versa",
            "lambdas": list(lambdas), "curves": {f"fold_{f}": curves[f] for f in (0, 1)},
            "n_responses_by_fold": {f"fold_{f}": int((fold == f).sum()) for f in (0, 1)}}
    return weight, info


def inverse_m_fit(m: np.ndarray, est: np.ndarray, boot: np.ndarray, n_prompts: int,
                  n_boot: int) -> dict[str, Any]:
    """delta(m) = a + b / m by least squares: {m, limit (a), slope (b)}; ``est`` (len(m),) and
    ``boot`` (len(m), B) are the deltas of each baseline size on the same resamples."""
    x = 1.0 / np.asarray(m, dtype=float)
    xc = x - x.mean()

    def fit(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        yc = y - y.mean(axis=0)
        slope = (xc[:, None] * yc).sum(axis=0) / (xc * xc).sum() if y.ndim > 1 else (xc * yc).sum() / (xc * xc).sum()
        return y.mean(axis=0) - slope * x.mean(), slope

    a, b = fit(np.asarray(est, dtype=float))
    ab, bb = fit(np.asarray(boot, dtype=float))
    return {"m": [int(v) for v in m], "limit": summarize(float(a), ab, n_prompts, n_boot),
            "slope": summarize(float(b), bb, n_prompts, n_boot)}


def pool_shrinkage(pool: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per prompt of a pool table (prompt_id, score): mean, var, size, the shrunk mean
    mu + B (mean - mu) and B; and {mu, tau2, s_w2, eb_weight_mean, eb_weight_range, n_prompts}."""
    pm = pool.groupby(pool["prompt_id"].astype(str), sort=False)["score"].agg(["mean", "var", "size"])
    p_mean, p_size = pm["mean"].to_numpy(float), pm["size"].to_numpy(float)
    s_w2 = float(np.nanmean(pm["var"].to_numpy(float)))
    shrunk, b = eb_shrunk_means(p_mean, s_w2, p_size)
    tau2 = max(float(p_mean.var(ddof=1)) - s_w2 * float(np.mean(1.0 / p_size)), 0.0)
    pm["shrunk"], pm["eb_weight"] = shrunk, b
    return pm, {"mu": float(p_mean.mean()), "tau2": tau2, "s_w2": s_w2, "eb_weight_mean": float(b.mean()),
                "eb_weight_range": [float(b.min()), float(b.max())], "n_prompts": int(len(pm))}


def _first_m(pool: pd.DataFrame, m: int) -> pd.DataFrame:
    """The first m pool responses of each prompt (in ``sample`` order when the pool has it)."""
    p = pool.sort_values("sample", kind="stable") if "sample" in pool.columns else pool
    return p[p.groupby(p["prompt_id"].astype(str), sort=False).cumcount() < m]


def _sibling_baselines(s: np.ndarray, codes: np.ndarray, k: int,
                       siblings: tuple[int, ...]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The sibling baselines: m cyclic siblings, all siblings (leave-one-out) and their shrunk mean."""
    n = np.bincount(codes, minlength=k).astype(float)
    loo_base = s - loo_centered(s, codes, k)  # the variant itself is scored on the exact centred value
    baselines: dict[str, np.ndarray] = {}
    extra: dict[str, Any] = {}
    for m in siblings:
        if m >= n.max() - 1:  # every prompt would use all its siblings: the same as siblings_all
            continue
        baselines[f"siblings_{m}"], short = _cyclic_sibling_mean(s, codes, k, m)
        extra[f"siblings_{m}"] = {"n_prompts_short": short}
    baselines["siblings_all"] = loo_base
    _, _, s_w2 = _within_var(s, codes, k)
    # leave-one-out means rest on n_i - 1 responses; their centre is shrunk like the pool's
    shrunk_loo, b_loo = eb_shrunk_means(loo_base, s_w2, n[codes] - 1)
    baselines["siblings_shrunk"] = shrunk_loo
    extra["siblings_shrunk"] = {"eb_weight_mean": float(np.mean(b_loo))}
    return baselines, extra


def _pool_baselines(s: np.ndarray, h: np.ndarray, codes: np.ndarray, prompt_ids: Any, pool: pd.DataFrame, *,
                    pool_sizes: tuple[int, ...], lambdas: tuple[float, ...], folds: dict[str, int] | None,
                    fold_seed: int, top_fraction: float) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The pool baselines: the pool mean, its shrunk mean, the first m pool responses, and the
    cross-fitted partial centring on the pool mean's deviation from its mean over prompts."""
    baselines: dict[str, np.ndarray] = {}
    extra: dict[str, Any] = {}
    pm, shrink = pool_shrinkage(pool)
    have = pd.Index(pm.index).get_indexer(pd.Index(prompt_ids).astype(str))
    if (have < 0).any():
        extra["pool_missing_prompts"] = int(len(pd.Index(prompt_ids)[have < 0]))
    if not (have >= 0).any():
        return baselines, extra
    p_mean, p_size, shrunk = (pm[c].to_numpy(float) for c in ("mean", "size", "shrunk"))
    idx = have[codes]
    usable = idx >= 0
    base = np.where(usable, p_mean[np.maximum(idx, 0)], np.nan)
    baselines["pool"] = base
    baselines["pool_shrunk"] = np.where(usable, shrunk[np.maximum(idx, 0)], np.nan)
    covered = p_size[have[have >= 0]]
    extra["pool"] = {"pool_size_mean": float(p_size.mean()), "m": int(covered[0])
                     if len(covered) and (covered == covered[0]).all() else None}
    extra["pool_shrunk"] = {k: shrink[k] for k in ("eb_weight_mean", "eb_weight_range", "mu", "tau2", "s_w2")}
    for m in pool_sizes:
        if m >= covered.max():
            continue
        fm = _first_m(pool, m)
        sub = fm.groupby(fm["prompt_id"].astype(str), sort=False)["score"].agg(["mean", "size"])
        at = pd.Index(sub.index).get_indexer(pd.Index(prompt_ids).astype(str))[codes]
        baselines[f"pool_{m}"] = np.where(at >= 0, sub["mean"].to_numpy(float)[np.maximum(at, 0)], np.nan)
        extra[f"pool_{m}"] = {"m": int(m), "n_prompts_short": int((sub["size"] < m).sum())}
    fold_of = (prompt_folds(prompt_ids, fold_seed) if folds is None
               else np.array([int(folds[str(p)]) for p in prompt_ids]))[codes]
    ok = np.isfinite(base)
    dev = base[ok] - shrink["mu"]  # the pool mean's deviation from its mean over prompts
    weight, info = cross_fitted_lambda(s[ok], h[ok], dev, fold_of[ok], lambdas=lambdas, top_fraction=top_fraction)
    partial = np.full(len(s), np.nan)
    partial[ok] = weight * dev
    baselines["pool_partial"] = partial
    info["centred_on"] = "lambda * (pool mean - mu), mu the mean of the pool means over prompts"
    extra["pool_partial"] = info
    return baselines, extra


class _Evaluator:
    """Top mean and Spearmans (raw and centred rating) of a score on some rows, on the full sample
    and on the prompt resamples. Weights are held transposed, (n, B), so every gather is of
    contiguous rows; the ranks of the ratings on all rows are computed once."""

    def __init__(self, h: np.ndarray, hc: np.ndarray, codes: np.ndarray, k: int, n_boot: int, rng: Any,
                 top_fraction: float) -> None:
        self.h, self.hc, self.top_fraction = h, hc, top_fraction
        w_prompt = resample_weights(k, n_boot, np.random.default_rng(rng))
        self.w_resp_t = np.ascontiguousarray(w_prompt.T)[codes]  # (n, B): a response carries its prompt's weight
        self.ones_t = np.ones((len(h), 1))
        self.targets: dict[bool, Any] = {}

    def rating_ranks(self, mask: np.ndarray) -> Any:
        """Weighted ranks of the raw and the centred rating among the rows in ``mask`` (ranks are
        taken within the rows compared), with their weighted sums; cached for the full row set."""
        key = bool(mask.all())
        if key not in self.targets or not key:
            out = []
            for wt in (self.w_resp_t * mask[:, None], self.ones_t * mask[:, None]):
                tw = wt.sum(axis=0)
                parts = []
                for y in (self.h, self.hc):
                    ry = _ranks_t(np.where(mask, y, 0.0), wt)
                    wy = wt * ry
                    parts.append((ry, wy.sum(axis=0), (wy * ry).sum(axis=0)))
                out.append((wt, tw, parts))
            self.targets[key] = out
        return self.targets[key]

    @staticmethod
    def spearmans(x: np.ndarray, wt: np.ndarray, tw: np.ndarray, parts: list) -> list[np.ndarray]:
        rx = _ranks_t(x, wt)
        wx = wt * rx
        sx, sxx = wx.sum(axis=0), (wx * rx).sum(axis=0)
        vx = sxx - sx * sx / tw
        return [((wx * ry).sum(axis=0) - sx * sy / tw) / np.sqrt(vx * (syy - sy * sy / tw))
                for ry, sy, syy in parts]

    def __call__(self, x: np.ndarray, mask: np.ndarray) -> dict[str, tuple[float, np.ndarray]]:
        """Top mean and both Spearmans of score x on rows ``mask`` (full sample and resamples)."""
        (wrt, twr, parts_b), (ont, ton, parts_f) = self.rating_ranks(mask)
        xm = np.where(mask, x, -np.inf)  # rows outside the mask carry weight 0 as well
        xs = np.where(mask, x, 0.0)
        h, f = self.h, self.top_fraction
        with np.errstate(divide="ignore", invalid="ignore"):
            rb, rcb = self.spearmans(xs, wrt, twr, parts_b)
            rf, rcf = self.spearmans(xs, ont, ton, parts_f)
            return {"top_mean": (float(top_mean(xm, h, ont, f)[0]), top_mean(xm, h, wrt, f)),
                    "spearman_raw_rating": (float(rf[0]), rb),
                    "spearman_centered_rating": (float(rcf[0]), rcb)}


def _variants(s: np.ndarray, baselines: dict[str, np.ndarray], extra: dict[str, Any], evaluate: _Evaluator,
              k: int, n_boot: int, exact: dict[str, np.ndarray]) -> tuple[dict[str, Any], dict[str, Any],
                                                                          dict[str, dict[str, Any]]]:
    """(raw summary, per-variant summaries with their deltas from raw, the deltas' draws);
    ``exact``: centred scores computed exactly (``selection.loo_centered``), used as they are, since
    s - (s - c) need not give back c's ties."""
    all_rows = np.ones(len(s), dtype=bool)
    raw = evaluate(s, all_rows)
    out_raw = {name: summarize(e, b, k, n_boot) for name, (e, b) in raw.items()}
    variants: dict[str, Any] = {}
    deltas: dict[str, dict[str, tuple[float, np.ndarray]]] = {}
    for name, base in baselines.items():
        mask = np.isfinite(base)
        c = exact[name] if name in exact else s - np.where(mask, base, 0.0)
        res = evaluate(c, mask)
        # the raw score on the same rows: pool variants may cover fewer prompts than the siblings
        ref = raw if mask.all() else evaluate(s, mask)
        v: dict[str, Any] = {}
        for stat, (e, b) in res.items():
            v[stat] = summarize(e, b, k, n_boot)
            v[f"{stat}_delta"] = summarize(e - ref[stat][0], b - ref[stat][1], k, n_boot)
            deltas.setdefault(name, {})[stat] = (e - ref[stat][0], b - ref[stat][1])
        v["n_responses"] = int(mask.sum())
        v.update(extra.get(name, {}))
        variants[name] = v
    return out_raw, variants, deltas


def _extrapolation(extra: dict[str, Any], deltas: dict[str, dict[str, Any]], codes: np.ndarray, k: int,
                   n_boot: int) -> dict[str, Any]:
    """The 1/m extrapolation over baselines of one fixed size m each (siblings, pool)."""
    sizes_n = np.bincount(codes, minlength=k)
    by_family: dict[str, dict[int, str]] = {"siblings": {}, "pool": {}}
    for name, info in extra.items():
        if not isinstance(info, dict):
            continue
        if name.startswith("siblings_") and name[9:].isdigit() and not info.get("n_prompts_short"):
            by_family["siblings"][int(name[9:])] = name
        elif name.startswith("pool_") and name[5:].isdigit() and not info.get("n_prompts_short"):
            by_family["pool"][int(info["m"])] = name
    if (sizes_n == sizes_n[0]).all():
        by_family["siblings"].setdefault(int(sizes_n[0]) - 1, "siblings_all")
    if extra.get("pool", {}).get("m"):
        by_family["pool"].setdefault(int(extra["pool"]["m"]), "pool")
    extrapolation: dict[str, Any] = {}
    for family, named in by_family.items():
        ms = sorted(named)
        if len(ms) < 2:
            continue
        extrapolation[family] = {"variants": [named[m] for m in ms]}
        for stat in ("top_mean", "spearman_raw_rating"):
            est = np.array([deltas[named[m]][stat][0] for m in ms])
            boot = np.stack([deltas[named[m]][stat][1] for m in ms])
            extrapolation[family][f"{stat}_delta"] = inverse_m_fit(np.array(ms), est, boot, k, n_boot)
    return extrapolation


def centering_variants(score: np.ndarray, rating: np.ndarray, groups: Any, *, top_fraction: float = 0.3,
                       siblings: tuple[int, ...] = (1, 2, 3), pool: pd.DataFrame | None = None,
                       pool_sizes: tuple[int, ...] = POOL_SIZES, lambdas: tuple[float, ...] = LAMBDAS,
                       folds: dict[str, int] | None = None, fold_seed: int = 0,
                       n_boot: int = N_BOOT, rng: np.random.Generator | int | None = 0) -> dict[str, Any]:
    """{raw, variants: {name: {top_mean, top_delta, spearman_raw_rating, spearman_raw_delta,
    spearman_centered_rating, spearman_centered_delta, ...}}, extrapolation, ...} (see module doc).

    ``pool``: optional table (prompt_id, score[, sample]) of independent reference responses' scores.
    ``folds``: prompt id -> 0/1 for the partial centring (default: ``prompt_folds`` of the ids)."""
    g_all = np.asarray(groups)
    (s, h), codes, k, n_dropped = rows_with_siblings(g_all, score, rating)
    if k < 3:
        return {}
    ok = np.isfinite(np.asarray(score, float)) & np.isfinite(np.asarray(rating, float))
    kept_groups = pd.Series(g_all[ok])
    kept_groups = kept_groups[kept_groups.map(kept_groups.value_counts()) >= 2]
    prompt_ids = pd.unique(kept_groups)  # code i <-> prompt_ids[i] (order of first appearance)
    hc = prompt_centered(h, codes, k)  # the study's prompt-centred rating (all responses' mean)
    baselines, extra = _sibling_baselines(s, codes, k, siblings)
    if pool is not None and len(pool):
        pool_base, pool_extra = _pool_baselines(s, h, codes, prompt_ids, pool, pool_sizes=pool_sizes,
                                                lambdas=lambdas, folds=folds, fold_seed=fold_seed,
                                                top_fraction=top_fraction)
        baselines.update(pool_base)
        extra.update(pool_extra)
    evaluate = _Evaluator(h, hc, codes, k, n_boot, rng, top_fraction)
    out_raw, variants, deltas = _variants(s, baselines, extra, evaluate, k, n_boot,
                                          exact={"siblings_all": loo_centered(s, codes, k)})
    extrapolation = _extrapolation(extra, deltas, codes, k, n_boot)
    out: dict[str, Any] = {"raw": out_raw, "variants": variants, "top_fraction": float(top_fraction),
                           "n_responses": int(len(s)), "n_dropped": n_dropped}
    if extrapolation:
        out["extrapolation"] = extrapolation
    if "pool_missing_prompts" in extra:
        out["pool_missing_prompts"] = extra["pool_missing_prompts"]
    return out
