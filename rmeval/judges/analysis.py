"""Perception and prioritization of LLM judges from a judgments table (JudgeProfile, App. A-C).

Every read ``r^(o)`` in {-1, 0, +1} (+1: the original response A) is paired across the two
presentation orders; the *stable* direction is the one both orders agree on, else 0.

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
  and the shared-perception refit on the majority direction ``sign(sum_j d_j)``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rmcore.markdown import num, table

from .inventory import OVERALL


@dataclass
class Panel:
    """Stable directions as a dense array: ``stable[j, i, a]`` for judge j, item i, attribute a
    (the last attribute column is the overall verdict); ``present`` marks cells with both orders."""

    judges: list[str]
    items: list[str]
    attributes: list[str]  # without OVERALL
    stable: np.ndarray  # (J, I, A+1) int8
    present: np.ndarray  # (J, I, A+1) bool: both orders read
    consistent: np.ndarray  # (J, I, A+1) bool: both reads resolved and equal
    both_resolved: np.ndarray  # (J, I, A+1) bool: both reads non-zero
    first_reads: np.ndarray  # (J, 2) resolved attribute reads naming the first-shown response, all resolved
    first_reads_overall: np.ndarray  # (J, 2) the same for the overall verdict

    @property
    def verdict(self) -> np.ndarray:
        return self.stable[:, :, -1]

    def judge_index(self, judge: str) -> int:
        return self.judges.index(judge)


def build_panel(judgments: pd.DataFrame, attributes: list[str] | None = None) -> Panel:
    """Judgments table (validated) -> Panel. A cell read in only one order has no stable direction
    and is not ``present`` (it counts toward neither agreement nor coverage)."""
    df = judgments
    judges = sorted(df["judge"].unique())
    items = list(dict.fromkeys(df["item_id"]))
    attrs = attributes or sorted(a for a in df["attribute"].unique() if a != OVERALL)
    cols = attrs + [OVERALL]
    ji = {j: n for n, j in enumerate(judges)}
    ii = {i: n for n, i in enumerate(items)}
    ai = {a: n for n, a in enumerate(cols)}
    df = df[df["attribute"].isin(ai)]
    shape = (len(judges), len(items), len(cols))
    reads = np.zeros((2, *shape), dtype=np.int8)
    seen = np.zeros((2, *shape), dtype=bool)
    o = (df["order"].to_numpy() == "BA").astype(int)
    j = df["judge"].map(ji).to_numpy()
    i = df["item_id"].map(ii).to_numpy()
    a = df["attribute"].map(ai).to_numpy()
    d = df["direction"].to_numpy().astype(np.int8)
    reads[o, j, i, a] = d
    seen[o, j, i, a] = True
    present = seen[0] & seen[1]
    both = present & (reads[0] != 0) & (reads[1] != 0)
    consistent = both & (reads[0] == reads[1])
    stable = np.where(consistent, reads[0], 0).astype(np.int8)
    # first-shown response: A in order AB (+1), B in order BA (-1)
    first = np.where(o == 0, d == 1, d == -1) & (d != 0)
    resolved = d != 0
    is_overall = a == ai[OVERALL]

    def counts(mask: np.ndarray) -> np.ndarray:
        out = np.zeros((len(judges), 2), dtype=np.int64)
        np.add.at(out[:, 0], j[mask & first], 1)
        np.add.at(out[:, 1], j[mask & resolved], 1)
        return out

    return Panel(judges, items, attrs, stable, present, consistent, both, counts(~is_overall), counts(is_overall))


def _rate(num: float, den: float) -> float | None:
    return float(num / den) if den else None


def _kappa(x: np.ndarray, y: np.ndarray) -> float | None:
    """Cohen's kappa (po - pe) / (1 - pe) with pe from the two raters' marginals."""
    if len(x) == 0:
        return None
    labels = np.union1d(x, y)
    po = float(np.mean(x == y))
    pe = float(sum(np.mean(x == c) * np.mean(y == c) for c in labels))
    return None if pe >= 1 else (po - pe) / (1 - pe)


def pair_agreement(panel: Panel, j: int, k: int) -> dict[str, Any]:
    s, p = panel.stable, panel.present
    vj, vk = s[j, :, -1], s[k, :, -1]
    both_v = (vj != 0) & (vk != 0)
    out: dict[str, Any] = {"judges": [panel.judges[j], panel.judges[k]]}
    out["overall"] = {"agreement": _rate(np.sum(vj[both_v] == vk[both_v]), both_v.sum()), "n": int(both_v.sum()),
                      "kappa": _kappa(vj[both_v], vk[both_v])}
    aj, ak = s[j, :, :-1], s[k, :, :-1]
    cells = p[j, :, :-1] & p[k, :, :-1]
    joint = cells & (aj != 0) & (ak != 0)
    same = (both_v & (vj == vk))[:, None]
    opp = (both_v & (vj != vk))[:, None]
    for name, m in (("attribute", joint), ("same_winner", joint & same), ("opposite_winner", joint & opp)):
        den = cells if name == "attribute" else cells & (same if name == "same_winner" else opp)
        out[name] = {"agreement": _rate(np.sum(aj[m] == ak[m]), m.sum()), "n": int(m.sum()),
                     "coverage": _rate(m.sum(), den.sum()), "kappa": _kappa(aj[m], ak[m])}
    return out


def _mean(values: list[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


def agreement(panel: Panel) -> dict[str, Any]:
    pairs = [pair_agreement(panel, j, k) for j, k in itertools.combinations(range(len(panel.judges)), 2)]
    out: dict[str, Any] = {}
    for key in ("overall", "attribute", "same_winner", "opposite_winner"):
        num = sum((p[key]["agreement"] or 0) * p[key]["n"] for p in pairs)
        den = sum(p[key]["n"] for p in pairs)
        out[key] = _mean([p[key]["agreement"] for p in pairs])
        out[f"{key}_pooled"] = _rate(num, den)
        out[f"{key}_kappa"] = _mean([p[key]["kappa"] for p in pairs])
        if key != "overall":
            out[f"{key}_coverage"] = _mean([p[key]["coverage"] for p in pairs])
    out["n_pairs"] = len(pairs)
    # per attribute, pooled over judge pairs (cells where both resolve a stable direction)
    per: dict[str, Any] = {}
    s, p = panel.stable, panel.present
    for a, name in enumerate(panel.attributes):
        agree = n = cells = 0
        for j, k in itertools.combinations(range(len(panel.judges)), 2):
            c = p[j, :, a] & p[k, :, a]
            m = c & (s[j, :, a] != 0) & (s[k, :, a] != 0)
            agree += int(np.sum(s[j, m, a] == s[k, m, a]))
            n += int(m.sum())
            cells += int(c.sum())
        per[name] = {"agreement": _rate(agree, n), "n": n, "coverage": _rate(n, cells)}
    out["per_attribute"] = per
    out["pairs"] = pairs
    return out


def judge_consistency(panel: Panel, j: int) -> dict[str, Any]:
    present = panel.present[j, :, :-1]
    both = panel.both_resolved[j, :, :-1]
    cons = panel.consistent[j, :, :-1]
    fr, fro = panel.first_reads[j], panel.first_reads_overall[j]
    return {
        "order_consistency": _rate(cons.sum(), both.sum()),
        "stable_rate": _rate(cons.sum(), present.sum()),
        "overall_order_consistency": _rate(panel.consistent[j, :, -1].sum(), panel.both_resolved[j, :, -1].sum()),
        "overall_stable_rate": _rate(panel.consistent[j, :, -1].sum(), panel.present[j, :, -1].sum()),
        "position_bias": {"first_rate": _rate(fr[0], fr[1]), "n_reads": int(fr[1]),
                          "overall_first_rate": _rate(fro[0], fro[1]), "overall_n_reads": int(fro[1])},
    }


def one_blas_thread():
    """Small logistic fits run fastest on one BLAS thread; several threads spin-wait on each other
    (10x slower on a busy 2-core machine)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _logreg(seed: int = 0):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1.0, l1_ratio=0.0, fit_intercept=True, max_iter=2000, random_state=seed)


def cv_accuracy(x: np.ndarray, y: np.ndarray, *, folds: int = 5, seed: int = 0) -> float | None:
    """Mean accuracy over stratified, shuffled ``folds``-fold splits; None when a class has fewer
    than ``folds`` items (a fold would lack it)."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    _, counts = np.unique(y, return_counts=True)
    if len(counts) < 2 or counts.min() < folds:
        return None
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return float(np.mean(cross_val_score(_logreg(seed), x, y, cv=cv, scoring="accuracy")))


def fit_weights(x: np.ndarray, y: np.ndarray, seed: int = 0) -> tuple[np.ndarray, float] | None:
    if len(np.unique(y)) < 2:
        return None
    m = _logreg(seed).fit(x, y)
    return m.coef_[0].astype(float), float(m.intercept_[0])


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


def priority_data(panel: Panel, j: int, features: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """(X, y, n_excluded) for judge j: items the judge read overall; X its stable directions (or the
    given (I, A) features), y its stable verdict (+1 A / -1 B); items without one are excluded."""
    read = panel.present[j, :, -1]
    v = panel.verdict[j]
    keep = read & (v != 0)
    feats = panel.stable[j, :, :-1] if features is None else features
    return feats[keep].astype(float), v[keep].astype(int), int((read & (v == 0)).sum())


def shared_features(panel: Panel) -> np.ndarray:
    """Majority stable direction over judges per item-attribute cell, 0 when tied or absent."""
    return np.sign(panel.stable[:, :, :-1].astype(int).sum(axis=0)).astype(float)


def priorities(panel: Panel, j: int, *, seed: int = 0, n_splits: int = 20) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tag, feats in (("", None), ("shared_", shared_features(panel))):
        x, y, excluded = priority_data(panel, j, feats)
        fit = fit_weights(x, y, seed)
        out[f"{tag}weights"] = dict(zip(panel.attributes, fit[0].tolist())) if fit else None
        out[f"{tag}intercept"] = fit[1] if fit else None
        out[f"{tag}cv_accuracy"] = cv_accuracy(x, y, seed=seed)
        if not tag:
            out["n_items"], out["n_excluded"] = int(len(y)), excluded
            out["split_half"] = split_half(x, y, n_splits=n_splits, seed=seed)
    return out


def _weight_correlations(judges: dict[str, Any], attributes: list[str], key: str) -> dict[str, float | None]:
    from scipy.stats import pearsonr, spearmanr

    vecs = [np.array([v[key][a] for a in attributes]) for v in judges.values() if v.get(key)]
    pr, sr = [], []
    for u, w in itertools.combinations(vecs, 2):
        if np.std(u) > 0 and np.std(w) > 0:
            pr.append(float(pearsonr(u, w)[0]))
            sr.append(float(spearmanr(u, w)[0]))
    return {"pearson": _mean(pr), "spearman": _mean(sr), "n_pairs": len(pr)}


def analyze(judgments: pd.DataFrame, *, attributes: list[str] | None = None, seed: int = 0,
            n_splits: int = 20) -> dict[str, Any]:
    """The analysis.json document: ``judges.<judge>.{weights, cv_accuracy, ...}``,
    ``agreement.{overall, attribute, ...}`` and cross-judge weight correlations."""
    panel = build_panel(judgments, attributes)
    judges: dict[str, Any] = {}
    with one_blas_thread():
        for j, name in enumerate(panel.judges):
            judges[name] = {**judge_consistency(panel, j), **priorities(panel, j, seed=seed, n_splits=n_splits)}
    return {
        "judges": judges,
        "agreement": agreement(panel),
        "weight_correlation": {"own": _weight_correlations(judges, panel.attributes, "weights"),
                               "shared": _weight_correlations(judges, panel.attributes, "shared_weights")},
        "meta": {"n_judges": len(panel.judges), "n_items": len(panel.items), "attributes": panel.attributes,
                 "seed": seed, "n_splits": n_splits},
    }


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
    return "\n".join(lines)
