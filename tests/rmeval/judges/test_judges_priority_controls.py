"""JudgeProfile's prioritisation controls: the identical-preference null is calibrated (planted
identical priorities sit inside it, planted different ones far outside), its observed dispersion is
the SD of scikit-learn fits, and the component swaps equal scikit-learn predictions by hand."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from rmcore.errors import ConfigError
from rmeval.judges.analysis import analyze
from rmeval.judges.inventory import OVERALL
from rmeval.judges.simulate import simulate_panel

from .judges_reference import Reads

N_ATTR = 10


def _panel(identical: bool, seed: int, n_items: int = 400):
    rng = np.random.default_rng(seed)
    base = rng.normal(0, 1.5, N_ATTR)
    w = {f"j{j}": base if identical else rng.normal(0, 1.5, N_ATTR) for j in range(4)}
    _, judg, _ = simulate_panel(n_items, w, detect=0.8, flip=0.05, verdict_noise=0.5, seed=seed)
    return judg


def _sklearn_fit(ref: Reads, judge: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(X, y, fitted coefficients with intercept last, items) of a judge's own-perception fit."""
    items = [i for i in ref.items if ref.get("stable", judge, i, OVERALL)]
    x = np.array([[ref.get("stable", judge, i, a) or 0 for a in ref.attributes] for i in items], float)
    y = np.array([ref.get("stable", judge, i, OVERALL) for i in items])
    m = LogisticRegression(C=1.0, max_iter=10_000, tol=1e-10).fit(x, y)
    return x, y, np.append(m.coef_[0], m.intercept_[0]), items


def test_identical_priorities_sit_inside_the_null_and_different_ones_do_not(seed=0):
    same = analyze(_panel(True, seed), n_splits=0, null_repeats=20, seed=seed)["identical_preference_null"]
    diff = analyze(_panel(False, seed), n_splits=0, null_repeats=20, seed=seed)["identical_preference_null"]
    # identical planted priorities: observed spread is estimation noise, so it looks like the null's
    assert 0.5 < same["median_ratio"] < 1.5 and same["n_attributes_exceeding"] <= 3
    assert same["correlation"]["pearson"]["ratio"] == pytest.approx(1.0, abs=0.1)
    assert sum(r["p_value"] <= 0.05 for r in same["judges"].values()) <= 1
    # different planted priorities: far beyond it, every judge at the smallest Monte Carlo p (1/21)
    assert diff["median_ratio"] > 2 and diff["n_attributes_exceeding"] >= 8
    assert diff["correlation"]["pearson"]["ratio"] < 0.5
    assert all(r["p_value"] == pytest.approx(1 / 21) and r["ratio"] > 2 for r in diff["judges"].values())
    assert diff["repeats"] == 20 and diff["n_judges"] == 4 and diff["n_failed_fits"] == 0


def test_observed_dispersion_is_the_sd_of_sklearn_fits():
    judg = _panel(False, 2, n_items=300)
    res = analyze(judg, n_splits=0, null_repeats=3)
    null, ref = res["identical_preference_null"], Reads(judg)
    w = np.stack([_sklearn_fit(ref, j)[2][:-1] for j in ref.judges])
    norm = w / np.abs(w).mean(axis=1, keepdims=True)
    sd = norm.std(axis=0, ddof=1)
    for n, a in enumerate(ref.attributes):
        assert null["attributes"][a]["observed_sd"] == pytest.approx(sd[n], rel=1e-3, abs=1e-4)
    disp = np.sqrt(((norm - norm.mean(axis=0)) ** 2).mean(axis=1))
    for n, j in enumerate(ref.judges):
        assert null["judges"][j]["dispersion"] == pytest.approx(disp[n], rel=1e-3)
    pears = [np.corrcoef(w[a], w[b])[0, 1] for a in range(4) for b in range(a + 1, 4)]
    assert null["correlation"]["pearson"]["observed"] == pytest.approx(np.mean(pears), rel=1e-3)


def test_component_swaps_by_hand():
    judg = _panel(False, 3, n_items=300)
    judg = judg[~((judg["judge"] == "j1") & (judg["order"] == "BA") & (judg.index % 3 == 0))]  # j1 less stable
    res = analyze(judg, n_splits=0, null_repeats=0)
    sw, ref = res["component_swaps"], Reads(judg)
    rates = {j: res["judges"][j]["stable_rate"] for j in ref.judges}
    assert sw["donor"] == max(rates, key=rates.get)
    donor = sw["donor"]
    _, _, wd, _ = _sklearn_fit(ref, donor)
    for t in ref.judges:
        if t == donor:
            continue
        x, y, wt, items = _sklearn_fit(ref, t)
        xd = np.array([[ref.get("stable", donor, i, a) or 0 for a in ref.attributes] for i in items], float)

        def acc(xm, coef, b, y=y):
            return np.mean(np.where(xm @ coef + b > 0, 1, -1) == y)

        got = sw["targets"][t]
        assert got["n_items"] == len(items)
        assert got["own"] == pytest.approx(acc(x, wt[:-1], wt[-1]), abs=2 / len(y))
        assert got["perception_swap"] == pytest.approx(acc(xd, wt[:-1], wt[-1]), abs=2 / len(y))
        assert got["weight_swap"] == pytest.approx(acc(x, wd[:-1], wt[-1]), abs=2 / len(y))
    assert sw["perception_swap_drop"] == pytest.approx(sw["own"] - sw["perception_swap"])
    # planted different priorities, shared perception: swapping the weights hurts far more
    assert sw["weight_swap_drop"] > sw["perception_swap_drop"] + 0.1
    # a named donor is used; an unknown one is a one-line configuration error
    assert analyze(judg, n_splits=0, null_repeats=0, donor="j0")["component_swaps"]["donor"] == "j0"
    with pytest.raises(ConfigError, match="--donor 'nobody' is not a judge"):
        analyze(judg, n_splits=0, null_repeats=0, donor="nobody")
