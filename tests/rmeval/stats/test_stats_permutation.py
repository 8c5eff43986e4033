"""The exact permutation test between arms, against hand values and scipy's exhaustive test."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rmeval.stats.permutation import exact_permutation_test


def test_five_against_five_without_overlap_is_one_in_252():
    a, b = [0.61, 0.62, 0.64, 0.65, 0.70], [0.50, 0.52, 0.55, 0.56, 0.60]
    res = exact_permutation_test(a, b, "greater")
    # C(10, 5) = 252 splits; only the observed one puts the five largest values in group a
    assert res["n_splits"] == 252
    assert res["p_value"] == pytest.approx(1 / 252)
    assert exact_permutation_test(a, b, "less")["p_value"] == pytest.approx(1.0)
    assert exact_permutation_test(b, a, "less")["p_value"] == pytest.approx(1 / 252)


def test_ties_by_hand():
    # pooled [1, 2, 2, 3], group sizes 2 and 2: the six first-group sums are 3, 3, 4, 4, 5, 5
    res = exact_permutation_test([1, 2], [2, 3], "less")
    assert res["p_value"] == pytest.approx(2 / 6)
    assert exact_permutation_test([1, 2], [2, 3], "greater")["p_value"] == pytest.approx(1.0)
    assert res["difference"] == pytest.approx(-1.0)


@pytest.mark.parametrize("sizes", [(5, 5), (4, 6), (3, 5)])
@pytest.mark.parametrize("alternative", ["greater", "less"])
def test_matches_scipy_exhaustive(sizes, alternative):
    rng = np.random.default_rng(sum(sizes))
    a = np.round(rng.normal(0.3, 1, sizes[0]), 1)  # rounded: ties included
    b = np.round(rng.normal(0, 1, sizes[1]), 1)
    ref = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                                 permutation_type="independent", n_resamples=np.inf, alternative=alternative,
                                 vectorized=True)
    assert exact_permutation_test(a, b, alternative)["p_value"] == pytest.approx(ref.pvalue, abs=1e-12)


def test_missing_values_are_left_out_and_bad_alternative_refused():
    assert exact_permutation_test([1, np.nan, 2], [0, 0.5])["n_a"] == 2
    with pytest.raises(ValueError, match="alternative"):
        exact_permutation_test([1], [2], "two-sided")
