"""Perception controls of JudgeProfile (App. B, C.10, D.1, Sec. 4.1): does attribute agreement
survive the ways it could be an artefact?

Notation: for judges j, k, item i and attribute a, ``d_j(i, a)`` in {-1, 0, +1} is the direction
under a protocol (``Panel.reads``): *stable* (both presentation orders agree, else 0) or *single
read* (the order-AB read alone). ``v_j(i)`` is the verdict under the same protocol. A cell is
*jointly resolved* when d_j != 0 and d_k != 0; agreement on a set of cells is the share with
d_j = d_k. Judge-pair figures are averaged over pairs equally unless called *pooled* (cells of all
pairs summed first).

- ``single_read_control`` (B.1, Table 9): agreement strata (all items, same winner, opposite
  winner) and coverage under both protocols, with the spread of the pairs' opposite-winner
  agreement (min, max, pairs above the balanced-random 0.5).
- ``three_category_kappa`` (B.1): Cohen's kappa (p_o - p_e) / (1 - p_e), p_e from each judge's
  marginals over the categories {-1, 0, +1}, on every cell both judges read -- abstention kept as
  a category instead of conditioning on resolved directions. One kappa per pair over all its
  attribute cells (attributes pooled), for the verdict and for the attributes, under both
  protocols; the mean over pairs is reported. The paper does not say whether attribute cells are
  pooled within a pair or kappa is averaged over attributes; pooling is the standard reading of
  "three-category kappa for stable attributes" and what is done here.
- ``matched_items`` (B.3, Tables 12-13): per pair, the items with two definite verdicts and at least
  one jointly resolved attribute; on that fixed set, verdict agreement (one decision per item),
  attribute agreement pooled over cells, the same averaged within each item first, and over the
  core attributes only; gap = attribute - verdict agreement, with the pairs and per-judge means
  (a judge's mean over its partners) whose gap is positive. Both protocols.
- ``no_conflict`` (Sec. 4.1, Fig. 7): (judge pair, item) cases where both verdicts are definite,
  at least ``min_shared`` attributes are jointly resolved (stable) and the two judges agree on all
  of them; the share of those cases whose winners differ, pooled over pairs (the paper's 14.5%),
  with coverage (cases / items with two definite verdicts) and the same at smaller thresholds as
  a sensitivity analysis.
- ``attribute_importance`` (D.1, Tables 26-30): per attribute, agreement over all items, same-winner
  and opposite-winner items and opposite-winner coverage, each averaged over judge pairs (pairs
  with at least one jointly resolved cell in the stratum); fitted importance = the mean over judges
  of |w_ja| / mean_b |w_jb| (each judge's own-perception weights divided by their mean absolute
  value, the paper's normalised coefficient magnitude); attribute a of rank r in 1..A by ascending
  importance (ties broken by attribute order) falls in quartile ceil(4 r / A), Q4 the most
  important (equal groups when 4 divides A); quartile and family summaries
  average their attributes; Pearson and Spearman correlation of importance with opposite-winner
  agreement across attributes.
- ``difficulty_strata`` (B.5, Table 14): items with an A/B reference label (ties left out) and two
  definite stable verdicts, split into both judges matching the label, both departing from it, and
  judges disagreeing; per stratum the item observations summed over pairs, attribute agreement
  pooled over cells and averaged over pairs, and coverage.
- ``label_associations`` (C.10, Tables 22-23): per attribute and reader (judge), the accuracy of
  "the response with more of the attribute wins" against the reference label, over items with a
  stable direction and an A/B label. Per source a reader enters only with more than ``min_n_source``
  (50) usable comparisons, pooled over all sources with more than ``min_n_pooled`` (200); the
  median accuracy over entered readers, strength = the median of |accuracy - 0.5|, sign + when the
  median accuracy is at least 0.5, coverage = the mean over all readers of the stable coverage
  (cells with a stable direction / labelled cells read). The pooled figures are recomputed on the
  pooled items, not averaged over sources.

Legacy reference copy: ``rmeval/judges/agreement_controls.py`` at commit ea5a952 (before the judgment store),
kept for ``test_judges_store_equivalence`` only; what that test does not reach (the Markdown
renderers) was left out, the rest is verbatim.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

from .panel import PROTOCOLS, Panel, _kappa, _mean, _rate, pair_agreement

STRATA = ("overall", "attribute", "same_winner", "opposite_winner")


def _pairs(panel: Panel) -> list[tuple[int, int]]:
    return list(itertools.combinations(range(len(panel.judges)), 2))


def _pair_masks(panel: Panel, j: int, k: int, protocol: str) -> dict[str, np.ndarray]:
    """Per pair: verdicts, directions, cells both read, jointly resolved and agreeing cells."""
    s, p = panel.reads(protocol)
    vj, vk = s[j, :, -1], s[k, :, -1]
    aj, ak = s[j, :, :-1], s[k, :, :-1]
    cells = p[j, :, :-1] & p[k, :, :-1]
    joint = cells & (aj != 0) & (ak != 0)
    definite = p[j, :, -1] & p[k, :, -1] & (vj != 0) & (vk != 0)
    return {"vj": vj, "vk": vk, "cells": cells, "joint": joint, "agree": joint & (aj == ak), "definite": definite}


# -- single-read control -------------------------------------------------------------------------

def protocol_strata(panel: Panel, protocol: str) -> dict[str, Any]:
    """Agreement strata under one protocol: mean over pairs, pooled, coverage, and the spread of the
    pairs' figures (min, max, pairs above 0.5)."""
    pairs = [pair_agreement(panel, j, k, protocol) for j, k in _pairs(panel)]
    out: dict[str, Any] = {}
    for key in STRATA:
        vals = [p[key]["agreement"] for p in pairs if p[key]["agreement"] is not None]
        n = sum(p[key]["n"] for p in pairs)
        out[key] = {"mean": _mean(vals),
                    "pooled": _rate(sum((p[key]["agreement"] or 0) * p[key]["n"] for p in pairs), n),
                    "min": min(vals) if vals else None, "max": max(vals) if vals else None,
                    "n_above_half": int(sum(v > 0.5 for v in vals)), "n_pairs": len(vals), "n": int(n)}
        if key != "overall":
            out[key]["coverage"] = _mean([p[key]["coverage"] for p in pairs])
    return out


def single_read_control(panel: Panel) -> dict[str, Any]:
    return {protocol: protocol_strata(panel, protocol) for protocol in PROTOCOLS}


# -- three-category kappa -------------------------------------------------------------------------

def three_category_kappa(panel: Panel) -> dict[str, Any]:
    """Mean over judge pairs of Cohen's kappa on {-1, 0, +1} over every cell both judges read."""
    out: dict[str, Any] = {}
    for protocol in PROTOCOLS:
        s, p = panel.reads(protocol)
        ov, at = [], []
        for j, k in _pairs(panel):
            c = p[j, :, -1] & p[k, :, -1]
            ov.append(_kappa(s[j, c, -1], s[k, c, -1]))
            c = p[j, :, :-1] & p[k, :, :-1]
            at.append(_kappa(s[j, :, :-1][c], s[k, :, :-1][c]))
        out[protocol] = {"overall": _mean(ov), "attribute": _mean(at),
                         "n_pairs": sum(x is not None for x in at)}
    return out


# -- matched items ----------------------------------------------------------------------------------

def _matched_pair(m: dict[str, np.ndarray], core: np.ndarray) -> dict[str, Any] | None:
    items = m["definite"] & m["joint"].any(axis=1)
    if not items.any():
        return None
    joint, agree = m["joint"][items], m["agree"][items]
    overall = float(np.mean(m["vj"][items] == m["vk"][items]))
    attribute = float(agree.sum() / joint.sum())
    cj = joint[:, core]
    core_agreement = float(agree[:, core].sum() / cj.sum()) if cj.sum() else None
    return {"n_items": int(items.sum()), "n_cells": int(joint.sum()), "overall": overall, "attribute": attribute,
            "attribute_item_mean": float(np.mean(agree.sum(axis=1) / joint.sum(axis=1))), "core": core_agreement,
            "gap": attribute - overall, "core_gap": None if core_agreement is None else core_agreement - overall}


def matched_items(panel: Panel, core_attributes: tuple[str, ...] | list[str]) -> dict[str, Any]:
    core = np.array([a in set(core_attributes) for a in panel.attributes], dtype=bool)
    out: dict[str, Any] = {"core_attributes": [a for a in panel.attributes if a in set(core_attributes)]}
    for protocol in PROTOCOLS:
        per: dict[tuple[int, int], dict[str, Any]] = {}
        for j, k in _pairs(panel):
            r = _matched_pair(_pair_masks(panel, j, k, protocol), core)
            if r is not None:
                per[(j, k)] = r
        rows = list(per.values())
        summary: dict[str, Any] = {key: _mean([r[key] for r in rows])
                                   for key in ("overall", "attribute", "attribute_item_mean", "core", "gap",
                                               "core_gap")}
        summary["n_pairs"] = len(rows)
        summary["n_pairs_positive_gap"] = int(sum(r["gap"] > 0 for r in rows))
        judges: dict[str, Any] = {}
        for j, name in enumerate(panel.judges):
            mine = [r for (a, b), r in per.items() if j in (a, b)]
            if mine:
                judges[name] = {key: _mean([r[key] for r in mine]) for key in ("overall", "attribute", "core", "gap")}
                judges[name]["n_partners"] = len(mine)
        summary["n_judges_positive_gap"] = int(sum((v["gap"] or 0) > 0 for v in judges.values()))
        summary["n_judges"] = len(judges)
        summary["judges"] = judges
        summary["pairs"] = [{"judges": [panel.judges[a], panel.judges[b]], **r} for (a, b), r in per.items()]
        out[protocol] = summary
    return out


# -- no-conflict subset ------------------------------------------------------------------------------

def no_conflict(panel: Panel, min_shared: int = 20) -> dict[str, Any]:
    """Cases with no attribute conflict and their winner disagreement, at ``min_shared`` and at
    smaller thresholds (sensitivity)."""
    thresholds = sorted({t for t in (1, 5, 10, 20) if t <= len(panel.attributes)} | {int(min_shared)})
    acc = {t: [0, 0, 0] for t in thresholds}  # cases, differing winners, definite-verdict items
    per_pair: dict[int, list[float]] = {t: [] for t in thresholds}
    for j, k in _pairs(panel):
        m = _pair_masks(panel, j, k, "stable")
        n_shared = m["joint"].sum(axis=1)
        conflict = (m["joint"] & ~m["agree"]).any(axis=1)
        differ = m["vj"] != m["vk"]
        for t in thresholds:
            cases = m["definite"] & (n_shared >= t) & ~conflict
            acc[t][0] += int(cases.sum())
            acc[t][1] += int((cases & differ).sum())
            acc[t][2] += int(m["definite"].sum())
            if cases.any():
                per_pair[t].append(float(np.mean(differ[cases])))
    rows = {str(t): {"n_cases": acc[t][0], "n_different_winner": acc[t][1],
                     "different_winner_rate": _rate(acc[t][1], acc[t][0]), "coverage": _rate(acc[t][0], acc[t][2]),
                     "mean_over_pairs": _mean(per_pair[t]), "n_pairs": len(per_pair[t])} for t in thresholds}
    return {"min_shared": int(min_shared), **rows[str(int(min_shared))], "thresholds": rows}


# -- per-attribute agreement, fitted importance, quartiles, families ---------------------------------

def per_attribute_agreement(panel: Panel) -> dict[str, dict[str, Any]]:
    """Per attribute (stable): agreement over all items, same- and opposite-winner items, each the
    mean over pairs with a jointly resolved cell in that stratum, and opposite-winner coverage."""
    n_a = len(panel.attributes)
    vals = {k: [[] for _ in range(n_a)] for k in ("all", "same_winner", "opposite_winner", "opposite_coverage")}
    for j, k in _pairs(panel):
        m = _pair_masks(panel, j, k, "stable")
        same = (m["definite"] & (m["vj"] == m["vk"]))[:, None]
        opp = (m["definite"] & (m["vj"] != m["vk"]))[:, None]
        for key, mask in (("all", None), ("same_winner", same), ("opposite_winner", opp)):
            joint = m["joint"] if mask is None else m["joint"] & mask
            agree = m["agree"] if mask is None else m["agree"] & mask
            nj, na = joint.sum(axis=0), agree.sum(axis=0)
            for a in np.flatnonzero(nj):
                vals[key][a].append(na[a] / nj[a])
        cells_opp = (m["cells"] & opp).sum(axis=0)
        joint_opp = (m["joint"] & opp).sum(axis=0)
        for a in np.flatnonzero(cells_opp):
            vals["opposite_coverage"][a].append(joint_opp[a] / cells_opp[a])
    return {name: {"all": _mean(vals["all"][a]), "same_winner": _mean(vals["same_winner"][a]),
                   "opposite_winner": _mean(vals["opposite_winner"][a]),
                   "opposite_coverage": _mean(vals["opposite_coverage"][a]),
                   "n_pairs_opposite": len(vals["opposite_winner"][a])}
            for a, name in enumerate(panel.attributes)}


def normalised_weights(weights: dict[str, dict[str, float] | None], attributes: list[str]) -> dict[str, np.ndarray]:
    """judge -> its weights divided by their mean absolute value (judges without a fit or with all
    weights zero are left out)."""
    out = {}
    for name, w in weights.items():
        if not w:
            continue
        v = np.array([w[a] for a in attributes], dtype=float)
        scale = np.mean(np.abs(v))
        if scale > 0:
            out[name] = v / scale
    return out


def attribute_importance(panel: Panel, weights: dict[str, dict[str, float] | None],
                         families: dict[str, str] | None = None) -> dict[str, Any]:
    from scipy.stats import pearsonr, spearmanr

    per = per_attribute_agreement(panel)
    norm = normalised_weights(weights, panel.attributes)
    out: dict[str, Any] = {"n_judges_fitted": len(norm), "attributes": per}
    if not norm:
        return out
    imp = np.mean(np.abs(np.stack(list(norm.values()))), axis=0)
    for a, name in enumerate(panel.attributes):
        per[name]["importance"] = float(imp[a])
    stats = ("importance", "all", "same_winner", "opposite_winner", "opposite_coverage")

    def summarise(names: list[str]) -> dict[str, Any]:
        return {**{s: _mean([per[n][s] for n in names]) for s in stats}, "n_attributes": len(names)}

    if len(panel.attributes) >= 4:
        n_a = len(panel.attributes)
        rank = np.empty(n_a, dtype=int)
        rank[np.argsort(imp, kind="stable")] = np.arange(1, n_a + 1)
        quartile = -(-4 * rank // n_a)  # ceil(4 r / A)
        quart = {}
        for q in range(1, 5):
            names = [panel.attributes[i] for i in np.flatnonzero(quartile == q)]
            for n in names:
                per[n]["quartile"] = q
            quart[f"Q{q}"] = {**summarise(names), "attributes": names}
        out["quartiles"] = quart
    x = np.array([per[n]["importance"] for n in panel.attributes])
    y = np.array([np.nan if per[n]["opposite_winner"] is None else per[n]["opposite_winner"] for n in panel.attributes])
    ok = np.isfinite(y)
    if ok.sum() >= 3 and np.std(x[ok]) > 0 and np.std(y[ok]) > 0:
        out["importance_vs_opposite_agreement"] = {"pearson": float(pearsonr(x[ok], y[ok])[0]),
                                                   "spearman": float(spearmanr(x[ok], y[ok])[0]),
                                                   "n_attributes": int(ok.sum())}
    if families:
        groups: dict[str, list[str]] = {}
        for n in panel.attributes:
            groups.setdefault(families.get(n, "unknown"), []).append(n)
        fam = {f: summarise(names) for f, names in groups.items()}
        out["families"] = dict(sorted(fam.items(), key=lambda kv: -(kv[1]["importance"] or 0)))
    return out


# -- reference labels: difficulty strata and single-attribute associations ----------------------------

def label_vector(panel: Panel, items: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(label per panel item: +1 A, -1 B, 0 tie/none/not in the items table; source per item)."""
    lab = items.set_index("item_id")["label"].reindex(panel.items)
    src = items.set_index("item_id")["source"].reindex(panel.items).fillna("").astype(str)
    y = np.where(lab.to_numpy(object) == "A", 1, np.where(lab.to_numpy(object) == "B", -1, 0))
    return y.astype(np.int8), src.to_numpy()


def difficulty_strata(panel: Panel, items: pd.DataFrame) -> dict[str, Any]:
    y, _ = label_vector(panel, items)
    names = ("both_match", "both_depart", "judges_disagree")
    acc = {n: {"n_items": 0, "agree": 0, "joint": 0, "cells": 0, "pairs": []} for n in names}
    for j, k in _pairs(panel):
        m = _pair_masks(panel, j, k, "stable")
        usable = m["definite"] & (y != 0)
        vj, vk = m["vj"], m["vk"]
        strata = {"both_match": usable & (vj == y) & (vk == y), "both_depart": usable & (vj == vk) & (vj != y),
                  "judges_disagree": usable & (vj != vk)}
        for n, rows in strata.items():
            a = acc[n]
            joint, agree = m["joint"][rows], m["agree"][rows]
            a["n_items"] += int(rows.sum())
            a["agree"] += int(agree.sum())
            a["joint"] += int(joint.sum())
            a["cells"] += int(m["cells"][rows].sum())
            if joint.sum():
                a["pairs"].append(agree.sum() / joint.sum())
    out = {n: {"n_items": a["n_items"], "n_cells": a["joint"], "agreement_pooled": _rate(a["agree"], a["joint"]),
               "agreement_mean_over_pairs": _mean(a["pairs"]), "coverage": _rate(a["joint"], a["cells"]),
               "n_pairs": len(a["pairs"])} for n, a in acc.items()}
    return {**out, "n_labelled_items": int((y != 0).sum()), "n_ties_or_unlabelled": int((y == 0).sum())}


def _associations(panel: Panel, y: np.ndarray, rows: np.ndarray, min_n: int) -> dict[str, Any]:
    s, p = panel.stable[:, rows, :-1], panel.present[:, rows, :-1]
    lab = y[rows][None, :, None]
    read = p & (lab != 0)
    usable = read & (s != 0)
    n = usable.sum(axis=1)  # (J, A)
    hits = (usable & (s == lab)).sum(axis=1)
    n_read = read.sum(axis=1)
    out = {}
    for a, name in enumerate(panel.attributes):
        entered = n[:, a] > min_n
        accs = hits[entered, a] / n[entered, a]
        cov = [float(u / r) for u, r in zip(n[:, a], n_read[:, a]) if r > 0]
        med = float(np.median(accs)) if len(accs) else None
        out[name] = {"median_accuracy": med,
                     "strength": float(np.median(np.abs(accs - 0.5))) if len(accs) else None,
                     "sign": None if med is None else ("+" if med >= 0.5 else "-"),
                     "coverage": _mean(cov), "n_readers": int(entered.sum()), "n_comparisons": int(n[entered, a].sum())}
    return dict(sorted(out.items(), key=lambda kv: -(kv[1]["strength"] if kv[1]["strength"] is not None else -1)))


def label_associations(panel: Panel, items: pd.DataFrame, *, min_n_source: int = 50,
                       min_n_pooled: int = 200) -> dict[str, Any]:
    y, src = label_vector(panel, items)
    out: dict[str, Any] = {"min_n_source": int(min_n_source), "min_n_pooled": int(min_n_pooled),
                           "pooled": _associations(panel, y, np.ones(len(y), bool), min_n_pooled), "sources": {}}
    for source in sorted(set(src[y != 0])):
        out["sources"][source] = _associations(panel, y, src == source, min_n_source)
    return out


# -- report -----------------------------------------------------------------------------------------
