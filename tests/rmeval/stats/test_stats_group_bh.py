"""Group-aware Benjamini–Hochberg in Reward Auditor's form: each mode against an independent
reference (scipy's BH for the equal mode, a brute-force transcription of the rule for the others)
and against rejections derived by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rmeval.stats.confidence_drop import group_bh, storey_null_share, weighted_step_up


def rule_by_hand(p: list[float], qg: list[float], q: float) -> list[bool]:
    """Reject p_i <= q k / (L q_g(i)) with k the largest k such that #{i : p_i <= q k / (L q_g(i))} >= k."""
    L = len(p)
    k_hat = 0
    for k in range(L, 0, -1):
        if sum(1 for pi, g in zip(p, qg) if pi <= q * k / (L * g)) >= k:
            k_hat = k
            break
    return [k_hat > 0 and pi <= q * k_hat / (L * g) for pi, g in zip(p, qg)]


def storey_by_hand(p: list[float], eta: float) -> float:
    return min(1.0, (1 + sum(1 for x in p if x > eta)) / (len(p) * (1 - eta)))


def planted(rng: np.random.Generator, sizes: tuple[int, ...]) -> tuple[np.ndarray, list[str]]:
    """p-values of groups of the given sizes: some small (signals), the rest uniform; sometimes tied."""
    p, groups = [], []
    for g, n in enumerate(sizes):
        x = np.where(rng.random(n) < rng.random(), rng.random(n) * 0.02, rng.random(n))
        if rng.random() < 0.3:
            x[: max(1, n // 2)] = x[0]  # ties within a group
        p += list(x)
        groups += [f"g{g}"] * n
    p = np.array(p)
    if rng.random() < 0.2 and len(p) > 2:
        p[-1] = p[0]  # a tie across groups
    return p, groups


def test_equal_mode_is_scipy_bh():
    rng = np.random.default_rng(0)
    for _ in range(400):
        sizes = tuple(int(x) for x in rng.integers(1, 8, size=int(rng.integers(1, 4))))
        p, groups = planted(rng, sizes)
        q = float(rng.choice([0.01, 0.05, 0.1, 0.2]))
        res = group_bh(p, groups, q=q, weighting="equal")
        assert np.array_equal(res["rejected"], stats.false_discovery_control(p, method="bh") <= q)
        assert set(res["null_share"].values()) == {1.0}


@pytest.mark.parametrize("eta", [0.5, 0.3])
def test_storey_mode_is_the_rule_with_estimated_shares(eta):
    rng = np.random.default_rng(1)
    for _ in range(400):
        sizes = tuple(int(x) for x in rng.integers(1, 9, size=int(rng.integers(1, 4))))  # unequal groups
        p, groups = planted(rng, sizes)
        q = float(rng.choice([0.05, 0.1]))
        shares = {g: storey_by_hand([x for x, h in zip(p, groups) if h == g], eta) for g in dict.fromkeys(groups)}
        res = group_bh(p, groups, q=q, eta=eta)
        assert res["null_share"] == pytest.approx(shares)
        assert res["rejected"].tolist() == rule_by_hand(list(p), [shares[g] for g in groups], q)


def test_fixed_mode_is_the_rule_with_given_shares():
    rng = np.random.default_rng(2)
    for _ in range(300):
        p, groups = planted(rng, (5, 3))
        fixed = {"g0": float(rng.choice([0.2, 0.5, 0.8, 1.0]))}  # g1 not named: 1, as the released code
        res = group_bh(p, groups, weighting="fixed", fixed=fixed)
        assert res["null_share"] == {"g0": fixed["g0"], "g1": 1.0}
        assert res["rejected"].tolist() == rule_by_hand(list(p), [fixed.get(g, 1.0) for g in groups], 0.05)
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        group_bh(np.array([0.01, 0.2]), ["a", "b"], weighting="fixed", fixed={"a": 0.0})


def test_hand_derived_rejections():
    # the review's example: BH rejects 7; the old weighted version rejected 4
    p = np.array([1e-8, 1e-8, 1e-8, 0.7, 0.9] + [1e-8] * 4 + [0.6])
    g = ["controlled"] * 5 + ["stylized"] * 5
    res = group_bh(p, g)
    # controlled: 2 p-values above 0.5 -> (1 + 2) / 2.5 -> 1; stylized: 1 above -> 2 / 2.5 = 0.8
    assert res["null_share"] == {"controlled": 1.0, "stylized": pytest.approx(0.8)}
    assert res["rejected"].tolist() == [True] * 3 + [False] * 2 + [True] * 4 + [False] and res["k"] == 7
    assert (stats.false_discovery_control(p) <= 0.05).sum() == 7
    # a group whose estimate is 1 beside one whose estimate is 0.8 (L = 10, q = 0.05):
    # thresholds 0.00625 k for a, 0.005 k for b; k = 2: a's 0.001 and 0.009 pass (2 >= 2), k = 3 fails
    p = np.array([0.001, 0.009, 0.2, 0.4, 0.9, 0.03, 0.6, 0.7, 0.8, 0.95])
    g = ["a"] * 5 + ["b"] * 5
    res = group_bh(p, g)
    assert res["null_share"] == {"a": pytest.approx(0.8), "b": 1.0}
    assert res["k"] == 2 and res["rejected"].tolist() == [True, True] + [False] * 8
    assert res["threshold"][:5] == pytest.approx([0.05 * 2 / (10 * 0.8)] * 5)


def test_small_groups_are_never_shut_out():
    # EF PH IU IW CN ST SP: the stylized group has 2 tests, so its null share is always 1 and a
    # planted ST at p = 0.0001 is rejected (plain BH thresholds); the old weights gave it weight 0
    p = np.array([0.3, 0.6, 0.8, 0.5, 0.9, 0.0001, 0.4])
    g = ["controlled"] * 5 + ["stylized"] * 2
    for one_or_two in ([0.0001], [0.0001, 0.0002]):
        assert storey_null_share(np.array(one_or_two), 0.5) == 1.0
    res = group_bh(p, g)
    assert res["null_share"]["stylized"] == 1.0 and res["rejected"].tolist() == [False] * 5 + [True, False]


def test_ties_share_one_decision():
    # a: 4 tests, none above 0.5 -> share 0.5; b: 3 tests, 2 above -> 1. L = 7.
    # k = 4: thresholds 0.0571 (a) and 0.0286 (b): the four 0.01s pass (4 >= 4); k = 5..7 fail
    p = np.array([0.01, 0.01, 0.01, 0.5, 0.01, 0.9, 0.9])
    g = ["a"] * 4 + ["b"] * 3
    res = group_bh(p, g)
    assert res["null_share"] == {"a": 0.5, "b": 1.0} and res["k"] == 4
    assert res["rejected"].tolist() == [True, True, True, False, True, False, False]
    # tied p-values at BH's boundary all go together
    p = np.array([0.02, 0.02, 0.02, 0.02, 0.9])
    assert group_bh(p, ["a"] * 5, weighting="equal")["rejected"].tolist() == [True] * 4 + [False]


def test_batched_rule_equals_one_call_per_row():
    rng = np.random.default_rng(3)
    p = rng.random((50, 6)) ** 3
    qg = rng.choice([0.4, 0.8, 1.0], size=(50, 6))
    rej, k = weighted_step_up(p, qg, 0.1)
    for i in range(50):
        assert rej[i].tolist() == rule_by_hand(list(p[i]), list(qg[i]), 0.1)
    assert weighted_step_up(np.zeros((3, 0)), np.ones((3, 0)))[1].tolist() == [0, 0, 0]
