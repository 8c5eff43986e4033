"""Appendix B.1: normality of ΔM, the median and trimmed-mean sign-flip tests, the t-test and the
Wilcoxon signed-rank test, each against an exact enumeration or scipy's own decomposition."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rmeval.stats.confidence_drop import sign_bits, sign_flip_pvalues
from rmeval.stats.confidence_drop_robustness import method_agreement, normality, robustness


def exact_sign_flip_p(x: np.ndarray, statistic) -> float:
    """P(stat(s ⊙ x) >= stat(x)) over all 2^n sign vectors."""
    obs = statistic(x)
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=x.size)))
    return float(np.mean(np.apply_along_axis(statistic, 1, signs * x) >= obs - 1e-12))


@pytest.mark.parametrize("seed", [0, 1])
def test_median_and_trimmed_mean_match_exact_enumeration(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.3, 1.0, 11)
    B = 20_000
    res = robustness({"ST": x}, n_permutations=B, seed=seed)["ST"]
    for key, fn in (("p_permutation_median", np.median), ("p_permutation_trimmed_mean",
                                                          lambda v: stats.trim_mean(v, 0.2))):
        exact = exact_sign_flip_p(x, fn)
        assert abs(res[key] - exact) < 4 * math.sqrt(exact * (1 - exact) / B) + 2 / B, key
    assert res["median_delta"] == pytest.approx(np.median(x))
    assert res["trimmed_mean_delta"] == pytest.approx(np.sort(x)[2:9].mean())  # floor(0.2 * 11) = 2 cut each end


def test_mean_gives_exactly_the_t_p_under_the_same_signs():
    rng = np.random.default_rng(2)
    x = rng.normal(0.1, 1.0, 30)
    _, p_t = sign_flip_pvalues(x, n_permutations=999, seed=7)
    b = 0
    for bits in sign_bits(30, 999, 7):
        b += int(((2.0 * bits - 1) @ x >= x.sum() - 1e-9).sum())
    assert p_t[0] == (b + 1) / 1000


def test_wilcoxon_and_t_test_by_hand():
    rng = np.random.default_rng(3)
    x = rng.normal(0.4, 1.0, 10)
    x = np.r_[x, 0.0, 0.0]  # unchanged twins: dropped by the signed-rank test
    res = robustness({"LE": x}, n_permutations=100, seed=0)["LE"]
    nz = x[x != 0]
    ranks = stats.rankdata(np.abs(nz))
    w_obs = ranks[nz > 0].sum()
    sums = [ranks[np.array(s, dtype=bool)].sum() for s in itertools.product((0, 1), repeat=nz.size)]
    assert res["wilcoxon_w"] == pytest.approx(w_obs)
    assert res["p_wilcoxon"] == pytest.approx(np.mean(np.array(sums) >= w_obs - 1e-12))
    t = x.mean() / (x.std(ddof=1) / math.sqrt(x.size))
    assert res["p_ttest"] == pytest.approx(stats.t.sf(t, x.size - 1))


def test_normality_tests():
    rng = np.random.default_rng(4)
    normal, skewed = rng.normal(0, 1, 300), rng.exponential(1.0, 300)
    n, s = normality(normal), normality(skewed)
    assert n["shapiro_p"] > 0.01 and n["dagostino_p"] > 0.01
    assert s["shapiro_p"] < 1e-6 and s["dagostino_p"] < 1e-6
    # K² is the sum of the squared skewness and kurtosis z-scores, on chi-square with 2 df
    k2 = stats.skewtest(skewed).statistic ** 2 + stats.kurtosistest(skewed).statistic ** 2
    assert s["dagostino_k2"] == pytest.approx(k2) and s["dagostino_p"] == pytest.approx(stats.chi2.sf(k2, 2))
    assert math.isnan(normality(normal[:15])["dagostino_p"]) and not math.isnan(normality(normal[:15])["shapiro_p"])
    assert math.isnan(normality(np.zeros(30))["shapiro_p"])  # no variation: no test


def test_items_without_a_twin_and_unchanged_twins():
    x = np.array([0.5, np.nan, 0.2, 0.7, -0.1, 0.4, np.nan, 0.3])
    changed = np.array([True, False, False, True, True, True, False, True])
    res = robustness({"SP": x}, {"SP": changed}, n_permutations=500, seed=1)["SP"]
    used = np.array([0.5, 0.0, 0.7, -0.1, 0.4, 0.3])  # NaN: no twin, left out; unchanged: 0
    assert res["median_delta"] == pytest.approx(np.median(used))
    assert res["p_ttest"] == pytest.approx(stats.ttest_1samp(used, 0, alternative="greater").pvalue)


def test_method_agreement_is_spearman_over_cells():
    rng = np.random.default_rng(5)
    cells = [{"p_permutation_t": a, "p_wilcoxon": a + rng.normal(0, 0.05), "p_ttest": rng.random()}
             for a in rng.random(12)]
    res = method_agreement(cells, ("p_permutation_t", "p_wilcoxon", "p_ttest"))
    frame = pd.DataFrame(cells)
    for pair, rec in res["pairs"].items():
        a, b = pair.split(" vs ")
        assert rec["spearman"] == pytest.approx(frame[a].corr(frame[b], method="spearman")) and rec["n"] == 12
    assert math.isnan(method_agreement(cells[:2], ("p_permutation_t", "p_wilcoxon"))["pairs"][
        "p_permutation_t vs p_wilcoxon"]["spearman"])
