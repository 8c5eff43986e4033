"""Leaderboard and head-to-head statistics (rmeval.stats.ranking) against scipy and by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from rmeval.stats.ranking import (
    centred_scores,
    coverage_leaderboard,
    draw_assignments,
    head_to_head,
    jaccard,
    kendall_tau_b,
    pair_agreement,
    paired_difference,
)


def test_kendall_tau_b_matches_scipy_with_ties_and_broadcasting():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, size=(50, 6)).astype(float)  # many ties
    y = rng.integers(0, 4, size=(50, 6)).astype(float)
    got = kendall_tau_b(x, y)
    for i in range(50):
        ref = kendalltau(x[i], y[i]).statistic
        assert (np.isnan(got[i]) and np.isnan(ref)) or got[i] == pytest.approx(ref, abs=1e-12)
    # one reference ranking against many: broadcast over the leading axis
    ref_row = np.array([3.0, 1.0, 2.0, 5.0, 4.0, 0.0])
    got = kendall_tau_b(x, ref_row[None, :])
    assert got[7] == pytest.approx(kendalltau(x[7], ref_row).statistic, abs=1e-12)
    assert np.isnan(kendall_tau_b(np.ones(5), np.arange(5.0)))  # a constant ranking has no tau


def test_jaccard_by_hand():
    assert jaccard({1, 2, 3}, {2, 3, 4}) == pytest.approx(2 / 4)
    assert jaccard(["a"], ["a"]) == 1.0 and jaccard([1], [2]) == 0.0
    assert np.isnan(jaccard([], []))


def test_assignments_are_uniform_and_never_all_on_one_mix():
    a = draw_assignments(5, 4, 4000, seed=3)
    assert a.shape == (4000, 5) and a.min() == 0 and a.max() == 3
    assert not (a == a[:, :1]).all(axis=1).any()
    freq = np.bincount(a.ravel(), minlength=4) / a.size
    assert np.allclose(freq, 0.25, atol=0.01)
    assert (draw_assignments(5, 4, 20, seed=3) == draw_assignments(5, 4, 20, seed=3)).all()
    with pytest.raises(ValueError):
        draw_assignments(5, 1, 3)


def _planted(seed=0, n=200):
    """Five policies of true quality q; prompts with an offset u shared by every response; two
    mixes of easy and hard prompts, so raw means under unequal coverage reward the easy mix."""
    rng = np.random.default_rng(seed)
    q = np.array([0.0, 0.3, 0.6, 0.9, 1.2])
    u = rng.normal(size=n) * 2.0
    easy = u > np.median(u)
    s = q[:, None] + u[None, :] + 0.05 * rng.normal(size=(5, n))
    judge = 1 / (1 + np.exp(-(q[:, None] - q[1]) * 3 + 0.1 * rng.normal(size=(5, n))))
    judge[1] = 0.5  # the anchor against itself
    mixes = np.stack([easy, ~easy])
    return s, judge, mixes, q


def test_coverage_leaderboard_by_hand():
    s, judge, mixes, q = _planted()
    assign = draw_assignments(5, 2, 20, seed=1)
    res = coverage_leaderboard(s, judge, mixes, assign, anchor=1, n_boot=200, rng=0)
    c = s - s[1]
    jv = judge.mean(axis=1)
    taus_raw, taus_cen, differs = [], [], 0
    for a in assign:
        raw = [s[p, mixes[a[p]]].mean() for p in range(5)]
        cen = [c[p, mixes[a[p]]].mean() for p in range(5)]
        taus_raw.append(kendalltau(raw, jv).statistic)
        taus_cen.append(kendalltau(cen, jv).statistic)
        differs += kendalltau(raw, s.mean(axis=1)).statistic < 1 - 1e-9  # float rounding of 1
    assert res["raw"]["mean_tau_vs_judge"]["estimate"] == pytest.approx(np.mean(taus_raw), abs=1e-12)
    assert res["centred"]["mean_tau_vs_judge"]["estimate"] == pytest.approx(np.mean(taus_cen), abs=1e-12)
    assert res["centred_minus_raw_tau_vs_judge"]["estimate"] == pytest.approx(np.mean(taus_cen) - np.mean(taus_raw))
    assert res["raw"]["n_assignments_differing_from_full_coverage"] == differs
    assert res["full_coverage"]["raw"] == pytest.approx(s.mean(axis=1).tolist())
    assert res["judge_value"] == pytest.approx(jv.tolist())
    # planted: the anchor is on every prompt, so centring removes the mix offset and recovers q
    assert res["centred"]["mean_tau_vs_judge"]["estimate"] == pytest.approx(1.0)
    assert res["raw"]["mean_tau_vs_judge"]["estimate"] < 0.7 and differs > 10
    lo, hi = res["centred_minus_raw_tau_vs_judge"]["ci95"]
    assert 0 < lo <= hi


def test_centred_on_policy_mean():
    s = np.array([[1.0, 2.0], [3.0, 6.0]])
    assert centred_scores(s, anchor=None).tolist() == [[-1.0, -2.0], [1.0, 2.0]]
    assert centred_scores(s, anchor=0).tolist() == [[0.0, 0.0], [2.0, 4.0]]


def test_centring_on_the_policies_mean_is_exact_whatever_their_order():
    """Each prompt's mean over policies is subtracted exactly: the correctly rounded value of
    s - (sum of the column) / P in rational arithmetic, the same floats for any order of the policies
    (a float mean summed in row order moves by a rounding step: 0.1 + 0.2 + 0.7 is 1.0, 0.7 + 0.2 +
    0.1 is 0.9999999999999999); a prompt with a missing score is NaN throughout, as before."""
    from fractions import Fraction

    rng = np.random.default_rng(0)
    s = rng.normal(size=(5, 200))
    s[:3, 0] = [0.1, 0.2, 0.7]
    s[3, 5] = np.nan
    got = centred_scores(s, anchor=None)
    for n in range(s.shape[1]):
        if n == 5:
            assert np.isnan(got[:, n]).all()
            continue
        mean = sum(Fraction(x) for x in s[:, n]) / s.shape[0]
        assert got[:, n].tolist() == [float(Fraction(x) - mean) for x in s[:, n]]
    for order in ([4, 3, 2, 1, 0], [2, 0, 4, 1, 3]):
        assert np.array_equal(centred_scores(s[order], anchor=None), got[order], equal_nan=True)


def test_head_to_head_by_hand():
    p_xy = [0.9, 0.6, 0.2, np.nan, 0.7]
    p_yx = [0.3, 0.7, 0.6, 0.5, 0.5]
    r = head_to_head(p_xy, p_yx, n_boot=100)
    wins = [(0.9 + 0.7) / 2, (0.6 + 0.3) / 2, (0.2 + 0.4) / 2, (0.7 + 0.5) / 2]
    assert r["win_rate"]["estimate"] == pytest.approx(np.mean(wins))
    assert r["n_prompts"] == 4 and r["n_missing"] == 1
    # orders agree when they prefer the same response: prompt 1 (x) and prompt 3 (y)
    assert r["self_agreement"]["estimate"] == pytest.approx(2 / 4)
    assert r["decisive"] == {"wins": 1, "losses": 1}
    assert r["same_position_both_orders"] == pytest.approx(1 / 4)  # prompt 2 says "B" in both orders
    d = paired_difference([0.5, 0.7, np.nan], [0.4, 0.4, 0.1], n_boot=50)
    assert d["estimate"] == pytest.approx((0.1 + 0.3) / 2)


def test_pair_agreement_pools_pairs_and_resamples_prompts():
    p = [0.9, 0.4, 0.5, np.nan, 0.8]
    g = ["a", "a", "b", "b", "c"]
    r = pair_agreement(p, g, n_boot=200)
    assert r["estimate"] == pytest.approx((1 + 0 + 0.5 + 1) / 4)
    assert r["n_pairs"] == 4 and r["n_prompts"] == 3
