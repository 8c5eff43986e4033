"""Pool-based centring (rmeval.stats.centering): the shrinkage weight B, the pool sizes, the
partial-centring weight chosen on one prompt fold and applied to the other, and the 1/m
extrapolation -- by hand on planted data; every variant unchanged by a constant shift of all
scores (candidates and pool)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rmeval.stats.centering import LAMBDAS, centering_variants, prompt_folds
from tests.support import hand_top_mean as _top_mean_by_hand


def test_shrinkage_weight_by_hand():
    # pool scores per prompt: means 2, 5, 1, 8; within-prompt variances 1, 3, 1, 4
    pool = pd.DataFrame({"prompt_id": np.repeat(["p0", "p1", "p2", "p3"], 3),
                         "score": [1, 2, 3, 4, 4, 7, 0, 1, 2, 6, 8, 10], "sample": [0, 1, 2] * 4})
    # s_w^2 = (1 + 3 + 1 + 4) / 4 = 2.25; var of the means (ddof 1) = (4 + 1 + 9 + 16) / 3 = 10;
    # tau^2 = 10 - 2.25 / 3 = 9.25; B = 9.25 / (9.25 + 0.75) = 0.925; mu = 4
    g = np.repeat(["p0", "p1", "p2", "p3"], 2)
    s = np.array([3.0, 2.5, 5.5, 4.0, 2.0, 0.5, 9.0, 8.5])
    h = np.array([1.0, 0.0, 3.0, 2.0, 4.0, 1.0, 2.0, 3.0])
    res = centering_variants(s, h, g, pool=pool, n_boot=50, rng=0)
    v = res["variants"]
    assert v["pool_shrunk"]["eb_weight_range"] == pytest.approx([0.925, 0.925])
    assert (v["pool_shrunk"]["tau2"], v["pool_shrunk"]["s_w2"], v["pool_shrunk"]["mu"]) == pytest.approx(
        (9.25, 2.25, 4.0))
    shrunk = {"p0": 4 + 0.925 * (2 - 4), "p1": 4 + 0.925 * (5 - 4), "p2": 4 + 0.925 * (1 - 4),
              "p3": 4 + 0.925 * (8 - 4)}
    c = s - np.array([shrunk[p] for p in g])
    assert v["pool_shrunk"]["top_mean"]["estimate"] == pytest.approx(_top_mean_by_hand(c, h))
    mean = {"p0": 2, "p1": 5, "p2": 1, "p3": 8}
    assert v["pool"]["top_mean"]["estimate"] == pytest.approx(
        _top_mean_by_hand(s - np.array([mean[p] for p in g]), h))
    # s - pool mean = 1, .5, .5, -1, 1, -.5, 1, .5: the top round(2.4) = 2 are two of the three
    # responses at 1 (ratings 1, 4, 2), each kept with probability 2/3: 2 x 7/3 / 2
    assert v["pool"]["top_mean"]["estimate"] == pytest.approx(7 / 3, abs=1e-12)
    # pool_1 / pool_2: the first one / two pool responses of each prompt (sample order)
    first = {"p0": 1, "p1": 4, "p2": 0, "p3": 6}
    two = {"p0": 1.5, "p1": 4, "p2": 0.5, "p3": 7}
    assert v["pool_1"]["top_mean"]["estimate"] == pytest.approx(
        _top_mean_by_hand(s - np.array([first[p] for p in g]), h))
    assert v["pool_2"]["top_mean"]["estimate"] == pytest.approx(
        _top_mean_by_hand(s - np.array([two[p] for p in g]), h))
    assert "pool_3" not in v and "pool_6" not in v  # a subset as large as the pool is the pool itself


def _two_fold_data(seed=4, n_prompts=60, k=3, offset=0.0):
    """On fold 0 the rating follows the pool-centred score (full centring is right there), on fold 1
    the raw score. Scores and pool carry ``offset`` (the origin of the score scale)."""
    rng = np.random.default_rng(seed)
    pid = [f"q{i}" for i in range(n_prompts)]
    folds = {p: i % 2 for i, p in enumerate(pid)}
    pool_mean = rng.normal(size=n_prompts) * 2
    g = np.repeat(pid, k)
    pm = np.repeat(pool_mean, k)
    s = pm + rng.normal(size=g.size)
    fold = np.array([folds[p] for p in g])
    h = np.where(fold == 0, s - pm, s) + 0.3 * rng.normal(size=g.size)
    pool = pd.DataFrame({"prompt_id": np.repeat(pid, 2), "score": np.repeat(pool_mean, 2) + np.tile([-0.1, 0.1],
                                                                                                   n_prompts)})
    return s + offset, h, g, pm + offset, fold, folds, pool.assign(score=pool["score"] + offset)


def test_partial_centring_weight_chosen_on_the_other_fold():
    """Each fold's lambda is found by brute force and must be the one applied to the other fold;
    the applied centring is lambda times the pool mean's deviation from its mean over prompts."""
    s, h, g, pm, fold, folds, pool = _two_fold_data()
    res = centering_variants(s, h, g, pool=pool, folds=folds, n_boot=50, rng=0)
    part = res["variants"]["pool_partial"]

    def brute(f):
        rows = np.flatnonzero(fold == f)
        curve = [_top_mean_by_hand(s[rows] - lam * pm[rows], h[rows]) for lam in LAMBDAS]
        best = max(curve)
        return next(lam for lam, v in zip(LAMBDAS, curve) if v >= best - 1e-9)

    lam0, lam1 = brute(0), brute(1)
    assert part["lambda_chosen"] == {"fold_0": lam0, "fold_1": lam1}
    assert lam0 >= 0.7 and lam1 <= 0.3  # planted: centring belongs to fold 0, raw scores to fold 1
    applied = np.where(fold == 0, lam1, lam0)
    mu = pool.groupby("prompt_id")["score"].mean().mean()  # the pool means' mean over prompts
    assert part["top_mean"]["estimate"] == pytest.approx(_top_mean_by_hand(s - applied * (pm - mu), h), abs=1e-12)
    assert part["n_responses_by_fold"] == {"fold_0": 90, "fold_1": 90}


def _numbers(tree, path=()):
    """Every number of a nested result, by its path of keys."""
    if isinstance(tree, dict):
        return {p: v for k, sub in tree.items() for p, v in _numbers(sub, (*path, k)).items()}
    if isinstance(tree, (list, tuple)):
        return {p: v for i, sub in enumerate(tree) for p, v in _numbers(sub, (*path, i)).items()}
    return {path: tree} if isinstance(tree, (int, float)) and not isinstance(tree, bool) else {}


def test_every_variant_is_unchanged_by_a_constant_shift_of_all_scores():
    """Adding 10 to every candidate and pool score moves no figure of any variant (only the pool's
    mean mu, by 10), on data where the two folds choose different partial-centring weights --
    where centring on lambda times the pool mean itself would move the kept set."""
    s, h, g, pm, fold, folds, pool = _two_fold_data(n_prompts=80, k=4)
    # four responses per prompt: siblings_1 and siblings_2 are variants too
    kw = {"folds": folds, "n_boot": 200, "rng": 3}
    base = centering_variants(s, h, g, pool=pool.assign(sample=pool.groupby("prompt_id").cumcount()), **kw)
    moved = centering_variants(s + 10.0, h, g, pool=pool.assign(score=pool["score"] + 10.0,
                                                                 sample=pool.groupby("prompt_id").cumcount()), **kw)
    v = base["variants"]
    assert {"siblings_1", "siblings_2", "siblings_all", "siblings_shrunk", "pool", "pool_shrunk", "pool_1",
            "pool_partial"} <= set(v)
    lam = v["pool_partial"]["lambda_chosen"]
    assert lam["fold_0"] != lam["fold_1"]  # the case where the origin could matter
    a, b = _numbers(base), _numbers(moved)
    assert a.keys() == b.keys()
    for path, x in a.items():
        expected = x + 10.0 if path[-1] == "mu" else x
        assert b[path] == pytest.approx(expected, abs=1e-9), path
    # the study's literal s - lambda P_p would not be: on the same lambdas its kept set moves
    applied = np.where(fold == 0, lam["fold_1"], lam["fold_0"])
    literal = _top_mean_by_hand(s - applied * pm, h)
    literal_moved = _top_mean_by_hand(s + 10.0 - applied * (pm + 10.0), h)
    assert abs(literal - literal_moved) > 0.05


def test_prompt_folds_depend_on_ids_only():
    ids = [f"p{i}" for i in range(101)]
    f = prompt_folds(ids)
    assert sorted(np.bincount(f)) == [50, 51]
    shuffled = list(reversed(ids))
    g = prompt_folds(shuffled)
    assert {p: x for p, x in zip(shuffled, g)} == {p: x for p, x in zip(ids, f)}
    assert (prompt_folds(ids, seed=1) != f).any()


def test_inverse_m_extrapolation_is_the_least_squares_intercept():
    rng = np.random.default_rng(2)
    n_prompts, k = 300, 4
    g = np.repeat(np.arange(n_prompts), k)
    u = np.repeat(rng.normal(size=n_prompts), k)
    h = u + rng.normal(size=g.size)
    s = u + rng.normal(size=g.size)
    pool = pd.DataFrame({"prompt_id": np.repeat(np.arange(n_prompts), 6),
                         "score": np.repeat(u[::k], 6) + rng.normal(size=n_prompts * 6),
                         "sample": np.tile(np.arange(6), n_prompts)})
    res = centering_variants(s, h, g, pool=pool, n_boot=200, rng=0)
    v, ex = res["variants"], res["extrapolation"]
    # siblings: m = 1, 2 and all three siblings (every prompt has four responses)
    assert ex["siblings"]["variants"] == ["siblings_1", "siblings_2", "siblings_all"]
    assert ex["pool"]["variants"] == ["pool_1", "pool_2", "pool_3", "pool"]
    for family, ms in (("siblings", [1, 2, 3]), ("pool", [1, 2, 3, 6])):
        for stat in ("top_mean_delta", "spearman_raw_rating_delta"):
            y = [v[name][stat]["estimate"] for name in ex[family]["variants"]]
            slope, intercept = np.polyfit(1 / np.array(ms, float), y, 1)
            fit = ex[family][stat]
            assert fit["m"] == ms
            assert fit["limit"]["estimate"] == pytest.approx(intercept, abs=1e-10)
            assert fit["slope"]["estimate"] == pytest.approx(slope, abs=1e-10)
            assert fit["limit"]["ci95"][0] <= fit["limit"]["ci95"][1]
    # planted: the prompt effect is useful, so the cost of centring is largest with one reference
    assert v["siblings_1"]["top_mean_delta"]["estimate"] < v["siblings_all"]["top_mean_delta"]["estimate"] < 0


def test_unequal_group_sizes_against_pandas_and_scipy():
    """2 to 5 responses per prompt: the leave-one-out centred score's kept mean and the Spearman
    correlations with the prompt-centred rating (rating minus the mean of all the prompt's ratings)."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(12)
    sizes = rng.integers(2, 6, size=50)
    df = pd.DataFrame({"g": np.repeat([f"p{i}" for i in range(50)], sizes)})
    u = np.repeat(rng.normal(size=50), sizes)
    df["s"] = u + rng.normal(size=len(df))
    df["h"] = np.round(np.clip(2 + u + rng.normal(size=len(df)), 0, 4))  # integer ratings
    res = centering_variants(df["s"].to_numpy(), df["h"].to_numpy(), df["g"].to_numpy(), n_boot=50, rng=0)
    grp = df.groupby("g")
    c = df["s"] - (grp["s"].transform("sum") - df["s"]) / (grp["s"].transform("size") - 1)
    # the prompt-centred rating as one division of integers, (n h - T) / n: integer ratings' exact ties
    # stay ties (h - T / n splits 2 - 5/3 from 3 - 8/3, both 1/3)
    n = grp["h"].transform("size")
    hc = (n * df["h"] - grp["h"].transform("sum")) / n
    raw, v = res["raw"], res["variants"]["siblings_all"]
    assert raw["spearman_centered_rating"]["estimate"] == pytest.approx(spearmanr(df["s"], hc)[0], abs=1e-12)
    assert v["spearman_centered_rating"]["estimate"] == pytest.approx(spearmanr(c, hc)[0], abs=1e-12)
    assert v["spearman_raw_rating"]["estimate"] == pytest.approx(spearmanr(c, df["h"])[0], abs=1e-12)
    assert v["top_mean"]["estimate"] == pytest.approx(_top_mean_by_hand(c, df["h"]), abs=1e-12)
    assert raw["top_mean"]["estimate"] == pytest.approx(_top_mean_by_hand(df["s"], df["h"]), abs=1e-12)
