"""Structure of a model's vulnerabilities across perturbations (Reward Auditor, appendix B.3), and
the per-subset aggregation of a panel's audits (section 5.1.3, Figure 2).

- B.3.2, one model: the Spearman correlation matrix of the per-item differences ΔM across
  perturbations (items with a twin under every perturbation; a perturbation whose ΔM does not vary,
  e.g. one the scorer cannot see, has no correlation and is listed as excluded), and its
  hierarchical clustering: average linkage (UPGMA) on the distance 1 − ρ
  (``scipy.cluster.hierarchy.linkage``), leaves in dendrogram order;
- B.3.1, a panel: per model the suitability risk within each group of perturbations (sum of d over
  its unsuitable perturbations of that group), and the Spearman ρ across models between the
  groups' risks (does a model vulnerable to controlled perturbations also fail stylized ones?);
- per subset (RM-Bench's chat, math, code, safety-refuse, safety-response, or whichever are
  present), per perturbation: the share of the panel's models whose degradation is significant
  (p < α, raw p as the paper's radar) and the sum of their Cohen's d;
- B.4, Tables 3 and 4, a panel: per perturbation, across models, does suitability say what the
  accuracy change says? Spearman ρ (two-sided p) of the accuracy change (accuracy on the perturbed
  pairs minus on the originals) with Cohen's d (the text's reading of Table 3) and with the
  suitability p-value (its caption's), and the AUROC of the accuracy drop −Δacc as a score for
  "the suitability test is significant" (p < α; our reading of Table 4: 1 when every significant
  model drops more than every other, 0.5 chance, below 0.5 an inverse relation), the Mann–Whitney
  form AUROC = (#{drop_s > drop_n} + ½ #{drop_s = drop_n}) / (n_s n_n) over (significant,
  not significant) pairs; undefined when either class is empty.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from scipy.cluster.hierarchy import leaves_list, linkage
from scipy.spatial.distance import squareform

from rmcore.io.files import is_finite
from rmeval.stats.confidence_drop import DEFAULT_ALPHA


def difference_structure(deltas: pd.DataFrame, method: str = "average") -> dict[str, Any]:
    """``deltas``: one row per item, one column per perturbation (NaN: no twin). Returns {codes,
    n_items, spearman (code -> code -> ρ), linkage (scipy's (k−1) x 4 matrix), order (codes in
    dendrogram order), excluded (code -> reason)}; fewer than 2 usable codes give no matrix."""
    excluded: dict[str, str] = {}
    cols = []
    for c in deltas.columns:
        x = deltas[c].dropna()
        if len(x) < 3:
            excluded[str(c)] = "fewer than 3 items"
        elif np.ptp(x.to_numpy(float)) == 0:
            excluded[str(c)] = "ΔM does not vary (the scorer's input is unchanged)"
        else:
            cols.append(c)
    complete = deltas[cols].dropna()
    # a column can become constant on the complete cases
    for c in list(cols):
        if len(complete) < 3 or np.ptp(complete[c].to_numpy(float)) == 0:
            excluded[str(c)] = "ΔM does not vary on the items every perturbation has"
            cols.remove(c)
    complete = complete[cols]
    out: dict[str, Any] = {"codes": [str(c) for c in cols], "n_items": int(len(complete)), "excluded": excluded,
                           "spearman": {}, "linkage": [], "order": [str(c) for c in cols]}
    if len(cols) < 2:
        return out
    r = stats.spearmanr(complete.to_numpy(float)).statistic  # two columns: one coefficient
    rho = np.array([[1.0, r], [r, 1.0]]) if len(cols) == 2 else np.asarray(r)
    out["spearman"] = {str(a): {str(b): float(rho[i, j]) for j, b in enumerate(cols)} for i, a in enumerate(cols)}
    dist = np.clip(1.0 - rho, 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    z = linkage(squareform(dist, checks=False), method=method)
    out["linkage"] = z.tolist()
    out["order"] = [str(cols[i]) for i in leaves_list(z)]
    return out


def group_risk_correlation(models: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Per model the risk within each group (sum of ``risk`` of its perturbations), and Spearman ρ
    (two-sided p) across models for every pair of groups; needs 3 models and varying risks."""
    groups = list(dict.fromkeys(r["group"] for per in models.values() for r in per.values()))
    risk = {n: {g: float(sum(r.get("risk", 0.0) for r in per.values() if r["group"] == g)) for g in groups}
            for n, per in models.items()}
    pairs = {}
    for a, b in itertools.combinations(groups, 2):
        x = np.array([risk[n][a] for n in models])
        y = np.array([risk[n][b] for n in models])
        rho = p = float("nan")
        if len(models) >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0:
            res = stats.spearmanr(x, y)
            rho, p = float(res.statistic), float(res.pvalue)
        pairs[f"{a} vs {b}"] = {"spearman": rho, "p_value": p, "n_models": len(models)}
    return {"risk_by_group": risk, "pairs": pairs}


def subset_summary(per_subset: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]],
                   alpha: float = DEFAULT_ALPHA) -> dict[str, dict[str, dict[str, Any]]]:
    """``per_subset[subset][model][code]`` records (``p_value``, ``cohens_d``) -> per subset and
    code: share_significant (share of the models that tested the code with p < α), sum_d (sum of
    their finite d), n_models (models that tested it)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for subset, models in per_subset.items():
        codes = list(dict.fromkeys(c for per in models.values() for c in per))
        out[subset] = {}
        for c in codes:
            # records read back from strict JSON hold None where a figure was not finite
            recs = [per[c] for per in models.values() if c in per and is_finite(per[c]["p_value"])]
            sig = [float(r["p_value"]) < alpha for r in recs]
            ds = [float(r["cohens_d"]) for r in recs if is_finite(r["cohens_d"])]
            out[subset][c] = {"share_significant": float(np.mean(sig)) if sig else float("nan"),
                              "sum_d": float(np.sum(ds)) if ds else float("nan"), "n_models": len(recs)}
    return out


def auroc(score: np.ndarray, positive: np.ndarray) -> float:
    """P(score of a positive > score of a negative) + ½ P(tie), over every (positive, negative)
    pair; NaN when either class is empty."""
    x, y = np.asarray(score, dtype=np.float64), np.asarray(positive, dtype=bool)
    pos, neg = x[y], x[~y]
    if not len(pos) or not len(neg):
        return float("nan")
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def _number(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _spearman(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    res = stats.spearmanr(x, y)
    return float(res.statistic), float(res.pvalue)


def accuracy_agreement(models: Mapping[str, Mapping[str, Mapping[str, Any]]],
                       alpha: float = DEFAULT_ALPHA) -> dict[str, dict[str, Any]]:
    """``models[model][code]`` records (``cohens_d``, ``p_value``, ``accuracy_change``) -> per code
    (module doc, B.4): spearman_d, p_spearman_d, spearman_p, p_spearman_p, auroc, n_models (with
    all three finite), n_significant."""
    codes = list(dict.fromkeys(c for per in models.values() for c in per))
    out: dict[str, dict[str, Any]] = {}
    for c in codes:
        # a figure not defined is null once read back from strict JSON (rmcore.io.files.to_json), NaN in memory
        keys = ("cohens_d", "p_value", "accuracy_change")
        rows = [vals for per in models.values() if (r := per.get(c)) is not None
                and np.isfinite(vals := tuple(_number(r.get(k)) for k in keys)).all()]
        d, p, acc = (np.array(v, dtype=np.float64) for v in zip(*rows)) if rows else (np.zeros(0),) * 3
        rho_d, p_d = _spearman(d, acc)
        rho_p, p_p = _spearman(p, acc)
        out[c] = {"spearman_d": rho_d, "p_spearman_d": p_d, "spearman_p": rho_p, "p_spearman_p": p_p,
                  "auroc": auroc(-acc, p < alpha), "n_models": len(rows), "n_significant": int((p < alpha).sum())}
    return out
