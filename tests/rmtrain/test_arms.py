"""Target construction and losses of the six arms, against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rmcore.errors import ConfigError
from rmtrain.arms import ARMS, PairTable, make_arm
from rmtrain.arms.pointwise import prompt_derangement


def table() -> PairTable:
    # prompt a: ratings 4, 2, 1 (mean 7/3); prompt b: 3, 3 -> pair by label; prompt c: 0, 2 (mean 1)
    return PairTable(
        prompt_id=np.array(["a", "a", "b", "c"], dtype=object),
        chosen_id=np.array(["a1", "a2", "b1", "c2"], dtype=object),
        rejected_id=np.array(["a3", "a3", "b2", "c1"], dtype=object),
        y_chosen=np.array([4.0, 2.0, 3.0, 2.0]),
        y_rejected=np.array([1.0, 1.0, 3.0, 0.0]),
        prompt_mean=np.array([7 / 3, 7 / 3, 3.0, 1.0]),
    )


def test_six_arms_registered():
    assert sorted(ARMS) == sorted(["regression", "bradley_terry", "bt_margin", "gap_only", "shuffled_mean",
                                   "binarized"])


def test_unknown_arm_names_the_known_ones():
    with pytest.raises(ConfigError, match="known arms: binarized, bradley_terry"):
        make_arm("pointwise_bt")


def test_regression_and_binarized_targets():
    t = make_arm("regression").targets(table(), seed=0)
    assert t["t_chosen"].tolist() == [4, 2, 3, 2] and t["t_rejected"].tolist() == [1, 1, 3, 0]
    b = make_arm("binarized").targets(table(), seed=0)
    assert b["t_chosen"].tolist() == [1, 1, 1, 1] and b["t_rejected"].tolist() == [0, 0, 0, 0]
    g = make_arm("gap_only").targets(table(), seed=0)
    assert g["gap"].tolist() == [3, 1, 0, 2]


def test_shuffled_mean_keeps_deviations_and_permutes_means():
    tab = table()
    t = make_arm("shuffled_mean").targets(tab, seed=3)
    means = {"a": 7 / 3, "b": 3.0, "c": 1.0}
    donor = prompt_derangement(list(tab.prompt_id), 3)
    assert all(donor[p] != p for p in donor)  # every prompt gets another prompt's mean
    assert sorted(donor.values()) == sorted(means)  # a permutation
    for i, p in enumerate(tab.prompt_id):
        # within-prompt deviation kept exactly; level replaced by the donor's mean
        assert t["t_chosen"][i] - means[donor[p]] == pytest.approx(tab.y_chosen[i] - means[p], abs=1e-12)
        assert t["t_rejected"][i] - means[donor[p]] == pytest.approx(tab.y_rejected[i] - means[p], abs=1e-12)
    new_means = {p: means[p] + (means[donor[p]] - means[p]) for p in means}
    assert sorted(new_means.values()) == pytest.approx(sorted(means.values()))


def test_derangement_deterministic_and_order_free():
    ids = [f"p{i}" for i in range(50)]
    assert prompt_derangement(ids, 7) == prompt_derangement(list(reversed(ids)), 7)
    assert prompt_derangement(ids, 7) != prompt_derangement(ids, 8)


R_C = torch.tensor([2.0, 0.0])
R_R = torch.tensor([1.0, 1.0])


def _sp(x: float) -> float:  # -log sigmoid(x)
    return math.log1p(math.exp(-x))


def test_losses_by_hand():
    bt = make_arm("bradley_terry").loss(R_C, R_R, {})
    assert bt.item() == pytest.approx((_sp(1) + _sp(-1)) / 2, rel=1e-6)
    gap = torch.tensor([1.0, 2.0])
    btm = make_arm("bt_margin").loss(R_C, R_R, {"gap": gap})
    assert btm.item() == pytest.approx((_sp(0) + _sp(-3)) / 2, rel=1e-6)
    go = make_arm("gap_only").loss(R_C, R_R, {"gap": gap})
    assert go.item() == pytest.approx((0**2 + 3**2) / 2, rel=1e-6)
    t = {"t_chosen": torch.tensor([3.0, 1.0]), "t_rejected": torch.tensor([0.0, 1.0])}
    reg = make_arm("regression").loss(R_C, R_R, t)
    assert reg.item() == pytest.approx(0.5 * ((1 + 1) / 2 + (1 + 0) / 2), rel=1e-6)


@pytest.mark.parametrize("name", sorted(ARMS))
def test_shift_invariance_pairwise_only(name):
    """Adding a constant to every score of one prompt leaves pairwise losses unchanged and
    changes pointwise ones."""
    tab = table()
    arm = make_arm(name)
    tg = {k: torch.tensor(v, dtype=torch.float64) for k, v in arm.targets(tab, seed=1).items()}
    rng = np.random.default_rng(0)
    rc = torch.tensor(rng.normal(size=4))
    rr = torch.tensor(rng.normal(size=4))
    shift = torch.tensor([5.0, 5.0, 0.0, 0.0])  # prompt a only
    before = arm.loss(rc, rr, tg).item()
    after = arm.loss(rc + shift, rr + shift, tg).item()
    if arm.pointwise:
        assert abs(after - before) > 1e-3
    else:
        assert after == pytest.approx(before, abs=1e-12)


def test_rating_arms_refuse_unrated_pairs():
    tab = table()
    tab.y_chosen[0] = np.nan
    with pytest.raises(ConfigError, match="needs ratings"):
        make_arm("regression").check(tab)
    make_arm("bradley_terry").check(tab)  # labels alone are enough


# -- bt_margin: margin_orientation ---------------------------------------------------------------------------

def _pairs() -> PairTable:
    # gaps by rating: +2 (label agrees), -1 (label disagrees), 0 (ratings tie)
    return PairTable(prompt_id=np.array(["a", "b", "c"], dtype=object),
                     chosen_id=np.array(["1", "3", "5"], dtype=object),
                     rejected_id=np.array(["2", "4", "6"], dtype=object), y_chosen=np.array([4.0, 1.0, 3.0]),
                     y_rejected=np.array([2.0, 2.0, 3.0]), prompt_mean=np.array([3.0, 1.5, 3.0]))


@pytest.mark.parametrize("orientation, gaps, signs", [("label", [2, -1, 0], [1, 1, 1]),
                                                      ("rating", [2, 1, 0], [1, -1, 1])])
def test_bt_margin_orientation_by_hand(orientation, gaps, signs):
    arm = make_arm("bt_margin", {"margin_orientation": orientation})
    t = arm.targets(_pairs(), seed=0)
    np.testing.assert_array_equal(t["gap"], gaps)
    np.testing.assert_array_equal(t["orientation"], signs)
    rc, rr = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    loss = arm.loss(rc, rr, {k: torch.tensor(v, dtype=torch.float64) for k, v in t.items()})
    # label: -log s(1 - 2), -log s(0 + 1), -log s(0.5); rating: the second pair flipped, asks |gap| = 1
    second = _sp(1.0) if orientation == "label" else _sp(-1.0)
    assert float(loss) == pytest.approx((_sp(-1.0) + second + _sp(0.5)) / 3, abs=1e-12)


def test_bt_margin_default_is_label_and_bad_value_is_an_error():
    assert make_arm("bt_margin").config.margin_orientation == "label"
    with pytest.raises(ConfigError, match="margin_orientation must be 'label' or 'rating'"):
        make_arm("bt_margin", {"margin_orientation": "ratings"})
