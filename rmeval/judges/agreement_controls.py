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
- ``agreement_by_source`` (B.2, Table 11; not part of ``analyze``'s document, the reproduction's
  table step computes it): the stable strata of ``protocol_strata`` on each source's items alone
  (the items table's ``source``), with the pairs' spread (the paper: opposite-winner agreement
  0.817 to 0.897 across distributions, every pair above 0.5 in each).
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
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

from rmcore.io.markdown import num, table

from .panel import (
    PROTOCOLS,
    Panel,
    cohen_kappa,
    item_subset,
    kappa_from_counts,
    mean_or_none,
    pair_agreement,
    pair_verdicts,
    rate_or_none,
)

STRATA = ("overall", "attribute", "same_winner", "opposite_winner")


def _pairs(panel: Panel) -> list[tuple[int, int]]:
    return list(itertools.combinations(range(len(panel.judges)), 2))


# -- single-read control -------------------------------------------------------------------------

def protocol_strata(panel: Panel, protocol: str) -> dict[str, Any]:
    """Agreement strata under one protocol: mean over pairs, pooled, coverage, and the spread of the
    pairs' figures (min, max, pairs above 0.5)."""
    pairs = [pair_agreement(panel, j, k, protocol) for j, k in _pairs(panel)]
    out: dict[str, Any] = {}
    for key in STRATA:
        vals = [p[key]["agreement"] for p in pairs if p[key]["agreement"] is not None]
        n = sum(p[key]["n"] for p in pairs)
        out[key] = {"mean": mean_or_none(vals),
                    "pooled": rate_or_none(sum((p[key]["agreement"] or 0) * p[key]["n"] for p in pairs), n),
                    "min": min(vals) if vals else None, "max": max(vals) if vals else None,
                    "n_above_half": int(sum(v > 0.5 for v in vals)), "n_pairs": len(vals), "n": int(n)}
        if key != "overall":
            out[key]["coverage"] = mean_or_none([p[key]["coverage"] for p in pairs])
    return out


def single_read_control(panel: Panel) -> dict[str, Any]:
    return {protocol: protocol_strata(panel, protocol) for protocol in PROTOCOLS}


def agreement_by_source(panel: Panel, items: pd.DataFrame) -> dict[str, Any]:
    """Per source of the items table: its items in the panel and the stable strata on them alone."""
    src = items.set_index("item_id")["source"].reindex(panel.items).fillna("").astype(str).to_numpy()
    out: dict[str, Any] = {}
    for source in sorted(set(src) - {""}):
        keep = src == source
        out[source] = {"n_items": int(keep.sum()), **protocol_strata(item_subset(panel, keep), "stable")}
    return out


# -- three-category kappa -------------------------------------------------------------------------

def three_category_kappa(panel: Panel) -> dict[str, Any]:
    """Mean over judge pairs of Cohen's kappa on {-1, 0, +1} over every cell both judges read. The
    attribute cells' categories are counted from the pair statistics: over the cells both read,
    judge j says 0 on cells - sum |d_j| p_k, +1 on (sum |d_j| p_k + sum d_j p_k) / 2 and -1 on the
    rest; the cells where both say 0 are cells - (those j resolves) - (those k resolves) + joint."""
    out: dict[str, Any] = {}
    for protocol in PROTOCOLS:
        s, p = panel.reads(protocol)
        c = panel.counts(protocol)
        ov, at = [], []
        for j, k in _pairs(panel):
            read = p[j, :, -1] & p[k, :, -1]
            ov.append(cohen_kappa(s[j, read, -1], s[k, read, -1]))
            n, joint = int(c.cells[j, k].sum()), int(c.joint[j, k].sum())
            agree = (joint + int(c.signed[j, k].sum())) // 2
            res_j, res_k = int(c.total_ap[j, k]), int(c.total_ap[k, j])
            pos_j, pos_k = (res_j + int(c.total_dp[j, k])) // 2, (res_k + int(c.total_dp[k, j])) // 2
            equal = agree + n - res_j - res_k + joint
            at.append(kappa_from_counts(n, equal, (res_j - pos_j, n - res_j, pos_j), (res_k - pos_k, n - res_k, pos_k)))
        out[protocol] = {"overall": mean_or_none(ov), "attribute": mean_or_none(at),
                         "n_pairs": sum(x is not None for x in at)}
    return out


# -- matched items ----------------------------------------------------------------------------------

def _matched_pair(panel: Panel, j: int, k: int, protocol: str, core: np.ndarray) -> dict[str, Any] | None:
    v = pair_verdicts(panel, j, k, protocol)
    c = panel.counts(protocol).pair(j, k)
    items = v.definite & (c.joint > 0)
    if not items.any():
        return None
    joint, agree = c.joint[items], c.agree[items]
    overall = float(np.mean(v.vj[items] == v.vk[items]))
    attribute = float(agree.sum() / joint.sum())
    cc = panel.core_counts(protocol, core).pair(j, k)
    cj = cc.joint[items]
    core_agreement = float(cc.agree[items].sum() / cj.sum()) if cj.sum() else None
    return {"n_items": int(items.sum()), "n_cells": int(joint.sum()), "overall": overall, "attribute": attribute,
            "attribute_item_mean": float(np.mean(agree / joint)), "core": core_agreement,
            "gap": attribute - overall, "core_gap": None if core_agreement is None else core_agreement - overall}


def matched_items(panel: Panel, core_attributes: tuple[str, ...] | list[str]) -> dict[str, Any]:
    core = np.array([a in set(core_attributes) for a in panel.attributes], dtype=bool)
    out: dict[str, Any] = {"core_attributes": [a for a in panel.attributes if a in set(core_attributes)]}
    for protocol in PROTOCOLS:
        per: dict[tuple[int, int], dict[str, Any]] = {}
        for j, k in _pairs(panel):
            r = _matched_pair(panel, j, k, protocol, core)
            if r is not None:
                per[(j, k)] = r
        rows = list(per.values())
        summary: dict[str, Any] = {key: mean_or_none([r[key] for r in rows])
                                   for key in ("overall", "attribute", "attribute_item_mean", "core", "gap",
                                               "core_gap")}
        summary["n_pairs"] = len(rows)
        summary["n_pairs_positive_gap"] = int(sum(r["gap"] > 0 for r in rows))
        judges: dict[str, Any] = {}
        for j, name in enumerate(panel.judges):
            mine = [r for (a, b), r in per.items() if j in (a, b)]
            if mine:
                judges[name] = {key: mean_or_none([r[key] for r in mine])
                                for key in ("overall", "attribute", "core", "gap")}
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
    counts = panel.counts("stable")
    for j, k in _pairs(panel):
        v, c = pair_verdicts(panel, j, k, "stable"), counts.pair(j, k)
        n_shared = c.joint
        conflict = c.joint > c.agree  # a jointly resolved attribute they disagree on
        differ = v.vj != v.vk
        for t in thresholds:
            cases = v.definite & (n_shared >= t) & ~conflict
            acc[t][0] += int(cases.sum())
            acc[t][1] += int((cases & differ).sum())
            acc[t][2] += int(v.definite.sum())
            if cases.any():
                per_pair[t].append(float(np.mean(differ[cases])))
    rows = {str(t): {"n_cases": acc[t][0], "n_different_winner": acc[t][1],
                     "different_winner_rate": rate_or_none(acc[t][1], acc[t][0]),
                     "coverage": rate_or_none(acc[t][0], acc[t][2]),
                     "mean_over_pairs": mean_or_none(per_pair[t]), "n_pairs": len(per_pair[t])} for t in thresholds}
    return {"min_shared": int(min_shared), **rows[str(int(min_shared))], "thresholds": rows}


# -- per-attribute agreement, fitted importance, quartiles, families ---------------------------------

def per_attribute_agreement(panel: Panel) -> dict[str, dict[str, Any]]:
    """Per attribute (stable): agreement over all items, same- and opposite-winner items, each the
    mean over pairs with a jointly resolved cell in that stratum, and opposite-winner coverage."""
    n_a = len(panel.attributes)
    ac = panel.attribute_counts()
    strata = {key: (joint, ac.agree(stratum)) for key, joint, stratum in
              (("all", ac.joint, ""), ("same_winner", ac.same_joint, "same"), ("opposite_winner", ac.opp_joint, "opp"))}
    vals = {k: [[] for _ in range(n_a)] for k in ("all", "same_winner", "opposite_winner", "opposite_coverage")}
    for j, k in _pairs(panel):
        for key, (joint, agree) in strata.items():
            nj, na = joint[:, j, k], agree[:, j, k]
            for a in np.flatnonzero(nj):
                vals[key][a].append(na[a] / nj[a])
        cells_opp, joint_opp = ac.opp_cells[:, j, k], ac.opp_joint[:, j, k]
        for a in np.flatnonzero(cells_opp):
            vals["opposite_coverage"][a].append(joint_opp[a] / cells_opp[a])
    return {name: {"all": mean_or_none(vals["all"][a]), "same_winner": mean_or_none(vals["same_winner"][a]),
                   "opposite_winner": mean_or_none(vals["opposite_winner"][a]),
                   "opposite_coverage": mean_or_none(vals["opposite_coverage"][a]),
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
        return {**{s: mean_or_none([per[n][s] for n in names]) for s in stats}, "n_attributes": len(names)}

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
    counts = panel.counts("stable")
    for j, k in _pairs(panel):
        v, c = pair_verdicts(panel, j, k, "stable"), counts.pair(j, k)
        usable = v.definite & (y != 0)
        vj, vk = v.vj, v.vk
        strata = {"both_match": usable & (vj == y) & (vk == y), "both_depart": usable & (vj == vk) & (vj != y),
                  "judges_disagree": usable & (vj != vk)}
        for n, rows in strata.items():
            a = acc[n]
            joint, agree = c.joint[rows].sum(), c.agree[rows].sum()
            a["n_items"] += int(rows.sum())
            a["agree"] += int(agree)
            a["joint"] += int(joint)
            a["cells"] += int(c.cells[rows].sum())
            if joint:
                a["pairs"].append(agree / joint)
    out = {n: {"n_items": a["n_items"], "n_cells": a["joint"], "agreement_pooled": rate_or_none(a["agree"], a["joint"]),
               "agreement_mean_over_pairs": mean_or_none(a["pairs"]), "coverage": rate_or_none(a["joint"], a["cells"]),
               "n_pairs": len(a["pairs"])} for n, a in acc.items()}
    return {**out, "n_labelled_items": int((y != 0).sum()), "n_ties_or_unlabelled": int((y == 0).sum())}


def _association_counts(panel: Panel, y: np.ndarray, group: np.ndarray, n_groups: int) -> tuple[np.ndarray, ...]:
    """(usable, hits, read), each (1 + G, J, A): per group of items (all labelled items pooled
    first, then ``group`` 0..G-1 of each item, -1 for none), judge and attribute, the labelled
    cells with a stable direction, those whose direction is the label, and the labelled cells read.
    The labelled items are put in group order once; each judge's counts are then segment sums of
    |d|, [d = y] and p over those rows (one pass over the judge's cells)."""
    rows = np.flatnonzero((y != 0) & (group >= 0))
    rows = rows[np.argsort(group[rows], kind="stable")]
    starts = np.searchsorted(group[rows], np.arange(n_groups))
    n_j, n_a = len(panel.judges), len(panel.attributes)
    usable, hits, read = (np.zeros((1 + n_groups, n_j, n_a), np.int64) for _ in range(3))
    lab = y[rows].astype(np.int8)[:, None]
    for j in range(n_j):
        s = panel.stable[j][rows, :-1]
        for out, cells in ((usable, s != 0), (hits, (s == lab) & (s != 0)), (read, panel.present[j][rows, :-1])):
            if len(rows):
                out[1:, j] = np.add.reduceat(cells, starts, axis=0, dtype=np.int64)
            out[0, j] = out[1:, j].sum(axis=0)
    return usable, hits, read


def _associations(attributes: list[str], n: np.ndarray, hits: np.ndarray, n_read: np.ndarray,
                  min_n: int) -> dict[str, Any]:
    """Per attribute, from the (J, A) counts of one group of items (``_association_counts``)."""
    out = {}
    for a, name in enumerate(attributes):
        entered = n[:, a] > min_n
        accs = hits[entered, a] / n[entered, a]
        cov = [float(u / r) for u, r in zip(n[:, a], n_read[:, a]) if r > 0]
        med = float(np.median(accs)) if len(accs) else None
        out[name] = {"median_accuracy": med,
                     "strength": float(np.median(np.abs(accs - 0.5))) if len(accs) else None,
                     "sign": None if med is None else ("+" if med >= 0.5 else "-"),
                     "coverage": mean_or_none(cov), "n_readers": int(entered.sum()),
                     "n_comparisons": int(n[entered, a].sum())}
    return dict(sorted(out.items(), key=lambda kv: -(kv[1]["strength"] if kv[1]["strength"] is not None else -1)))


def label_associations(panel: Panel, items: pd.DataFrame, *, min_n_source: int = 50,
                       min_n_pooled: int = 200) -> dict[str, Any]:
    y, src = label_vector(panel, items)
    sources = sorted(set(src[y != 0]))
    code = {s: n for n, s in enumerate(sources)}
    usable, hits, read = _association_counts(panel, y, np.array([code.get(s, -1) for s in src]), len(sources))
    out: dict[str, Any] = {"min_n_source": int(min_n_source), "min_n_pooled": int(min_n_pooled),
                           "pooled": _associations(panel.attributes, usable[0], hits[0], read[0], min_n_pooled),
                           "sources": {}}
    for g, source in enumerate(sources, start=1):
        out["sources"][source] = _associations(panel.attributes, usable[g], hits[g], read[g], min_n_source)
    return out


# -- report -----------------------------------------------------------------------------------------

def controls_markdown(res: dict[str, Any]) -> list[str]:
    """Markdown sections of the perception controls present in an analysis document."""
    return (_single_read_markdown(res.get("single_read_control")) + _kappa_markdown(res.get("three_category_kappa"))
            + _matched_items_markdown(res.get("matched_items")) + _no_conflict_markdown(res.get("no_conflict"))
            + _importance_markdown(res.get("attribute_importance"))
            + _difficulty_markdown(res.get("difficulty_strata"))
            + _label_associations_markdown(res.get("label_associations")))


def _cell(x: Any) -> str:
    """A figure as the control tables print it (n/a when missing)."""
    return num(x, missing="n/a")


def _single_read_markdown(sr: dict[str, Any] | None) -> list[str]:
    """Agreement per stratum under the stable and the single-read protocols, with coverage and pair spread."""
    if not sr:
        return []
    lines = ["## Stable and single-read protocols", "",
             "Single read: every direction and verdict read in order AB only (the paper's control, B.1). "
             "Agreement conditions on jointly resolved directions; coverage is the share of cells both "
             "judges read that both resolve. Opposite-winner spread: pairs' min, max, and pairs above 0.5.", ""]
    rows = []
    for protocol, st in sr.items():
        for key in STRATA:
            r = st[key]
            rows.append([protocol, key, _cell(r["mean"]), _cell(r["pooled"]), _cell(r.get("coverage")),
                         f"{_cell(r['min'])}-{_cell(r['max'])}", f"{r['n_above_half']}/{r['n_pairs']}"])
    return lines + table(["protocol", "stratum", "mean over pairs", "pooled", "coverage", "pair range",
                          "pairs > 0.5"], rows) + [""]


def _kappa_markdown(kap: dict[str, Any] | None) -> list[str]:
    """Cohen's kappa with abstention as a third category, per protocol, for the verdict and the attributes."""
    if not kap:
        return []
    lines = ["## Three-category kappa", "",
             "Cohen's kappa with abstention (direction 0) kept as a third category, on every cell both judges "
             "read; mean over judge pairs.", ""]
    return lines + table(["protocol", "verdict", "attributes", "pairs"],
                         [[p, _cell(k["overall"]), _cell(k["attribute"]), k["n_pairs"]] for p, k in kap.items()]) + [""]


def _matched_items_markdown(mi: dict[str, Any] | None) -> list[str]:
    """Verdict against attribute agreement on the same items, and the gap between them, per protocol."""
    if not mi:
        return []
    lines = ["## Matched items", "",
             "Per judge pair, items with two definite verdicts and at least one jointly resolved attribute; "
             "verdict agreement (one decision per item) against attribute agreement on the same items "
             "(pooled cells; item-averaged; "
             + (f"the {len(mi['core_attributes'])} core attributes present" if mi["core_attributes"]
                else "no core attribute in this panel") + "). Gap = attribute - verdict agreement.", ""]
    rows = [[p, _cell(m["overall"]), _cell(m["attribute"]), _cell(m["attribute_item_mean"]), _cell(m["core"]),
             _cell(m["gap"]), f"{m['n_pairs_positive_gap']}/{m['n_pairs']}",
             f"{m['n_judges_positive_gap']}/{m['n_judges']}"]
            for p, m in mi.items() if p in PROTOCOLS]
    return lines + table(["protocol", "verdict", "attribute (pooled)", "attribute (item mean)", "core", "gap",
                          "pairs with gap > 0", "judges with gap > 0"], rows) + [""]


def _no_conflict_markdown(nc: dict[str, Any] | None) -> list[str]:
    """How often winners differ on cases agreeing on at least N shared attributes, per threshold N."""
    if not nc:
        return []
    lines = ["## No-conflict subset", "",
             "(Judge pair, item) cases with two definite stable verdicts, at least N jointly resolved attributes "
             "and agreement on every one of them: how often do the winners still differ? Coverage = cases / "
             "items with two definite verdicts.", ""]
    return lines + table(["N shared attributes", "cases", "different winners", "rate", "coverage"],
                         [[t + (" (main)" if int(t) == nc["min_shared"] else ""), r["n_cases"], r["n_different_winner"],
                           _cell(r["different_winner_rate"]), _cell(r["coverage"])]
                          for t, r in nc["thresholds"].items()]) + [""]


def _importance_markdown(imp: dict[str, Any] | None) -> list[str]:
    """Agreement by quartile of fitted attribute importance, its correlation with opposite-winner agreement,
    and the attribute families."""
    if not (imp and imp.get("quartiles")):
        return []
    lines = ["## Agreement by fitted importance", "",
             "Importance: the mean over judges of |weight| / mean |weight| (own-perception fits). Agreement per "
             "attribute averages judge pairs equally, then the quartile averages its attributes (Q4 = most "
             "important).", ""]
    lines += table(["quartile", "attributes", "importance", "agreement (all)", "same winner", "opposite winner",
                    "opposite coverage"],
                   [[q, r["n_attributes"], _cell(r["importance"]), _cell(r["all"]), _cell(r["same_winner"]),
                     _cell(r["opposite_winner"]), _cell(r["opposite_coverage"])] for q, r in imp["quartiles"].items()])
    c = imp.get("importance_vs_opposite_agreement")
    if c:
        lines += ["", f"Across {c['n_attributes']} attributes, importance against opposite-winner agreement: "
                  f"Pearson {_cell(c['pearson'])}, Spearman {_cell(c['spearman'])}."]
    if imp.get("families"):
        lines += ["", *table(["family", "attributes", "importance", "opposite-winner agreement", "coverage"],
                             [[fam, r["n_attributes"], _cell(r["importance"]), _cell(r["opposite_winner"]),
                               _cell(r["opposite_coverage"])] for fam, r in imp["families"].items()])]
    return lines + [""]


def _difficulty_markdown(ds: dict[str, Any] | None) -> list[str]:
    """Attribute agreement on items where both judges match the reference label, both depart, or they disagree."""
    if not ds:
        return []
    lines = ["## Difficulty strata (reference labels)", "",
             f"{ds['n_labelled_items']} items with an A/B label ({ds['n_ties_or_unlabelled']} ties or unlabelled "
             "left out); item observations summed over judge pairs with two definite stable verdicts.", ""]
    return lines + table(["stratum", "item observations", "attribute agreement (pooled)", "mean over pairs",
                          "coverage"],
                         [[n.replace("_", " "), ds[n]["n_items"], _cell(ds[n]["agreement_pooled"]),
                           _cell(ds[n]["agreement_mean_over_pairs"]), _cell(ds[n]["coverage"])]
                          for n in ("both_match", "both_depart", "judges_disagree")]) + [""]


def _label_associations_markdown(la: dict[str, Any] | None) -> list[str]:
    """The top single-attribute associations with the reference labels, pooled and per source."""
    if not la:
        return []
    lines = ["## Single-attribute associations with the reference labels", "",
             "Accuracy of 'the response with more of the attribute wins' per reader (stable directions, A/B "
             f"labels); readers enter with more than {la['min_n_pooled']} usable comparisons pooled "
             f"({la['min_n_source']} per source). Strength = median |accuracy - 0.5|; top 15 by strength.", ""]
    rows = [[a, r["sign"] or "n/a", _cell(r["strength"]), _cell(r["median_accuracy"]), _cell(r["coverage"]),
             r["n_readers"]] for a, r in list(la["pooled"].items())[:15]]
    lines += table(["attribute", "sign", "strength", "median accuracy", "coverage", "readers"], rows)
    if la["sources"]:
        top = list(la["pooled"])[:8]
        lines += ["", "Median accuracy per source (the same attributes):", ""]
        lines += table(["source", *top], [[src, *(_cell(r[a]["median_accuracy"]) for a in top)]
                                          for src, r in la["sources"].items()])
    return lines + [""]
