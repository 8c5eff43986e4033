"""Cross-fitted probes against scikit-learn: the closed-form ridge search against GridSearchCV over a
StandardScaler + Ridge pipeline (same grouped folds), the cross-fitted R^2 against r2_score of a
hand-written GroupKFold loop, the R^2 bootstrap replicate against a weighted R^2 by hand, the
shared-distance kernel ridge search against GridSearchCV over a StandardScaler + KernelRidge pipeline,
and the fits spread over worker processes against the serial loop."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from rmeval.stats.bootstrap import resample_weights
from rmeval.stats.probes import (
    RIDGE_ALPHAS,
    KernelRidgeSearch,
    RidgeSearch,
    crossfit_predict,
    crossfit_predictions,
    in_sample_predict,
    learner,
    probe_r2,
)


def _data(n_groups=60, per=4, p=12, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_groups * per, p)) * rng.uniform(0.1, 10, size=p)  # scales differ: standardisation matters
    x[:, 5] = 3.0  # a constant column, as a text feature can be
    y = x[:, 0] / 3 - x[:, 1] / 5 + np.repeat(rng.normal(size=n_groups), per) + rng.normal(size=len(x))
    return x, y, np.repeat(np.arange(n_groups), per)


def _sklearn_search(x, y, g):
    return GridSearchCV(make_pipeline(StandardScaler(), Ridge()), {"ridge__alpha": list(RIDGE_ALPHAS)},
                        cv=GroupKFold(3), scoring="r2").fit(x, y, groups=g)


def test_ridge_search_is_gridsearchcv_over_scaled_ridge():
    x, y, g = _data()
    ours = RidgeSearch().fit(x, y, g)
    ref = _sklearn_search(x, y, g)
    assert ours.alpha_ == ref.best_params_["ridge__alpha"]
    assert np.abs(ours.predict(x) - ref.predict(x)).max() < 1e-9


def test_crossfit_r2_matches_a_groupkfold_loop_with_the_same_folds():
    x, y, g = _data(seed=1)
    pred = crossfit_predict("ridge", x, y, g)
    ref = np.empty(len(y))
    for tr, te in GroupKFold(5).split(x, y, g):
        ref[te] = _sklearn_search(x[tr], y[tr], g[tr]).predict(x[te])
    assert np.abs(pred - ref).max() < 1e-9
    codes = g
    w = resample_weights(60, 4, np.random.default_rng(0))
    res = probe_r2(y, pred, codes, 60, w)
    assert res["estimate"] == pytest.approx(r2_score(y, ref), abs=1e-12)
    for b in range(4):  # a replicate: R^2 of the rows repeated as often as their prompt was drawn
        idx = np.repeat(np.arange(len(y)), w[b][codes].astype(int))
        assert _replicate(y, pred, codes, w[b]) == pytest.approx(r2_score(y[idx], pred[idx]), abs=1e-10)


def _replicate(y, pred, codes, wb):
    from rmeval.stats.bootstrap import bootstrap_stat
    from rmeval.stats.probes import r2_from_sums, r2_sums

    _, boot = bootstrap_stat(r2_sums(y, pred, codes, codes.max() + 1), r2_from_sums, wb[None, :])
    return boot[0]


def test_folds_keep_a_group_together():
    """Rows of one group are never both fitted and predicted: a feature that identifies the group
    predicts a group-level target perfectly in sample and not at all out of fold."""
    rng = np.random.default_rng(2)
    g = np.repeat(np.arange(40), 3)
    level = rng.normal(size=40)
    x = np.eye(40)[g]  # one-hot group identity
    y = level[g]
    assert r2_score(y, in_sample_predict("ridge", x, y, g)) > 0.95
    assert r2_score(y, crossfit_predict("ridge", x, y, g)) < 0.05


@pytest.mark.parametrize("name", ["kernel_ridge",
                                  pytest.param("mlp", marks=pytest.mark.heavy),
                                  pytest.param("boosted_trees", marks=pytest.mark.heavy)])
def test_other_learners_run_through_the_same_folds(name):
    """Each learner's hyperparameters are searched inside the folds (the other learners are
    scikit-learn's own estimators, so the fold loop is what is checked); x[:, 0] and x[:, 1] carry
    signal out of fold (planted R^2 about 0.9)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(80, 4))
    y = x[:, 0] - x[:, 1] + 0.5 * rng.normal(size=80)
    g = np.repeat(np.arange(20), 4)
    pred = crossfit_predict(name, x, y, g)
    assert pred.shape == y.shape and np.isfinite(pred).all()
    assert r2_score(y, pred) > 0.3


def test_kernel_ridge_search_is_gridsearchcv_over_scaled_kernel_ridge():
    """The shared-distance search against scikit-learn's own pipeline and grid search: the same
    grid point and the same predictions, in and out of fold."""
    x, y, g = _data(n_groups=30, seed=4)
    y = y + np.sin(x[:, 2])  # a non-linear part, so the width matters
    est, grid = learner("kernel_ridge", x.shape[1])
    ref = GridSearchCV(est, grid, cv=GroupKFold(3), scoring="r2").fit(x, y, groups=g)
    ours = KernelRidgeSearch(grid).fit(x, y, g)
    assert ours.best_params_ == {k.split("__")[1]: v for k, v in ref.best_params_.items()}
    x_new = x[:7] + 0.1
    assert np.abs(ours.predict(x_new) - ref.predict(x_new)).max() < 1e-12
    pred = crossfit_predict("kernel_ridge", x, y, g)
    loop = np.empty(len(y))
    for tr, te in GroupKFold(5).split(x, y, g):
        loop[te] = GridSearchCV(est, grid, cv=GroupKFold(3), scoring="r2").fit(x[tr], y[tr],
                                                                               groups=g[tr]).predict(x[te])
    assert np.abs(pred - loop).max() < 1e-12


@pytest.mark.heavy  # starting the worker processes: seconds on a busy 2-core machine
def test_worker_processes_give_the_serial_predictions():
    """(learner, fold) fits spread over worker processes: the same predictions as one loop."""
    x, y, g = _data(n_groups=12, p=6, seed=5)
    names = ["ridge", "boosted_trees"]
    serial = crossfit_predictions(names, x, y, g, jobs=1)
    spread = crossfit_predictions(names, x, y, g, jobs=2)
    for name in names:
        assert np.array_equal(serial[name], spread[name])
    assert np.array_equal(serial["ridge"], crossfit_predict("ridge", x, y, g))


def _nystroem_pipeline(alpha, gamma, m, seed):
    from sklearn.kernel_approximation import Nystroem

    return make_pipeline(StandardScaler(), Nystroem(kernel="rbf", gamma=gamma, n_components=m, random_state=seed),
                         Ridge(alpha=alpha))


def test_kernel_ridge_above_the_threshold_is_scaled_nystroem_ridge(monkeypatch):
    """Above NYSTROEM_ABOVE rows (lowered here) the kernel ridge is scikit-learn's StandardScaler +
    Nystroem + Ridge pipeline: the grid search's choice and predictions against GridSearchCV over
    it, the refit against the pipeline built with the chosen parameters, the cross-fitted
    predictions against a GroupKFold loop of it, and the rule recorded; below the threshold the
    exact kernel ridge, unchanged."""
    from rmeval.stats import probes

    x, y, g = _data(n_groups=50, seed=6)
    y = y + np.sin(x[:, 2])
    exact = crossfit_predict("kernel_ridge", x, y, g)
    assert probes.kernel_approximation(g) is None
    m, seed = 40, 3
    monkeypatch.setattr(probes, "NYSTROEM_ABOVE", 100)
    monkeypatch.setattr(probes, "NYSTROEM_COMPONENTS", m)
    _, grid = learner("kernel_ridge", x.shape[1])
    ny_grid = {"nystroem__gamma": grid["kernelridge__gamma"], "ridge__alpha": grid["kernelridge__alpha"]}
    ours = probes.NystroemRidgeSearch(grid, 3, m, seed).fit(x, y, g)
    ref = GridSearchCV(_nystroem_pipeline(1.0, 1.0, m, seed), ny_grid, cv=GroupKFold(3), scoring="r2").fit(
        x, y, groups=g)
    assert ours.best_params_ == {"alpha": ref.best_params_["ridge__alpha"],
                                 "gamma": ref.best_params_["nystroem__gamma"]}
    x_new = x[:9] + 0.1
    assert np.abs(ours.predict(x_new) - ref.predict(x_new)).max() < 1e-10
    fixed = _nystroem_pipeline(ours.best_params_["alpha"], ours.best_params_["gamma"], m, seed).fit(x, y)
    assert np.abs(ours.predict(x_new) - fixed.predict(x_new)).max() < 1e-10
    pred = crossfit_predict("kernel_ridge", x, y, g, seed=seed)
    loop = np.empty(len(y))
    for tr, te in GroupKFold(5).split(x, y, g):
        loop[te] = GridSearchCV(_nystroem_pipeline(1.0, 1.0, m, seed), ny_grid, cv=GroupKFold(3),
                                scoring="r2").fit(x[tr], y[tr], groups=g[tr]).predict(x[te])
    assert np.abs(pred - loop).max() < 1e-10
    assert not np.allclose(pred, exact)  # the approximation, not the exact kernel
    rec = probes.kernel_approximation(g)
    assert rec["n_components"] == m and rec["above_training_rows"] == 100 and rec["folds_approximated"] == 5
    monkeypatch.setattr(probes, "NYSTROEM_ABOVE", len(x))  # every fold below it again: the exact path, bit for bit
    assert np.array_equal(crossfit_predict("kernel_ridge", x, y, g), exact)
