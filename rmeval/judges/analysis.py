"""Perception and prioritization of LLM judges from a judgments table (JudgeProfile, App. A-D).

The panel, its two read protocols (stable, single read) and the agreement and fitting primitives
are ``rmeval.judges.panel``. Here:

- Agreement between two judges: overall (items where both give a stable verdict) and attribute
  (item-attribute cells where both resolve a stable direction; coverage = those cells / cells both
  judged), split by items where their verdicts agree (same winner) or not (opposite winner), with
  Cohen's kappa on the same cells. Panel figures average judge pairs equally; pooled figures pool
  the cells of all pairs (the hand example: 8 judges for A, 11 for B -> 83/171).
- Per judge: order consistency (both reads resolved and equal, among cells with both resolved),
  stable rate (cells with a stable direction), position bias (share of resolved reads naming the
  first-shown response).
- Priorities: L2 logistic regression (C = 1, intercept) of the judge's stable verdict on its
  stable attribute directions; items without a stable verdict are left out and counted. Five-fold
  accuracy, split-half reliability (Pearson r of the two halves' weights, Spearman-Brown 2r/(1+r)),
  and the shared-perception refit on the majority direction ``sign(sum_j d_j)``. Computed beside
  ``analyze`` where a table needs them (``rmeval.reproduce.judges``): ``perception_split_half``
  (the same reliability for the perception profile) and ``agreement_controls.agreement_by_source``.
- The paper's controls, each a section of the document: perception controls
  (``rmeval.judges.agreement_controls``: single-read control, three-category kappa, matched items,
  the no-conflict subset, agreement by importance quartile and family, and with reference labels
  the difficulty strata and single-attribute associations) and prioritisation controls
  (``rmeval.judges.priority_controls``: the identical-preference null with each judge's
  dispersion against it, component swaps).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from rmcore.console.progress import Progress
from rmcore.errors import ConfigError
from rmcore.io.markdown import num, table

from .agreement_controls import (
    attribute_importance,
    controls_markdown,
    difficulty_strata,
    label_associations,
    matched_items,
    no_conflict,
    single_read_control,
    three_category_kappa,
)
from .inventory import CORE_ATTRIBUTES, load_inventory
from .panel import (
    Panel,
    build_panel,
    fit_weights,
    logistic_regression,
    mean_or_none,
    one_blas_thread,
    pair_agreement,
    rate_or_none,
)
from .priority_controls import priority_controls, priority_markdown
from .settings import AnalysisSettings
from .store import JudgmentStore, table_to_store
from .workers import run_tasks

__all__ = ["AnalysisSettings", "Panel", "analysis_markdown", "analyze", "build_panel"]


def agreement(panel: Panel) -> dict[str, Any]:
    pairs = [pair_agreement(panel, j, k) for j, k in itertools.combinations(range(len(panel.judges)), 2)]
    out: dict[str, Any] = {}
    for key in ("overall", "attribute", "same_winner", "opposite_winner"):
        num = sum((p[key]["agreement"] or 0) * p[key]["n"] for p in pairs)
        den = sum(p[key]["n"] for p in pairs)
        out[key] = mean_or_none([p[key]["agreement"] for p in pairs])
        out[f"{key}_pooled"] = rate_or_none(num, den)
        out[f"{key}_kappa"] = mean_or_none([p[key]["kappa"] for p in pairs])
        if key != "overall":
            out[f"{key}_coverage"] = mean_or_none([p[key]["coverage"] for p in pairs])
    out["n_pairs"] = len(pairs)
    # per attribute, pooled over judge pairs (cells where both resolve a stable direction)
    ac = panel.attribute_counts()
    upper = np.triu_indices(len(panel.judges), 1)
    agree, n, cells = (x[:, upper[0], upper[1]].sum(axis=1) for x in (ac.agree(), ac.joint, ac.cells))
    out["per_attribute"] = {name: {"agreement": rate_or_none(agree[a], n[a]), "n": int(n[a]),
                                   "coverage": rate_or_none(n[a], cells[a])}
                            for a, name in enumerate(panel.attributes)}
    out["pairs"] = pairs
    return out


def judge_consistency(panel: Panel, j: int) -> dict[str, Any]:
    present = panel.present[j, :, :-1]
    both = panel.both_resolved[j, :, :-1]
    cons = panel.consistent[j, :, :-1]
    fr, fro = panel.first_reads[j], panel.first_reads_overall[j]
    return {
        "order_consistency": rate_or_none(cons.sum(), both.sum()),
        "stable_rate": rate_or_none(cons.sum(), present.sum()),
        "overall_order_consistency": rate_or_none(panel.consistent[j, :, -1].sum(),
                                                  panel.both_resolved[j, :, -1].sum()),
        "overall_stable_rate": rate_or_none(panel.consistent[j, :, -1].sum(), panel.present[j, :, -1].sum()),
        "position_bias": {"first_rate": rate_or_none(fr[0], fr[1]), "n_reads": int(fr[1]),
                          "overall_first_rate": rate_or_none(fro[0], fro[1]), "overall_n_reads": int(fro[1])},
    }


def cv_accuracy(x: np.ndarray, y: np.ndarray, *, folds: int = 5, seed: int = 0) -> float | None:
    """Mean accuracy over stratified, shuffled ``folds``-fold splits; None when a class has fewer
    than ``folds`` items (a fold would lack it)."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    _, counts = np.unique(y, return_counts=True)
    if len(counts) < 2 or counts.min() < folds:
        return None
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return float(np.mean(cross_val_score(logistic_regression(seed), x, y, cv=cv, scoring="accuracy")))


def split_half(x: np.ndarray, y: np.ndarray, *, n_splits: int = 20, seed: int = 0) -> dict[str, Any]:
    """Mean Pearson r between the weights fitted on two random halves, and Spearman-Brown 2r/(1+r)."""
    rng = np.random.default_rng(seed)
    rs: list[float] = []
    for _ in range(n_splits):
        perm = rng.permutation(len(y))
        h1, h2 = perm[: len(y) // 2], perm[len(y) // 2:]
        f1, f2 = fit_weights(x[h1], y[h1], seed), fit_weights(x[h2], y[h2], seed)
        if f1 is None or f2 is None or np.std(f1[0]) == 0 or np.std(f2[0]) == 0:
            continue
        rs.append(float(np.corrcoef(f1[0], f2[0])[0, 1]))
    if not rs:
        return {"half_r": None, "spearman_brown": None, "n_splits": 0}
    r = float(np.mean(rs))
    return {"half_r": r, "spearman_brown": 2 * r / (1 + r) if r > -1 else None, "n_splits": len(rs)}


def perception_split_half(panel: Panel, j: int, *, n_splits: int = 20, seed: int = 0) -> dict[str, Any]:
    """Mean Pearson r between judge j's perception profiles (per attribute, the share of the cells
    it read in both orders that have a stable direction) on two random halves of the items (C.1;
    the paper: at least 0.9998), and Spearman-Brown 2r/(1+r)."""
    stable = (panel.stable[j, :, :-1] != 0) & panel.present[j, :, :-1]
    present = panel.present[j, :, :-1]
    rng = np.random.default_rng([seed, j])
    rs: list[float] = []
    for _ in range(n_splits):
        perm = rng.permutation(len(panel.items))
        halves = [perm[: len(perm) // 2], perm[len(perm) // 2:]]
        with np.errstate(invalid="ignore", divide="ignore"):
            prof = [stable[h].sum(0) / present[h].sum(0) for h in halves]
        ok = np.isfinite(prof[0]) & np.isfinite(prof[1])
        if ok.sum() >= 2 and np.std(prof[0][ok]) > 0 and np.std(prof[1][ok]) > 0:
            rs.append(float(np.corrcoef(prof[0][ok], prof[1][ok])[0, 1]))
    if not rs:
        return {"half_r": None, "spearman_brown": None, "n_splits": 0}
    r = float(np.mean(rs))
    return {"half_r": r, "spearman_brown": 2 * r / (1 + r) if r > -1 else None, "n_splits": len(rs)}


def priority_data(panel: Panel, j: int, features: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """(X, y, n_excluded) for judge j: items the judge read overall; X its stable directions (or the
    given (I, A) features), y its stable verdict (+1 A / -1 B); items without one are excluded."""
    read = panel.present[j, :, -1]
    v = panel.verdict[j]
    keep = read & (v != 0)
    feats = panel.stable[j, :, :-1] if features is None else features
    return feats[keep].astype(float), v[keep].astype(int), int((read & (v == 0)).sum())


def shared_features(panel: Panel) -> np.ndarray:
    """Majority stable direction over judges per item-attribute cell, 0 when tied or absent (int8;
    summed judge by judge, never a wide copy of the panel)."""
    total = np.zeros(panel.stable.shape[1:], dtype=np.int16)
    for j in range(len(panel.judges)):
        total += panel.stable[j]
    return np.sign(total[:, :-1]).astype(np.int8)


def _priority_task(x_own: np.ndarray, x_shared: np.ndarray, y: np.ndarray, excluded: int, attributes: list[str],
                   seed: int, n_splits: int) -> dict[str, Any]:
    """One judge's priority fits (``priorities``) from its int8 features: a worker's task."""
    out: dict[str, Any] = {}
    with one_blas_thread():
        for tag, feats in (("", x_own), ("shared_", x_shared)):
            x = feats.astype(float)
            fit = fit_weights(x, y, seed)
            out[f"{tag}weights"] = dict(zip(attributes, fit[0].tolist())) if fit else None
            out[f"{tag}intercept"] = fit[1] if fit else None
            out[f"{tag}cv_accuracy"] = cv_accuracy(x, y, seed=seed)
            if not tag:
                out["n_items"], out["n_excluded"] = int(len(y)), excluded
                out["split_half"] = split_half(x, y, n_splits=n_splits, seed=seed)
    return out


def _priority_args(panel: Panel, j: int, shared: np.ndarray, seed: int, n_splits: int) -> tuple[Any, ...]:
    read = panel.present[j, :, -1]
    v = panel.verdict[j]
    keep = read & (v != 0)
    return (panel.stable[j, keep, :-1], shared[keep], v[keep].astype(int), int((read & (v == 0)).sum()),
            panel.attributes, seed, n_splits)


def priorities(panel: Panel, j: int, *, seed: int = 0, n_splits: int = 20) -> dict[str, Any]:
    """Own-perception fit (weights, intercept, 5-fold accuracy, split-half reliability) and the
    shared-perception refit of judge j."""
    return _priority_task(*_priority_args(panel, j, shared_features(panel), seed, n_splits))


def all_priorities(panel: Panel, *, seed: int = 0, n_splits: int = 20, jobs: int | None = None,
                   progress: bool = False) -> list[dict[str, Any]]:
    """``priorities`` of every judge, in panel order, over worker processes."""
    shared = shared_features(panel)
    tasks = [_priority_args(panel, j, shared, seed, n_splits) for j in range(len(panel.judges))]
    return run_tasks(_priority_task, tasks, jobs=jobs, desc="priority fits", progress=progress)


def _weight_correlations(judges: dict[str, Any], attributes: list[str], key: str) -> dict[str, float | None]:
    from scipy.stats import pearsonr, spearmanr

    vecs = [np.array([v[key][a] for a in attributes]) for v in judges.values() if v.get(key)]
    pr, sr = [], []
    for u, w in itertools.combinations(vecs, 2):
        if np.std(u) > 0 and np.std(w) > 0:
            pr.append(float(pearsonr(u, w)[0]))
            sr.append(float(spearmanr(u, w)[0]))
    return {"pearson": mean_or_none(pr), "spearman": mean_or_none(sr), "n_pairs": len(pr)}


def _families(attributes_file: str | None) -> dict[str, str]:
    return {a.name: a.family for a in load_inventory(attributes_file, extend=True)}


def _control_sections(panel: Panel, judges: dict[str, Any], labelled: pd.DataFrame | None,
                      st: AnalysisSettings) -> list[tuple[str, Callable[[], Any]]]:
    """The agreement controls ``analyze`` computes, in the document's order, as (key, thunk):
    the cross-judge ones with two judges or more, the label ones with ``labelled`` items."""
    out: list[tuple[str, Callable[[], Any]]] = []
    if len(panel.judges) > 1:
        out += [("single_read_control", lambda: single_read_control(panel)),
                ("three_category_kappa", lambda: three_category_kappa(panel)),
                ("matched_items", lambda: matched_items(panel, CORE_ATTRIBUTES)),
                ("no_conflict", lambda: no_conflict(panel, st.min_shared)),
                ("attribute_importance", lambda: attribute_importance(
                    panel, {n: j["weights"] for n, j in judges.items()}, _families(st.attributes_file)))]
        if labelled is not None:
            out.append(("difficulty_strata", lambda: difficulty_strata(panel, labelled)))
    if labelled is not None:
        out.append(("label_associations", lambda: label_associations(panel, labelled, min_n_source=st.min_n_source,
                                                                     min_n_pooled=st.min_n_pooled)))
    return out


def analyze(judgments: pd.DataFrame | JudgmentStore, items: pd.DataFrame | None = None, *,
            settings: AnalysisSettings | None = None, **overrides: Any) -> dict[str, Any]:
    """The analysis.json document: ``judges.<judge>.{weights, cv_accuracy, ...}``,
    ``agreement.{overall, attribute, ...}``, cross-judge weight correlations and the paper's
    controls (module doc); with ``items`` carrying reference labels also ``difficulty_strata`` and
    ``label_associations``. ``judgments``: a judgment store (``rmeval.judges.store``) or a long
    table. ``overrides`` replace fields of ``settings`` (e.g. ``n_splits=4``)."""
    st = replace(settings or AnalysisSettings(), **overrides)
    store = judgments if isinstance(judgments, JudgmentStore) else table_to_store(judgments)
    judge_names = sorted(store.judges)  # the panel's judges, named before the panel's progress line
    if st.controls and st.donor is not None and st.donor not in judge_names:  # before minutes of fits
        raise ConfigError(f"--donor '{st.donor}' is not a judge of the panel ({', '.join(judge_names)})")
    panel = build_panel(store, st.attributes, progress=st.progress)
    fits = all_priorities(panel, seed=st.seed, n_splits=st.n_splits, jobs=st.jobs, progress=st.progress)
    judges = {name: {**judge_consistency(panel, j), **fits[j]} for j, name in enumerate(panel.judges)}
    res: dict[str, Any] = {
        "judges": judges,
        "agreement": agreement(panel),
        "weight_correlation": {"own": _weight_correlations(judges, panel.attributes, "weights"),
                               "shared": _weight_correlations(judges, panel.attributes, "shared_weights")},
    }
    labelled = bool(items is not None and items["label"].isin(["A", "B"]).any())
    if st.controls:
        sections = _control_sections(panel, judges, items if labelled else None, st)
        with Progress("analysis controls", len(sections), unit="section", enabled=st.progress) as bar:
            for key, compute in sections:
                bar.set_postfix(section=key)
                res[key] = compute()
                bar.update()
        with one_blas_thread():
            res.update(priority_controls(panel, judges, repeats=st.null_repeats, donor=st.donor, seed=st.seed,
                                         jobs=st.jobs, progress=st.progress))
    res["meta"] = {"n_judges": len(panel.judges), "n_items": len(panel.items), "attributes": panel.attributes,
                   "seed": st.seed, "n_splits": st.n_splits, "controls": st.controls, "null_repeats": st.null_repeats,
                   "min_shared": st.min_shared, "min_n_source": st.min_n_source, "min_n_pooled": st.min_n_pooled,
                   "labelled_items": int(items["label"].isin(["A", "B"]).sum()) if items is not None else 0}
    return res


def analysis_markdown(res: dict[str, Any]) -> str:
    def f(x: float | None) -> str:
        return num(x, missing="n/a")

    ag = res["agreement"]
    lines = ["# Judge analysis", "",
             f"{res['meta']['n_judges']} judges, {res['meta']['n_items']} items, "
             f"{len(res['meta']['attributes'])} attributes.", ""]
    lines += table(["agreement", "mean over pairs", "pooled", "kappa", "coverage"],
                   [[k, f(ag[k]), f(ag[k + "_pooled"]), f(ag[k + "_kappa"]), f(ag.get(k + "_coverage"))]
                    for k in ("overall", "attribute", "same_winner", "opposite_winner")])
    lines += [""] + table(["judge", "order consistency", "stable rate", "first-position rate", "cv accuracy",
                           "cv accuracy (shared)", "split-half SB", "items (excluded)"],
                          [[name, f(j["order_consistency"]), f(j["stable_rate"]), f(j["position_bias"]["first_rate"]),
                            f(j["cv_accuracy"]), f(j["shared_cv_accuracy"]), f(j["split_half"]["spearman_brown"]),
                            f"{j['n_items']} ({j['n_excluded']})"] for name, j in res["judges"].items()])
    wc = res["weight_correlation"]
    lines += ["", f"Cross-judge weight correlation: own perception Pearson {f(wc['own']['pearson'])}, "
              f"Spearman {f(wc['own']['spearman'])}; shared perception Pearson {f(wc['shared']['pearson'])}, "
              f"Spearman {f(wc['shared']['spearman'])}.", ""]
    lines += controls_markdown(res) + priority_markdown(res)
    return "\n".join(lines).rstrip() + "\n"
