"""Paired shares, prompt-mean correlations, leave-one-out correlation, prompt-length split,
centring variants and rater reliability: each against scipy / pingouin / statsmodels or a hand
computation, and against planted values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
import statsmodels.api as sm
from scipy.stats import pearsonr, spearmanr

from rmeval.stats.bootstrap import resample_weights
from rmeval.stats.centering import centering_variants, eb_shrunk_means, weighted_ranks, weighted_spearman
from rmeval.stats.prompt_means import (
    disjoint_half_correlation,
    loo_correlation,
    prompt_mean_correlation,
    prompt_split_difference,
)
from rmeval.stats.reliability import corrected_share, rater_reliability, spearman_brown
from rmeval.stats.share import share_pair
from tests.support import hand_icc


def _nested(n_prompts=300, k=4, share_a=0.6, share_b=0.2, seed=0):
    """Two measurements of the same responses with planted ICC(1) share_a and share_b."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(n_prompts), k)
    a = np.repeat(rng.normal(size=n_prompts), k) * np.sqrt(share_a) + rng.normal(size=g.size) * np.sqrt(1 - share_a)
    b = np.repeat(rng.normal(size=n_prompts), k) * np.sqrt(share_b) + rng.normal(size=g.size) * np.sqrt(1 - share_b)
    return a, b, g


def test_share_pair_matches_hand_icc_and_recovers_planted_difference():
    a, b, g = _nested(n_prompts=800)
    b[3] = np.nan  # one row unusable for b: left out of both shares
    res = share_pair(a, b, g, n_boot=500, rng=0, names=("original", "generic"))
    keep = np.isfinite(b)
    assert res["original"]["estimate"] == pytest.approx(hand_icc(a[keep], g[keep]), abs=1e-10)
    assert res["generic"]["estimate"] == pytest.approx(hand_icc(b[keep], g[keep]), abs=1e-10)
    d = res["difference"]
    assert d["estimate"] == pytest.approx(res["original"]["estimate"] - res["generic"]["estimate"])
    assert d["ci95"][0] < 0.4 < d["ci95"][1]  # planted 0.6 - 0.2
    assert res["n_responses"] == keep.sum()


def test_share_pair_is_paired():
    """The same variable measured twice with tiny noise: the paired interval is far narrower
    than either share's own interval."""
    a, _, g = _nested(n_prompts=200)
    b = a + np.random.default_rng(1).normal(size=a.size) * 0.01
    res = share_pair(a, b, g, n_boot=400, rng=0)
    width = lambda r: r["ci95"][1] - r["ci95"][0]  # noqa: E731
    assert width(res["difference"]) < 0.1 * width(res["a"])


def _frame(x, y, g):
    return pd.DataFrame({"x": x, "y": y, "g": g})


def test_prompt_mean_correlation_matches_scipy():
    a, b, g = _nested(n_prompts=100, seed=2)
    df = _frame(a, a + b, g).groupby("g").mean()
    res = prompt_mean_correlation(a, a + b, g, n_boot=300, rng=0)
    assert res["estimate"] == pytest.approx(pearsonr(df["x"], df["y"])[0], abs=1e-12)
    assert res["ci95"][0] < res["estimate"] < res["ci95"][1]


def test_disjoint_half_correlation_by_hand():
    rng = np.random.default_rng(3)
    sizes = rng.integers(2, 6, size=80)
    g = np.repeat(np.arange(80), sizes)
    x, y = rng.normal(size=g.size), rng.normal(size=g.size)
    df = _frame(x, y, g)
    df["pos"] = df.groupby("g").cumcount()
    df["half"] = np.where(df["pos"] < df["g"].map(df.groupby("g").size()) // 2, "A", "B")
    m = df.groupby(["g", "half"])[["x", "y"]].mean().unstack()
    ref = 0.5 * (pearsonr(m[("x", "A")], m[("y", "B")])[0] + pearsonr(m[("x", "B")], m[("y", "A")])[0])
    assert disjoint_half_correlation(x, y, g, n_boot=200)["estimate"] == pytest.approx(ref, abs=1e-12)


def test_disjoint_halves_remove_shared_response_noise():
    """Model and human both see the same response noise but no prompt effect: the whole-prompt
    correlation of means is large, the disjoint-half one is ~0 (the study's HelpSteer2 case)."""
    rng = np.random.default_rng(4)
    g = np.repeat(np.arange(1500), 2)
    q = rng.normal(size=g.size)
    s, h = q + 0.3 * rng.normal(size=g.size), q + 0.3 * rng.normal(size=g.size)
    whole = prompt_mean_correlation(s, h, g, n_boot=300)
    half = disjoint_half_correlation(s, h, g, n_boot=300)
    assert whole["estimate"] > 0.8
    assert half["ci95"][0] < 0 < half["ci95"][1]


def test_loo_correlation_matches_scipy_and_planted_negative():
    # k = 2 with a planted within-pair correlation of -0.3 (HelpSteer2's sequential rating: -0.08)
    rng = np.random.default_rng(5)
    pairs = rng.multivariate_normal([0, 0], [[1, -0.3], [-0.3, 1]], size=3000)
    v, g = pairs.ravel(), np.repeat(np.arange(3000), 2)
    res = loo_correlation(v, g, n_boot=400)
    sib = pairs[:, ::-1].ravel()
    assert res["estimate"] == pytest.approx(pearsonr(v, sib)[0], abs=1e-12)
    assert res["ci95"][0] < -0.3 < res["ci95"][1]


def test_prompt_split_difference_by_hand():
    rng = np.random.default_rng(6)
    g = np.repeat(np.arange(101), 3)
    plen = np.repeat(rng.integers(5, 200, size=101), 3).astype(float)
    v = rng.normal(size=g.size) - 0.5 * (plen > np.median(np.unique(plen)))
    res = prompt_split_difference(v, g, plen, n_boot=300)
    per = pd.DataFrame({"g": g, "v": v, "p": plen}).groupby("g")["p"].first()
    long = np.isin(g, per.index[per > per.median()])
    points = v[long].mean() - v[~long].mean()
    assert res["points"]["estimate"] == pytest.approx(points, abs=1e-12)
    assert res["estimate"] == pytest.approx(points / v.std(ddof=1), abs=1e-12)
    assert res["n_long_prompts"] + res["n_short_prompts"] == 101


def test_weighted_spearman_is_spearman_of_expanded_sample():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 5, size=40).astype(float)  # ties, as ratings have
    y = x + rng.normal(size=40)
    w = resample_weights(40, 5, rng)
    got = weighted_spearman(x, y, w)
    for b in range(5):
        idx = np.repeat(np.arange(40), w[b].astype(int))
        assert got[b] == pytest.approx(spearmanr(x[idx], y[idx])[0], abs=1e-12)
    assert weighted_ranks(x, np.ones((1, 40)))[0] == pytest.approx(pd.Series(x).rank().to_numpy())


def _selection_data(n_prompts=400, k=4, seed=8):
    """Score and rating share a prompt effect: raw pooling uses it, centring removes it."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(n_prompts), k)
    u = np.repeat(rng.normal(size=n_prompts), k)
    q = rng.normal(size=g.size)
    h = np.round(np.clip(2 + 0.8 * u + 0.8 * q, 0, 4))
    s = u + q + 0.8 * rng.normal(size=g.size)
    return s, h, g, u


def test_centering_siblings_by_hand_and_planted_cost():
    s, h, g, u = _selection_data()
    res = centering_variants(s, h, g, n_boot=300, rng=0)
    v = res["variants"]
    assert set(v) == {"siblings_1", "siblings_2", "siblings_all", "siblings_shrunk"}
    # siblings_1: the next response of the prompt (cyclic); recompute the kept-set mean by hand
    nxt = s.reshape(-1, 4)[:, [1, 2, 3, 0]].ravel()
    c = s - nxt
    keep = np.argsort(-c, kind="stable")[: int(round(0.3 * len(s)))]
    assert v["siblings_1"]["top_mean"]["estimate"] == pytest.approx(h[keep].mean(), abs=1e-12)
    raw_keep = np.argsort(-s, kind="stable")[: int(round(0.3 * len(s)))]
    assert res["raw"]["top_mean"]["estimate"] == pytest.approx(h[raw_keep].mean(), abs=1e-12)
    assert v["siblings_1"]["spearman_raw_rating_delta"]["estimate"] == pytest.approx(
        spearmanr(c, h)[0] - spearmanr(s, h)[0], abs=1e-12)
    # planted: the prompt effect is real quality, so centring costs, and more so with a noisier baseline
    for name in ("siblings_1", "siblings_2", "siblings_all"):
        assert v[name]["top_mean_delta"]["ci95"][1] < 0
    assert v["siblings_1"]["top_mean_delta"]["estimate"] < v["siblings_all"]["top_mean_delta"]["estimate"]


def test_centering_on_reference_pool_and_eb_weight():
    s, h, g, u = _selection_data(seed=9)
    rng = np.random.default_rng(10)
    pid = np.arange(400)
    pool = pd.DataFrame({"prompt_id": np.repeat(pid, 12), "score": np.repeat(u.reshape(-1, 4)[:, 0], 12)
                         + 1.2 * rng.normal(size=400 * 12)})
    res = centering_variants(s, h, g, pool=pool, n_boot=300, rng=0)
    v = res["variants"]
    means = pool.groupby("prompt_id")["score"].mean().to_numpy()
    s_w2 = pool.groupby("prompt_id")["score"].var().mean()
    tau2 = means.var(ddof=1) - s_w2 / 12
    b = tau2 / (tau2 + s_w2 / 12)
    assert v["pool_shrunk"]["eb_weight_mean"] == pytest.approx(b, rel=1e-10)
    shrunk, _ = eb_shrunk_means(means, s_w2, np.full(400, 12.0))
    c = s - np.repeat(shrunk, 4)
    keep = np.argsort(-c, kind="stable")[: int(round(0.3 * len(s)))]
    assert v["pool_shrunk"]["top_mean"]["estimate"] == pytest.approx(h[keep].mean(), abs=1e-12)
    assert v["pool"]["top_mean_delta"]["ci95"][1] < 0  # planted: the pool tracks the useful prompt effect


def test_reliability_against_pingouin_and_planted_correction():
    rng = np.random.default_rng(11)
    n_resp, raters = 3000, 3
    true = rng.normal(size=n_resp)
    noise_sd = 1.0  # single-rater reliability 1 / (1 + 1) = 0.5
    ann = np.repeat(true, raters) + noise_sd * rng.normal(size=n_resp * raters)
    rid = np.repeat(np.arange(n_resp), raters)
    rel = rater_reliability(ann, rid, k=3, n_boot=200)
    df = pd.DataFrame({"t": rid, "r": np.tile(np.arange(raters), n_resp), "v": ann})
    icc = pg.intraclass_corr(data=df, targets="t", raters="r", ratings="v").set_index("Type")["ICC"]
    assert rel["single_rater"] == pytest.approx(float(icc["ICC1"] if "ICC1" in icc.index else icc["ICC(1,1)"]),
                                                abs=1e-10)
    assert rel["single_rater"] == pytest.approx(0.5, abs=0.03)
    assert rel["mean_of_3"] == pytest.approx(3 * rel["single_rater"] / (1 + 2 * rel["single_rater"]))
    others = (ann.reshape(-1, 3).sum(axis=1, keepdims=True) - ann.reshape(-1, 3)) / 2
    assert rel["one_vs_rest"] == pytest.approx(pearsonr(ann, others.ravel())[0], abs=1e-12)
    assert spearman_brown(0.62, 3) == pytest.approx(0.83, abs=0.005)  # the study's 0.62 -> 0.83


def test_corrected_share_recovers_planted_true_share():
    """Ratings = true quality (share 0.5 by prompt) + rater noise of reliability 0.6: the
    observed share is ~0.30 and dividing by the reliability recovers 0.5."""
    rng = np.random.default_rng(12)
    n_prompts, k = 1500, 4
    g = np.repeat(np.arange(n_prompts), k)
    true = np.repeat(rng.normal(size=n_prompts), k) * np.sqrt(0.5) + rng.normal(size=g.size) * np.sqrt(0.5)
    noisy = true + rng.normal(size=g.size) * np.sqrt(1 / 0.6 - 1)
    from rmeval.stats.share import share

    obs = share(noisy, g, n_boot=400)
    cor = corrected_share(obs, 0.6)
    assert cor["ci95"][0] < 0.5 < cor["ci95"][1]
    assert cor["estimate"] == pytest.approx(obs["estimate"] / 0.6)
    with pytest.raises(ValueError):
        corrected_share(obs, 0.0)


def test_residual_share_with_exposure_matches_statsmodels_residuals():
    """Exposure-adjusted share = ICC(1) of the OLS residuals (statsmodels), computed by hand."""
    from rmeval.stats.share import residual_share

    rng = np.random.default_rng(13)
    g = np.repeat(np.arange(200), 4)
    exposure = np.repeat(rng.normal(size=200), 4) + 0.3 * rng.normal(size=800)
    y = 0.8 * exposure + np.repeat(rng.normal(size=200), 4) * 0.5 + rng.normal(size=800)
    resid = sm.OLS(y, sm.add_constant(exposure)).fit().resid
    assert residual_share(y, exposure, g, n_boot=100)["estimate"] == pytest.approx(hand_icc(resid, g), abs=1e-10)
