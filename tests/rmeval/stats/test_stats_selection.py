"""Global top-fraction selection (rmeval.stats.selection): the kept sets and the Spearman
correlations against pandas/scipy references written here, with 2 to 5 responses per prompt; the
rule for ties at the cut (expected kept mean under random tie-breaking) against an exhaustive
enumeration of tie orders and against row order; bootstrap weights against explicit duplication."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from rmeval.stats.selection import top_mean, top_selection
from tests.support import hand_top_mean


def _independent_top(df: pd.DataFrame, fraction: float) -> tuple[float, float]:
    """Plain pandas reference: leave-one-out centring and nlargest (continuous scores: no ties)."""
    g = df.groupby("g")
    df = df.assign(c=df["s"] - (g["s"].transform("sum") - df["s"]) / (g["s"].transform("size") - 1))
    m = int(round(fraction * len(df)))
    return df.nlargest(m, "s")["h"].mean(), df.nlargest(m, "c")["h"].mean()


def _sim(k, rng, prompt_sd=2.0, sizes=None):
    """``sizes``: responses per prompt (default 2 each)."""
    sizes = np.full(k, 2) if sizes is None else np.asarray(sizes)
    u = np.repeat(rng.normal(scale=prompt_sd, size=k), sizes)
    q = rng.normal(size=int(sizes.sum()))
    return pd.DataFrame({"g": np.repeat(np.arange(k), sizes), "s": u + q, "h": q + 0.2 * rng.normal(size=q.size)})


def test_point_estimates_match_pandas_reference_with_unequal_group_sizes():
    rng = np.random.default_rng(0)
    sizes = rng.integers(2, 6, size=37)  # 2 to 5 responses per prompt
    assert set(sizes) == {2, 3, 4, 5}
    df = _sim(37, rng, sizes=sizes)
    raw, cen = _independent_top(df, 0.3)
    res = top_selection(df["s"].to_numpy(), df["h"].to_numpy(), df["g"].to_numpy(), n_boot=200, rng=0)
    assert res["n_kept"] == round(0.3 * len(df))
    assert res["top30_raw"]["estimate"] == pytest.approx(raw, abs=1e-12)
    assert res["top30_centered"]["estimate"] == pytest.approx(cen, abs=1e-12)
    assert res["delta"]["estimate"] == pytest.approx(cen - raw, abs=1e-12)
    # the score: leave-one-out centred; the rating: the study's prompt-centred rating (minus the mean
    # of ALL the prompt's ratings)
    c = df["s"] - (df.groupby("g")["s"].transform("sum") - df["s"]) / (df.groupby("g")["s"].transform("size") - 1)
    hc = df["h"] - df.groupby("g")["h"].transform("mean")
    sp = res["spearman"]
    assert sp["raw_vs_raw"] == pytest.approx(spearmanr(df["s"], df["h"])[0], abs=1e-12)
    assert sp["centered_vs_centered"] == pytest.approx(spearmanr(c, hc)[0], abs=1e-12)
    assert sp["raw_vs_centered"] == pytest.approx(spearmanr(df["s"], hc)[0], abs=1e-12)
    assert sp["centered_vs_raw"] == pytest.approx(spearmanr(c, df["h"])[0], abs=1e-12)
    # with unequal sizes the leave-one-out centred rating is another variable (n/(n-1) differs by prompt)
    h_loo = df["h"] - (df.groupby("g")["h"].transform("sum") - df["h"]) / (df.groupby("g")["h"].transform("size") - 1)
    assert abs(spearmanr(c, h_loo)[0] - sp["centered_vs_centered"]) > 1e-3


def test_centred_rating_by_hand():
    # prompt a: ratings 1, 2, 6 (mean 3); prompt b: 4, 0 (mean 2); the centred ratings -2, -1, 3, 2, -2
    # and the scores' leave-one-out centring 0 - 1.5, 1 - 1, 2 - 0.5, 5 - 1, 1 - 5
    s = np.array([0.0, 1.0, 2.0, 5.0, 1.0])
    h = np.array([1.0, 2.0, 6.0, 4.0, 0.0])
    res = top_selection(s, h, np.array(["a", "a", "a", "b", "b"]), n_boot=10, rng=0)
    c = np.array([-1.5, 0.0, 1.5, 4.0, -4.0])
    hc = np.array([-2.0, -1.0, 3.0, 2.0, -2.0])
    assert res["spearman"]["centered_vs_centered"] == pytest.approx(spearmanr(c, hc)[0], abs=1e-12)
    assert res["spearman"]["raw_vs_centered"] == pytest.approx(spearmanr(s, hc)[0], abs=1e-12)


def test_weighted_cut_equals_explicit_duplication():
    rng = np.random.default_rng(1)
    df = _sim(15, rng, sizes=rng.integers(2, 6, size=15))
    df["s"] = np.round(df["s"])  # integer scores: ties at the cut, copies of a tied row among them
    codes = df["g"].to_numpy()
    for draw_seed in range(5):
        draw = np.random.default_rng(draw_seed).integers(0, 15, size=15)  # one bootstrap resample of prompts
        w_prompt = np.bincount(draw, minlength=15).astype(float)
        ours = top_mean(df["s"].to_numpy(), df["h"].to_numpy(), w_prompt[codes][:, None], 0.3)[0]
        dup = pd.concat([df[df["g"] == p] for p in draw], ignore_index=True)
        assert ours == pytest.approx(hand_top_mean(dup["s"], dup["h"]), abs=1e-12)


def test_ties_at_the_cut_are_the_mean_over_every_tie_order():
    """Integer scores with a tied block across the cut: the figure is the average, over every order
    of the rows, of the plain 'first m in that order' kept mean -- enumerated exhaustively."""
    s = np.array([3.0, 2.0, 2.0, 2.0, 1.0, 2.0, 0.0])
    h = np.array([1.0, 4.0, 0.0, 3.0, 2.0, 5.0, 1.0])
    m = int(np.round(0.5 * len(s)))  # 4: the 3 and three of the four 2s
    kept_means = []
    for perm in itertools.permutations(range(len(s))):
        keep = sorted(perm, key=lambda i: -s[i])[:m]  # sorted() is stable: ties in the order of perm
        kept_means.append(h[keep].mean())
    expected = float(np.mean(kept_means))
    assert expected == pytest.approx((1.0 + 3 * (4 + 0 + 3 + 5) / 4) / 4)  # by hand
    got = top_mean(s, h, np.ones((len(s), 1)), 0.5)[0]
    assert got == pytest.approx(expected, abs=1e-12)


def test_top_fraction_does_not_depend_on_row_order():
    """Integer ratings and integer-valued scores (many ties): 20 row orders give one figure, the
    by-hand value; both selections of ``top_selection`` alike."""
    rng = np.random.default_rng(5)
    k, n = 60, 4
    g = np.repeat(np.arange(k), n)
    u = np.repeat(rng.integers(-2, 3, size=k), n)
    s = (u + rng.integers(-2, 3, size=g.size)).astype(float)
    h = rng.integers(0, 5, size=g.size).astype(float)
    ref = hand_top_mean(s, h)
    first = top_selection(s, h, g, n_boot=100, rng=0)
    assert first["top30_raw"]["estimate"] == pytest.approx(ref, abs=1e-12)
    for i in range(20):
        p = np.random.default_rng(100 + i).permutation(g.size)
        res = top_selection(s[p], h[p], g[p], n_boot=100, rng=0)
        for key in ("top30_raw", "top30_centered", "delta"):
            assert res[key]["estimate"] == pytest.approx(first[key]["estimate"], abs=1e-12), (i, key)


def test_planted_selection_difference_recovered():
    # score = large prompt offset + response quality; rating = quality. Raw global selection keeps
    # responses to "high-offset" prompts; centring removes the offset. The population difference is
    # computed on a very large independent sample with the pandas reference.
    big = _sim(100_000, np.random.default_rng(2))
    raw, cen = _independent_top(big, 0.3)
    true_delta = cen - raw
    assert true_delta > 0.2
    df = _sim(600, np.random.default_rng(3))
    res = top_selection(df["s"].to_numpy(), df["h"].to_numpy(), df["g"].to_numpy(), n_boot=2000, rng=4)
    lo, hi = res["delta"]["ci95"]
    assert lo < true_delta < hi
    assert lo > 0


def test_singleton_prompts_dropped():
    res = top_selection(np.array([1.0, 2.0, 3.0, 0.5, 5.0]), np.array([1.0, 2.0, 3.0, 1.0, 4.0]),
                        np.array(["a", "a", "b", "b", "c"]), n_boot=50, rng=0)
    assert res["n_dropped"] == 1 and res["n_responses"] == 4


def test_exact_ties_stay_ties_whatever_the_row_order():
    """The planted ties (tests.support.planted_ties): every prompt holds the scores 0.1, 0.2 and 0.7,
    so the ten 0.7 responses tie exactly once centred and share the 9 slots of the top 30%: the
    expected kept mean is their mean rating, 2.3, by hand. The centred Spearman figures are those of
    the exact ranks (the centred score's rank is the response's role; the prompt-centred rating is
    (3 h - T_p) / 3), from scipy on integers. 20 row orders, one answer."""
    from rmeval.stats.centering import centering_variants
    from rmeval.stats.selection import loo_centered, prompt_centered
    from tests.support import planted_ties

    ref = planted_ties()
    assert ref.loc[ref["role"] == 3, "helpfulness"].mean() == pytest.approx(2.3, abs=1e-15)
    rho_cc = spearmanr(ref["role"], ref["h3"])[0]
    rho_cr = spearmanr(ref["role"], ref["helpfulness"])[0]
    for seed in range(20):
        d = planted_ties(seed)
        s, h, g = d["score"].to_numpy(), d["helpfulness"].to_numpy(), d["prompt_id"].to_numpy()
        codes = pd.factorize(g)[0]
        # equal centred values are equal floats
        assert pd.Series(loo_centered(s, codes, 10)).groupby(d["role"]).nunique().tolist() == [1, 1, 1]
        hc = pd.Series(prompt_centered(h, codes, 10))
        assert hc.groupby(d["h3"]).nunique().eq(1).all()
        res = top_selection(s, h, g, n_boot=20, rng=0)
        assert res["top30_centered"]["estimate"] == pytest.approx(2.3, abs=1e-15), seed
        assert res["spearman"]["centered_vs_centered"] == pytest.approx(rho_cc, abs=1e-15), seed
        assert res["spearman"]["raw_vs_centered"] == pytest.approx(rho_cc, abs=1e-15), seed
        assert res["spearman"]["centered_vs_raw"] == pytest.approx(rho_cr, abs=1e-15), seed
        cen = centering_variants(s, h, g, n_boot=20, rng=0)
        loo = cen["variants"]["siblings_all"]
        assert loo["top_mean"]["estimate"] == pytest.approx(2.3, abs=1e-15), seed
        assert loo["spearman_centered_rating"]["estimate"] == pytest.approx(rho_cc, abs=1e-15), seed
        assert cen["raw"]["spearman_centered_rating"]["estimate"] == pytest.approx(rho_cc, abs=1e-15), seed
