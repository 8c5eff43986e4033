"""Cross-fitted probes: how much of a reward (or a rating) a set of features explains out of sample.

Folds. Five grouped folds (scikit-learn's ``GroupKFold``, deterministic): the groups are the
normalised first user turn of each prompt where prompts repeat one (HelpSteer2 repeats first turns
under different ids; ``rmeval.conditions.first_turn_key``), else the prompt, so no prompt -- and no
repeated first turn -- is both fitted and predicted. A learner's hyperparameters (the ridge
penalty, ...) are chosen INSIDE each training fold by an inner grouped cross-validation
(``GridSearchCV`` over ``GroupKFold(3)`` on the training fold's groups, scored by R^2), then the
learner is refitted on the whole training fold and predicts the held-out fold.

    R^2_cv = 1 - sum_i (y_i - yhat_i)^2 / sum_i (y_i - ybar)^2        (yhat out of fold; r2_score)

"In sample": the same learner, its hyperparameters chosen by the grouped CV on every row, fitted
and scored on the same rows (an upper reference, not an estimate of prediction).

Learners (scikit-learn, inputs standardised): ``ridge`` (penalty on a log grid; the same search
computed in closed form, ``RidgeSearch``), ``kernel_ridge`` (RBF kernel; penalty and width; the
same search with each fold's distances shared by the grid, ``KernelRidgeSearch``),
``boosted_trees`` (histogram gradient boosting; learning rate), ``mlp`` (one hidden layer of 64,
L-BFGS; L2 penalty). Intervals hold the out-of-fold predictions fixed and resample prompts
(conditional on the fitted probes, as the study's are).

Cost. The iterative learners dominate (the MLP and boosted trees: 50 and 35 fits per probe, each
up to seconds long; about 97% of the section on the demo's audit). Every fit runs on one BLAS and one
OpenMP thread (``one_thread``), which also makes the MLP's predictions independent of the machine's
thread count (L-BFGS amplifies the last-bit differences of a multi-threaded matrix product), and
the (learner, outer fold) fits are spread over worker processes (``crossfit_predictions``), with
the same predictions as one loop.

Kernel ridge at scale. The exact kernel ridge solves a dense n x n system, cubic in the training
rows with n^2 memory: one outer fold's search took 10 s of CPU at 4,064 rows and 50 s (2.6 GB) at
8,128, so about 7 minutes and 2 GB a kernel per fold at HelpSteer2's training split (16,256
rows). Where the rows a kernel ridge search is fitted on (an outer training fold, or every row)
number more than ``NYSTROEM_ABOVE`` (5,000), the kernel is replaced by its Nystroem
approximation of rank m = ``NYSTROEM_COMPONENTS`` (1,500), the field's standard one (Williams &
Seeger 2001; scikit-learn's ``Nystroem``): m landmark rows L drawn without replacement from the
standardised training rows (``random_state`` = the audit's seed), features

    phi(z) = k(z, L) K^-1/2,   K = k(L, L) (by its SVD, singular values floored at 1e-12),
    k(a, b) = exp(-gamma |a - b|^2)

and ridge in closed form on them (intercept unpenalised): the pipeline
``make_pipeline(StandardScaler(), Nystroem(kernel="rbf", gamma=gamma, n_components=m,
random_state=seed), Ridge(alpha))``, its penalty and width chosen by the same grouped inner CV
over the same grid (``NystroemRidgeSearch``). Linear in n plus a fixed m x m SVD per fit: 24 s of
CPU a fold at 8,128 rows, 36 s at 16,256 (19 s at 4,064 against the exact 10 s: the threshold is
about where the two costs cross). At or below the threshold nothing is subsampled or capped (the
exact kernel, bit for bit as before), and the other learners never are; audit.json's
``variance_explained.response_probes.kernel_ridge.approximation`` records the rule where it was
applied.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .bootstrap import bootstrap_stat, per_prompt_sums, summarize

N_FOLDS = 5
N_INNER = 3
RIDGE_ALPHAS = tuple(float(a) for a in np.logspace(-3, 5, 17))
LEARNERS = ("ridge", "kernel_ridge", "boosted_trees", "mlp")
ITERATIVE = ("boosted_trees", "mlp")  # seconds per fit at any size: worth a worker process
SLOWEST_FIRST = ("mlp", "boosted_trees", "kernel_ridge", "ridge")  # the order their fits are handed out
NYSTROEM_ABOVE = 5000  # kernel ridge fitted on more rows than this: the Nystroem approximation (module doc)
NYSTROEM_COMPONENTS = 1500  # its rank m: landmark rows


def learner(name: str, n_features: int, seed: int = 0) -> tuple[Any, dict[str, list[Any]]]:
    """(estimator, hyperparameter grid) of a named learner."""
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import Ridge
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if name == "ridge":
        return make_pipeline(StandardScaler(), Ridge()), {"ridge__alpha": list(RIDGE_ALPHAS)}
    if name == "kernel_ridge":
        base = 1.0 / max(n_features, 1)  # RBF width relative to the standardised dimension
        return (make_pipeline(StandardScaler(), KernelRidge(kernel="rbf")),
                {"kernelridge__alpha": [0.1, 1.0, 10.0], "kernelridge__gamma": [0.1 * base, base]})
    if name == "boosted_trees":
        return (HistGradientBoostingRegressor(max_iter=100, max_leaf_nodes=15, early_stopping=False,
                                              random_state=seed),
                {"learning_rate": [0.05, 0.15]})
    if name == "mlp":
        # L-BFGS: the data sets are small (hundreds to thousands of responses), where it is fast and deterministic
        return (make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(64,), solver="lbfgs", max_iter=300,
                                                             random_state=seed)),
                {"mlpregressor__alpha": [1e-2, 1.0, 10.0]})
    raise ValueError(f"unknown learner '{name}'; known: {', '.join(LEARNERS)}")


class RidgeSearch:
    """Standardised ridge with its penalty chosen by grouped CV: scikit-learn's
    ``GridSearchCV(make_pipeline(StandardScaler(), Ridge()), {"ridge__alpha": alphas},
    cv=GroupKFold(n_inner), scoring="r2")``, computed in closed form for every penalty at once
    (one SVD per fold: beta(a) = V diag(d / (d^2 + a)) U' y), which makes the many ridge fits of
    an audit cheap. Ties between penalties go to the first, as GridSearchCV's ranking does."""

    def __init__(self, alphas: tuple[float, ...] = RIDGE_ALPHAS, n_inner: int = N_INNER) -> None:
        self.alphas, self.n_inner = np.asarray(alphas, dtype=float), n_inner

    @staticmethod
    def _path(x: np.ndarray, y: np.ndarray, x_new: np.ndarray, alphas: np.ndarray) -> np.ndarray:
        """(n_new, n_alphas) predictions of standardised ridge fitted on (x, y) for each penalty."""
        mu, sd = x.mean(axis=0), x.std(axis=0)
        sd = np.where(sd > 10 * np.finfo(float).eps * np.maximum(np.abs(mu), 1.0), sd, 1.0)  # constant: unscaled
        z, z_new = (x - mu) / sd, (x_new - mu) / sd
        zc = z - z.mean(axis=0)
        ym = y.mean()
        u, d, vt = np.linalg.svd(zc, full_matrices=False)
        uty = u.T @ (y - ym)
        coef = vt.T @ ((d / (d * d + alphas[:, None]))[..., None] * uty[None, :, None])[..., 0].T
        return (z_new - z.mean(axis=0)) @ coef + ym

    def fit(self, x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> RidgeSearch:
        from sklearn.model_selection import GroupKFold

        n_inner = min(self.n_inner, len(np.unique(groups)))
        if n_inner >= 2 and len(self.alphas) > 1:
            scores = np.zeros((n_inner, len(self.alphas)))
            for i, (tr, te) in enumerate(GroupKFold(n_inner).split(x, y, groups)):
                pred = self._path(x[tr], y[tr], x[te], self.alphas)
                sst = np.sum((y[te] - y[te].mean()) ** 2)
                sse = np.sum((y[te, None] - pred) ** 2, axis=0)
                scores[i] = 1.0 - sse / sst if sst > 0 else np.where(sse == 0, 1.0, 0.0)
            self.alpha_ = float(self.alphas[int(np.argmax(scores.mean(axis=0)))])
        else:
            self.alpha_ = float(self.alphas[0])
        self._x, self._y = x, y
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self._path(self._x, self._y, x, np.array([self.alpha_]))[:, 0]


class KernelRidgeSearch:
    """Standardised RBF kernel ridge with its penalty and width chosen by grouped CV: scikit-learn's
    ``GridSearchCV(make_pipeline(StandardScaler(), KernelRidge(kernel="rbf")), grid,
    cv=GroupKFold(n_inner), scoring="r2")`` computed with the same operations, but with the
    squared distances of an inner fold computed once for its whole grid (and each width's kernel
    once for all its penalties) instead of once per grid point::

        K_gamma = exp(-gamma D),  D_ij = |z_i - z_j|^2        dual(a) = (K_gamma + a I)^-1 y

    The kernel is the one ``rbf_kernel`` builds (the same distance, product and exponential), fitted
    and applied by scikit-learn's ``KernelRidge`` on it as a precomputed kernel (the same Cholesky
    solve), so the predictions are scikit-learn's bit for bit. The best grid point is the first
    highest mean R^2 over the inner folds, as GridSearchCV's ranking picks it."""

    def __init__(self, grid: dict[str, list[Any]], n_inner: int = N_INNER) -> None:
        # GridSearchCV's candidate order: the parameter names sorted, the last varying fastest
        self.candidates = [(a, g) for a in grid["kernelridge__alpha"] for g in grid["kernelridge__gamma"]]
        self.n_inner = n_inner

    @staticmethod
    def _paths(x: np.ndarray, y: np.ndarray, x_new: np.ndarray, candidates: list[tuple[float, float]]
               ) -> np.ndarray:
        """(n_new, n_candidates) predictions of the standardised kernel ridge fitted on (x, y)."""
        from sklearn.kernel_ridge import KernelRidge
        from sklearn.metrics.pairwise import euclidean_distances
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler().fit(x)
        z, z_new = scaler.transform(x), scaler.transform(x_new)
        d, d_new = euclidean_distances(z, z, squared=True), euclidean_distances(z_new, z, squared=True)
        out = np.empty((len(x_new), len(candidates)))
        gammas = list(dict.fromkeys(g for _, g in candidates))
        for i, gamma in enumerate(gammas):  # one width's kernels held at a time, the last in the distances' place
            last = i == len(gammas) - 1
            k = np.multiply(d, -gamma, out=d if last else None)
            k_new = np.multiply(d_new, -gamma, out=d_new if last else None)
            np.exp(k, out=k)  # rbf_kernel's own steps: D * -gamma, then exp in place
            np.exp(k_new, out=k_new)
            for j, (alpha, g) in enumerate(candidates):
                if g == gamma:
                    out[:, j] = KernelRidge(alpha=alpha, kernel="precomputed").fit(k, y).predict(k_new)
        return out

    def fit(self, x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> KernelRidgeSearch:
        from sklearn.metrics import r2_score
        from sklearn.model_selection import GroupKFold

        n_inner = min(self.n_inner, len(np.unique(groups)))
        scores = np.empty((len(self.candidates), n_inner))
        for i, (tr, te) in enumerate(GroupKFold(n_inner).split(x, y, groups)):
            pred = self._paths(x[tr], y[tr], x[te], self.candidates)
            scores[:, i] = [r2_score(y[te], pred[:, j]) for j in range(len(self.candidates))]
        means = np.average(scores, axis=1)
        if np.isnan(means).all():
            best = 0
        else:  # a failed grid point ranks below every other, as in GridSearchCV
            best = int(np.argmax(np.nan_to_num(means, nan=np.nanmin(means) - 1)))
        self.best_params_ = dict(zip(("alpha", "gamma"), self.candidates[best]))
        self._x, self._y = x, y
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        best = (self.best_params_["alpha"], self.best_params_["gamma"])
        return self._paths(self._x, self._y, x, [best])[:, 0]


class NystroemRidgeSearch(KernelRidgeSearch):
    """The kernel ridge search above ``NYSTROEM_ABOVE`` rows (module doc): scikit-learn's
    ``GridSearchCV(make_pipeline(StandardScaler(), Nystroem(kernel="rbf", n_components=m,
    random_state=seed), Ridge()), {"nystroem__gamma": gammas, "ridge__alpha": alphas},
    cv=GroupKFold(n_inner), scoring="r2")`` over the kernel ridge's grid, with each width's features
    and their Gram matrix computed once for all penalties::

        coef(a) = (Phi_c' Phi_c + a I)^-1 Phi_c' (y - ybar),   yhat = (phi - mean(Phi)) coef(a) + ybar

    (Ridge's own Cholesky solve). Candidates in that grid search's order (width, then penalty), the
    first highest mean R^2 winning; ``best_params_`` as the exact search names them."""

    def __init__(self, grid: dict[str, list[Any]], n_inner: int = N_INNER, n_components: int = NYSTROEM_COMPONENTS,
                 seed: int = 0) -> None:
        self.candidates = [(a, g) for g in grid["kernelridge__gamma"] for a in grid["kernelridge__alpha"]]
        self.n_inner, self.n_components, self.seed = n_inner, n_components, seed

    def _paths(self, x: np.ndarray, y: np.ndarray, x_new: np.ndarray,  # type: ignore[override]
               candidates: list[tuple[float, float]]) -> np.ndarray:
        """(n_new, n_candidates) predictions of the standardised Nystroem ridge fitted on (x, y)."""
        from scipy import linalg
        from sklearn.kernel_approximation import Nystroem
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler().fit(x)
        z, z_new = scaler.transform(x), scaler.transform(x_new)
        out = np.empty((len(x_new), len(candidates)))
        ym = y.mean()
        for gamma in dict.fromkeys(g for _, g in candidates):
            ny = Nystroem(kernel="rbf", gamma=gamma, n_components=self.n_components, random_state=self.seed).fit(z)
            phi, phi_new = ny.transform(z), ny.transform(z_new)
            mu = phi.mean(axis=0)
            phi -= mu
            gram, phy = phi.T @ phi, phi.T @ (y - ym)
            for j, (alpha, g) in enumerate(candidates):
                if g == gamma:
                    a = gram.copy()
                    a.flat[::a.shape[0] + 1] += alpha
                    coef = linalg.solve(a, phy, assume_a="pos", overwrite_a=True)
                    out[:, j] = phi_new @ coef + (ym - mu @ coef)
        return out


def kernel_approximation(groups: np.ndarray, n_folds: int = N_FOLDS) -> dict[str, Any] | None:
    """The Nystroem rule as audit.json records it, where the cross-fitted kernel ridge on rows with
    these fold groups used it (an outer training fold of more than ``NYSTROEM_ABOVE`` rows); None
    where every fold was exact."""
    from sklearn.model_selection import GroupKFold

    groups = np.asarray(groups)
    folds = min(n_folds, len(np.unique(groups)))
    if folds < 2:
        return None
    sizes = [len(tr) for tr, _ in GroupKFold(folds).split(np.zeros((len(groups), 1)), groups=groups)]
    used = sum(n > NYSTROEM_ABOVE for n in sizes)
    if not used:
        return None
    return {"method": "nystroem", "kernel": "rbf", "n_components": NYSTROEM_COMPONENTS,
            "above_training_rows": NYSTROEM_ABOVE, "folds_approximated": int(used), "folds": int(folds),
            "training_rows": [int(n) for n in sizes]}


def one_thread() -> Any:
    """One BLAS and one OpenMP thread for a probe's fits: a probe is dozens of small fits, where
    thread start-up and, on a shared machine, threads spin-waiting on each other cost far more
    than the parallel work saves (an MLP fit ran 10 to 40 times slower on two BLAS threads on a
    busy 2-core machine)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


def _search(name: str, x: np.ndarray, y: np.ndarray, groups: np.ndarray, seed: int) -> Any:
    """The learner with its hyperparameters chosen by grouped CV on (x, y), refitted on all of it
    (run under :func:`one_thread`)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import GridSearchCV, GroupKFold

    if name == "ridge":
        return RidgeSearch().fit(x, y, groups)
    est, grid = learner(name, x.shape[1], seed)
    n_inner = min(N_INNER, len(np.unique(groups)))
    if name == "kernel_ridge" and n_inner >= 2:
        if len(x) > NYSTROEM_ABOVE:
            return NystroemRidgeSearch(grid, n_inner, NYSTROEM_COMPONENTS, seed).fit(x, y, groups)
        return KernelRidgeSearch(grid, n_inner).fit(x, y, groups)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # an MLP stopped at its iteration cap is still a probe
        if n_inner < 2:
            return est.fit(x, y)
        return GridSearchCV(est, grid, cv=GroupKFold(n_inner), scoring="r2").fit(x, y, groups=groups)


def default_jobs() -> int:
    """Worker processes for the probes' fits: the CPUs this process may run on, or fewer where
    OMP_NUM_THREADS says so (how a sweep's parallel audits share one machine, ``rmtrain.sweep``)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    env = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, min(n, int(env))) if env.isdigit() and int(env) > 0 else max(1, n)


def _fold_predict(name: str, x: np.ndarray, y: np.ndarray, groups: np.ndarray, train: np.ndarray,
                  test: np.ndarray, seed: int) -> np.ndarray:
    with one_thread():
        return _search(name, x[train], y[train], groups[train], seed).predict(x[test])


def crossfit_predictions(names: tuple[str, ...] | list[str], x: np.ndarray, y: np.ndarray, groups: np.ndarray, *,
                         n_folds: int = N_FOLDS, seed: int = 0, jobs: int = 1) -> dict[str, np.ndarray]:
    """:func:`crossfit_predict` of each learner on the same rows and folds. With ``jobs`` > 1 and an
    iterative learner (boosted trees, MLP) among them, the (learner, fold) fits run in up to
    ``jobs`` worker processes, the slowest learners first; every fit is independent, seeded and
    single-threaded, so the predictions are the serial loop's. The closed-form learners alone run
    in process (faster than starting a worker)."""
    from sklearn.model_selection import GroupKFold

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    groups = np.asarray(groups)
    folds = min(n_folds, len(np.unique(groups)))
    if folds < 2:
        raise ValueError("cross-fitting needs at least two groups")
    splits = list(GroupKFold(folds).split(x, y, groups))
    slowest = sorted(names, key=lambda n: SLOWEST_FIRST.index(n) if n in SLOWEST_FIRST else len(SLOWEST_FIRST))
    tasks = [(name, i) for name in slowest for i in range(len(splits))]
    if jobs > 1 and any(n in ITERATIVE for n in names):
        from joblib import Parallel, delayed

        preds = Parallel(n_jobs=min(jobs, len(tasks)), backend="loky")(
            delayed(_fold_predict)(name, x, y, groups, *splits[i], seed) for name, i in tasks)
    else:
        preds = [_fold_predict(name, x, y, groups, *splits[i], seed) for name, i in tasks]
    out = {name: np.empty(len(y)) for name in names}
    for (name, i), pred in zip(tasks, preds):
        out[name][splits[i][1]] = pred
    return out


def crossfit_predict(name: str, x: np.ndarray, y: np.ndarray, groups: np.ndarray, *, n_folds: int = N_FOLDS,
                     seed: int = 0) -> np.ndarray:
    """Out-of-fold predictions over ``GroupKFold(n_folds)`` (module doc)."""
    return crossfit_predictions([name], x, y, groups, n_folds=n_folds, seed=seed)[name]


def in_sample_predict(name: str, x: np.ndarray, y: np.ndarray, groups: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """Predictions of the learner fitted on every row (hyperparameters by grouped CV)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    with one_thread():
        return _search(name, x, y, np.asarray(groups), seed).predict(x)


def r2_sums(y: np.ndarray, pred: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    """(k, 4) per-prompt sums [n, sum y, sum y^2, sum (y - pred)^2] (y centred) for R^2 under a
    prompt resample."""
    yc = y - y.mean()
    e = y - pred
    return per_prompt_sums(codes, np.column_stack([np.ones_like(y), yc, yc * yc, e * e]), k)


def r2_from_sums(s: np.ndarray) -> np.ndarray:
    n, sy, qy, qe = (s[..., i] for i in range(4))
    return 1.0 - qe / (qy - sy * sy / n)


def probe_r2(y: np.ndarray, pred: np.ndarray, codes: np.ndarray, k: int, weights: np.ndarray) -> dict[str, Any]:
    """R^2 of fixed predictions with its prompt-bootstrap interval."""
    est, boot = bootstrap_stat(r2_sums(y, pred, codes, k), r2_from_sums, weights)
    return summarize(est, boot, k, weights.shape[0])
