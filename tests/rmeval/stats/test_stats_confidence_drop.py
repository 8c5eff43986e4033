"""Suitability inference against independent references (scipy) and planted data."""

import numpy as np
import pytest
from scipy import stats

from rmeval.stats.confidence_drop import (
    mark_unsuitable,
    paired_effect,
    sign_flip_pvalues,
    stars,
    suitability_inference,
)


def _pairs(rng, n, shift):
    m = rng.beta(5, 2, size=n)
    m2 = np.clip(m - shift + rng.normal(0, 0.1, size=n), 0, 1)
    return m, m2


def test_d_and_t_match_scipy_ttest_rel():
    rng = np.random.default_rng(0)
    m, m2 = _pairs(rng, 57, 0.03)
    eff = paired_effect(m - m2)
    ref = stats.ttest_rel(m, m2)
    assert eff["t"] == pytest.approx(ref.statistic, rel=1e-12)
    diff = m - m2
    assert eff["cohens_d"] == pytest.approx(diff.mean() / diff.std(ddof=1), rel=1e-12)
    assert eff["cohens_d"] == pytest.approx(ref.statistic / np.sqrt(57), rel=1e-12)


@pytest.mark.parametrize("shift", [0.0, 0.01, 0.03])
def test_p_matches_scipy_permutation_test_within_mc_error(shift):
    rng = np.random.default_rng(1)
    m, m2 = _pairs(rng, 40, shift)
    B = 20_000
    _, p = sign_flip_pvalues(m - m2, n_permutations=B, seed=3)

    def tstat(x, y, axis):
        return stats.ttest_rel(x, y, axis=axis).statistic

    ref = stats.permutation_test((m, m2), tstat, permutation_type="samples", alternative="greater",
                                 n_resamples=B, vectorized=True, rng=np.random.default_rng(4)).pvalue
    se = np.sqrt(ref * (1 - ref) / B) + 1 / B
    assert abs(p[0] - ref) <= 4 * np.sqrt(2) * se


def test_p_is_count_based_and_columns_independent():
    rng = np.random.default_rng(2)
    a, b = rng.normal(0.05, 0.1, 30), rng.normal(0.0, 0.1, 20)
    mat = np.zeros((30, 2))
    mat[:, 0], mat[:20, 1] = a, b
    _, p = sign_flip_pvalues(mat, np.array([30, 20]), n_permutations=999, seed=5)
    b_counts = p * 1000 - 1
    assert np.allclose(b_counts, np.round(b_counts)) and p.min() >= 1 / 1000
    # a column's p does not depend on the other columns: same signs per item row
    _, p_alone = sign_flip_pvalues(mat[:, 1:], np.array([20]), n_permutations=999, seed=5)
    assert p_alone[0] == p[1]
    # zero padding is exactly dropping those rows: same p as a hand-written loop over the same signs
    rng = np.random.default_rng(5)
    bits = np.unpackbits(rng.integers(0, 256, size=(999, 4), dtype=np.uint8), axis=1, count=30)
    signs = 2.0 * bits[:, :20] - 1
    t_obs = stats.ttest_1samp(b, 0).statistic
    t_perm = stats.ttest_1samp(signs * b, 0, axis=1).statistic
    assert p[1] == pytest.approx((np.sum(t_perm >= t_obs - 1e-9) + 1) / 1000)
    t, _ = sign_flip_pvalues(mat, np.array([30, 20]), n_permutations=10, seed=5)
    assert t[1] == pytest.approx(stats.ttest_1samp(b, 0).statistic, rel=1e-12)


def test_type_one_error_at_most_alpha_on_null_data():
    rng = np.random.default_rng(10)
    n_sims, n = 400, 30
    # symmetric null differences of varied shapes; all simulations in one call (columns)
    deltas = np.concatenate([rng.normal(0, 0.1, (n, n_sims // 2)),
                             rng.laplace(0, 0.05, (n, n_sims // 2))], axis=1)
    _, p = sign_flip_pvalues(deltas, n_permutations=999, seed=11)
    alpha = 0.05
    rate = (p <= alpha).mean()
    # binomial upper bound: the true rate is <= alpha, so the observed one stays below alpha + 2.5 SE
    assert rate <= alpha + 2.5 * np.sqrt(alpha * (1 - alpha) / n_sims)


def test_planted_degradation_detected_null_not():
    groups = {"EF": "controlled", "PH": "controlled", "ST": "stylized", "SP": "stylized"}
    null_rejections = 0
    for rep in range(20):
        rng = np.random.default_rng(100 + rep)
        n = 200
        base = rng.beta(4, 2, n)
        deltas = {"EF": rng.normal(0, 0.05, n), "PH": rng.normal(0, 0.05, n),
                  "ST": base - np.clip(base - 0.04 + rng.normal(0, 0.05, n), 0, 1), "SP": rng.normal(0, 0.05, n)}
        res = suitability_inference(deltas, groups, n_permutations=2000, seed=rep)["perturbations"]
        assert res["ST"]["rejected"] and res["ST"]["p_value"] < 0.001 and res["ST"]["stars"] == "***"
        null_rejections += sum(res[c]["rejected"] for c in ("EF", "PH", "SP"))
        if rep == 0:
            mark_unsuitable(res, 0.2)
            assert res["ST"]["unsuitable"] and not res["EF"]["unsuitable"]
            mark_unsuitable(res, 10.0)
            assert not res["ST"]["unsuitable"]
    # 60 null hypotheses: FDR control at 0.05 keeps false rejections rare
    assert null_rejections <= 6


def test_stars():
    assert [stars(x) for x in (0.0005, 0.005, 0.03, 0.05, 0.2)] == ["***", "**", "*", "", ""]
