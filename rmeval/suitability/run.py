"""One suitability audit end to end: build the perturbation suite, score it, and run the inference
of ``rmeval.stats.confidence_drop`` per perturbation (paired confidence drop ΔM = M − M′ over every item,
sign-flip permutation test, group-aware Benjamini–Hochberg); ``finalize`` sets the margins, the
unsuitable flags and the suitability risk once every model of a panel is in, and the panel-level
analyses (per-subset radar summary, group-risk correlation, agreement of the B.1 tests).

The metric M (``metric``): ``log_confidence`` (default), log σ(r_c − r_r) as Reward Auditor's
released code tests it (for a judge, the log of its averaged verdict probability), or
``confidence``, σ(r_c − r_r). Pairwise accuracy is 1{σ > ½} (½ at σ = ½), on the original items and
on the perturbed set, where an unchanged twin keeps its original's confidence.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rmcore.data.schema import RatingSet
from rmcore.errors import ConfigError, DataError
from rmcore.io.files import is_finite
from rmcore.io.tables import atomic_write_table
from rmeval.perturbations.suite import GROUPS, Item, build_suite, preference_items
from rmeval.scoring.base import Scorer
from rmeval.stats.confidence_drop import (
    DEFAULT_ALPHA,
    DEFAULT_B,
    DEFAULT_ETA,
    DEFAULT_Q,
    PROCEDURES,
    WEIGHTINGS,
    mark_unsuitable,
    panel_margins,
    suitability_inference,
)
from rmeval.stats.confidence_drop_robustness import method_agreement, robustness
from rmeval.stats.confidence_drop_structure import (
    accuracy_agreement,
    difference_structure,
    group_risk_correlation,
    subset_summary,
)
from rmeval.suitability.scoring import confidence_scorer, score_suite, suite_counts

RECORD_KEYS = ("group", "n", "mean_delta", "cohens_d", "t", "p_value", "rejected", "unsuitable")
METRICS = ("log_confidence", "confidence")
METRIC_COLUMNS = {"confidence": ("m_original", "m_perturbed"),
                  "log_confidence": ("log_m_original", "log_m_perturbed")}


@dataclass
class SuitabilitySettings:
    n_permutations: int = DEFAULT_B
    seed: int = 0
    q: float = DEFAULT_Q
    eta: float = DEFAULT_ETA
    margin: float | None = None  # None: the panel rule for several models, else 0
    weighting: str | None = None  # storey | fixed | equal; None: fixed with null_share, else storey
    null_share: dict[str, float] | None = None  # fixed null share per group, in (0, 1]
    alpha: float = DEFAULT_ALPHA  # level of the panel rule and of the per-subset share significant
    metric: str = "log_confidence"  # log_confidence | confidence
    robustness: bool = True  # the B.1 tests and the B.3 structure per model
    procedure: str = "paper"  # whose decisions `rejected` shows: paper | released (both are kept)

    @property
    def mode(self) -> str:
        return self.weighting or ("fixed" if self.null_share else "storey")

    def validate(self) -> None:
        def finite(name: str, v: Any) -> float:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ConfigError(f"{name} must be a finite number, got {v!r}")
            return float(v)

        if isinstance(self.n_permutations, bool) or not isinstance(self.n_permutations, int) or self.n_permutations < 1:
            raise ConfigError(f"n_permutations must be a whole number >= 1, got {self.n_permutations!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed must be a whole number >= 0, got {self.seed!r}")
        for name in ("q", "eta", "alpha"):
            if not 0 < finite(name, getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be in (0, 1), got {getattr(self, name)}")
        if self.margin is not None and finite("margin", self.margin) < 0:
            raise ConfigError(f"margin must be >= 0 (an effect size), got {self.margin}")
        if self.weighting is not None and self.weighting not in WEIGHTINGS:
            raise ConfigError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got '{self.weighting}'")
        if self.null_share:
            if self.mode != "fixed":
                raise ConfigError(f"null shares are fixed by --null-share only with weighting fixed, not '{self.mode}'")
            for g, v in self.null_share.items():
                if not str(g).strip():
                    raise ConfigError("a null share needs a group name (GROUP=Q)")
                if not 0 < finite(f"null share of group '{g}'", v) <= 1:
                    raise ConfigError(f"null share of group '{g}' must be in (0, 1], got {v}")
        elif self.mode == "fixed":
            raise ConfigError("weighting fixed needs the null shares (--null-share GROUP=Q ...)")
        if self.metric not in METRICS:
            raise ConfigError(f"metric must be one of {', '.join(METRICS)}, got '{self.metric}'")
        if self.procedure not in PROCEDURES:
            raise ConfigError(f"procedure must be one of {', '.join(PROCEDURES)}, got '{self.procedure}'")


def _accuracy(m: np.ndarray) -> float:
    return float(np.mean(np.where(m > 0.5, 1.0, np.where(m == 0.5, 0.5, 0.0)))) if len(m) else float("nan")


def metric_values(pairs: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(M, M′) of each row on ``metric``; the log of a confidence column when a table has no log
    columns (validated upstream: no confidence of 0 then)."""
    lo, lp = METRIC_COLUMNS[metric]
    if lo in pairs.columns:
        return pairs[lo].to_numpy(float), pairs[lp].to_numpy(float)
    with np.errstate(divide="ignore"):
        return np.log(pairs["m_original"].to_numpy(float)), np.log(pairs["m_perturbed"].to_numpy(float))


def infer(pairs: pd.DataFrame, settings: SuitabilitySettings, *, groups: Mapping[str, str] | None = None,
          counts: Mapping[str, Mapping[str, Any]] | None = None, extras: bool = True) -> dict[str, Any]:
    """Inference for one model's pairs table: {"perturbations": {spec: record}, "groups": ...,
    "structure", "subsets"}. Margins and ``unsuitable`` are set by ``finalize``. ``extras``: the
    B.1/B.3 analyses (when ``settings.robustness``) and, with two subsets or more, the inference per
    subset (each its own BH family)."""
    settings.validate()
    groups = {**GROUPS, **(groups or {})}
    unknown = sorted(set(settings.null_share or {}) - set(groups.values()))
    if unknown:
        raise ConfigError(f"--null-share names group(s) {unknown} that no perturbation belongs to; groups: "
                          f"{', '.join(sorted(set(groups.values())))}")
    order = list(dict.fromkeys(pairs["perturbation"]))
    items = list(dict.fromkeys(pairs["item_id"]))
    m_o, m_p = metric_values(pairs, settings.metric)
    frame = pd.DataFrame({"item_id": pairs["item_id"].to_numpy(), "perturbation": pairs["perturbation"].to_numpy(),
                          "mo": m_o, "mp": m_p, "delta": m_o - m_p, "c_o": pairs["m_original"].to_numpy(float),
                          "c_p": pairs["m_perturbed"].to_numpy(float),
                          "changed": (pairs["changed"].to_numpy(bool) if "changed" in pairs.columns
                                      else np.ones(len(pairs), dtype=bool))})
    deltas, changed, extra = {}, {}, {}
    for spec in order:
        g = frame[frame["perturbation"] == spec].set_index("item_id").reindex(items)
        ok = g["delta"].notna().to_numpy()
        ch = g["changed"].fillna(False).to_numpy(bool) & ok
        deltas[spec], changed[spec] = g["delta"].to_numpy(float), ch
        c_o = g["c_o"].to_numpy(float)[ok]
        c_p = np.where(ch, g["c_p"].to_numpy(float), g["c_o"].to_numpy(float))[ok]  # unchanged: its original
        acc_o, acc_p = _accuracy(c_o), _accuracy(c_p)
        cnt = dict((counts or {}).get(spec, {}))
        text_changed = cnt.pop("n_changed", None)
        cnt.pop("n_unchanged", None)
        mo = g["mo"].to_numpy(float)[ok]
        mp = np.where(ch, g["mp"].to_numpy(float), g["mo"].to_numpy(float))[ok]
        extra[spec] = {"n_unchanged": int(ok.sum() - ch.sum()),
                       "mean_m_original": float(mo.mean()) if ok.any() else float("nan"),
                       "mean_m_perturbed": float(mp.mean()) if ok.any() else float("nan"),
                       "accuracy_original": acc_o, "accuracy_perturbed": acc_p, "accuracy_change": acc_p - acc_o,
                       **cnt}
        if text_changed is not None:  # texts the suite changed that the scorer reads as its original
            extra[spec]["n_invisible"] = int(text_changed) - int(ch.sum())
    grp = {s: groups[s] if s in groups else groups[s.partition("@")[0]] for s in order}
    res = suitability_inference(deltas, grp, changed=changed, n_permutations=settings.n_permutations,
                                seed=settings.seed, q=settings.q, eta=settings.eta, weighting=settings.mode,
                                fixed=settings.null_share, procedure=settings.procedure)
    per = {s: {**res["perturbations"][s], **extra[s]} for s in order}
    out: dict[str, Any] = {"perturbations": per, "groups": res["groups"], "bh_k": res["k"],
                           "decisions": res["decisions"]}
    if extras and settings.robustness:
        tested = [s for s in order if is_finite(per[s]["p_value"])]
        rob = robustness(deltas, changed, n_permutations=settings.n_permutations, seed=settings.seed, tested=tested)
        for s, r in rob.items():
            per[s]["robustness"] = {"p_permutation_t": per[s]["p_value"], **r}
        zeroed = pd.DataFrame({s: np.where(changed[s], deltas[s], np.where(np.isnan(deltas[s]), np.nan, 0.0))
                               for s in order}, index=items)
        out["structure"] = difference_structure(zeroed)
    if extras and "subset" in pairs.columns and pairs["subset"].nunique() > 1:
        out["subsets"] = {str(sub): infer(g.drop(columns="subset"), settings, groups=groups, extras=False)
                          for sub, g in pairs.groupby("subset", sort=False)}
    return out


def _margins(per_model: dict[str, dict[str, Any]], settings: SuitabilitySettings) -> tuple[Any, str]:
    if settings.margin is not None:
        return float(settings.margin), "user"
    if len(per_model) > 1:
        return panel_margins(per_model, settings.alpha), "panel"
    return 0.0, "default"


def finalize(results: dict[str, dict[str, Any]], settings: SuitabilitySettings) -> dict[str, Any]:
    """Margins (user-set; the panel rule m = max{d : p ≥ α} for several models; else 0), the
    unsuitable flags and suitability risk of every model (and of every subset), and the panel-level
    analyses; returns the panel record (also under each result's ``panel``)."""
    margins, source = _margins({n: r["perturbations"] for n, r in results.items()}, settings)
    for r in results.values():
        r["suitability_risk"] = mark_unsuitable(r["perturbations"], margins)
        r["settings"] = {**settings_dict(settings), "m": margins, "margin_source": source}
    panel: dict[str, Any] = {"margins": margins, "margin_source": source}
    subsets = list(dict.fromkeys(s for r in results.values() for s in r.get("subsets", {})))
    if subsets:
        per_subset = {}
        for sub in subsets:
            models = {n: r["subsets"][sub] for n, r in results.items() if sub in r.get("subsets", {})}
            m_sub, src = _margins({n: x["perturbations"] for n, x in models.items()}, settings)
            for x in models.values():
                x["suitability_risk"] = mark_unsuitable(x["perturbations"], m_sub)
                x["margins"], x["margin_source"] = m_sub, src
            per_subset[sub] = {n: x["perturbations"] for n, x in models.items()}
        panel["subsets"] = subset_summary(per_subset, settings.alpha)
    cells = [{"model": n, "perturbation": s, **v["robustness"]} for n, r in results.items()
             for s, v in r["perturbations"].items() if "robustness" in v]
    if cells:
        panel["method_agreement"] = method_agreement(cells)
        # Figures 5 and 6: per perturbation, across the models
        panel["method_agreement_by_perturbation"] = {
            s: method_agreement([c for c in cells if c["perturbation"] == s])
            for s in dict.fromkeys(c["perturbation"] for c in cells)}
    if len(results) > 1:
        per_model = {n: r["perturbations"] for n, r in results.items()}
        panel["group_risk"] = group_risk_correlation(per_model)
        panel["accuracy_agreement"] = accuracy_agreement(per_model, settings.alpha)  # B.4, Tables 3 and 4
    for r in results.values():
        r["panel"] = panel
    return panel


def settings_dict(s: SuitabilitySettings) -> dict[str, Any]:
    return {"B": s.n_permutations, "seed": s.seed, "q": s.q, "eta": s.eta, "m": s.margin, "weighting": s.mode,
            "null_share": dict(s.null_share or {}), "alpha": s.alpha, "metric": s.metric, "procedure": s.procedure}


def ordered_record(r: dict[str, Any]) -> dict[str, Any]:
    """The issue's keys first, the rest after."""
    return {**{k: r[k] for k in RECORD_KEYS}, **{k: v for k, v in r.items() if k not in RECORD_KEYS}}


def model_json(r: dict[str, Any], meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    out = {"perturbations": {s: ordered_record(v) for s, v in r["perturbations"].items()},
           "suitability_risk": r.get("suitability_risk"), "groups": r.get("groups", {}),
           "decisions": r.get("decisions", {}), "settings": r["settings"], "meta": dict(meta or r.get("meta", {}))}
    if "structure" in r:
        out["structure"] = r["structure"]
    if "subsets" in r:
        out["subsets"] = {sub: {"perturbations": {s: ordered_record(v) for s, v in x["perturbations"].items()},
                                "suitability_risk": x.get("suitability_risk"), "groups": x.get("groups", {}),
                                "decisions": x.get("decisions", {}), "margins": x.get("margins")}
                          for sub, x in r["subsets"].items()}
    return out


def subset_of(rating_set: RatingSet) -> dict[str, str]:
    """prompt_id -> subset: RM-Bench's file stem (chat, math, code, safety-refuse, safety-response),
    a Reward Auditor file's task prefix, else the prompt's ``subset``; empty when no prompt has one."""
    from pathlib import Path

    out = {}
    for p in rating_set.prompts:
        dom = p.meta.get("domain")
        if dom is None and p.source == "rm_bench" and p.meta.get("source_file"):
            dom = Path(str(p.meta["source_file"])).name.split(".")[0].removesuffix("_filtered")
        if dom is None:
            dom = p.meta.get("subset")
        if dom:
            out[p.prompt_id] = str(dom)
    return out if len(out) == len(rating_set.prompts) else {}


def run_suitability(scorer: Scorer, rating_set: RatingSet, specs: list[str], *, settings: SuitabilitySettings,
                    items: list[Item] | None = None, rewriters: Mapping[str, Any] | None = None,
                    cache_path: str | os.PathLike | None = None, pairs_path: str | os.PathLike | None = None,
                    max_items: int | None = None, base_level: int = 0, attribute: str = "helpfulness",
                    controlled_options: Mapping[str, dict[str, Any]] | None = None,
                    judge_style: str = "verdict", judge_explain_tokens: int = 256,
                    progress: bool = True) -> dict[str, Any]:
    """Build the suite, score original and perturbed items, run the inference (margins are set by
    ``finalize``). The pairs table goes to ``pairs_path`` when given; ``progress``: the scoring's
    count on stderr."""
    skipped: dict[str, int] = {}
    if items is None:
        items, sk = preference_items(rating_set, base_level=base_level, attribute=attribute, max_items=max_items)
        skipped = dict(sk)
    if not items:
        raise DataError(f"{rating_set.name}: no preference items to perturb (skipped: {skipped})")
    suite = build_suite(specs, items, rating_set=rating_set, seed=settings.seed, rewriters=dict(rewriters or {}),
                        options=dict(controlled_options or {}))
    counts = suite_counts(suite)
    cs, own_cache = confidence_scorer(scorer, cache_path, judge_style=judge_style,
                                      judge_explain_tokens=judge_explain_tokens)
    try:
        pairs = score_suite(cs, suite, progress=progress)
    finally:
        if own_cache:
            cs.cache.close()
    subsets = subset_of(rating_set)
    if subsets:
        prompt_of = {it.item_id: it.prompt_id for it in items}
        pairs["subset"] = [subsets[prompt_of[i]] for i in pairs["item_id"]]
    if pairs_path is not None:
        atomic_write_table(pairs_path, pairs)
    res = infer(pairs, settings, counts=counts)
    res["meta"] = {"data": rating_set.name, "n_items": len(items), "rows_skipped": dict(rating_set.skipped),
                   "items_skipped": skipped,
                   "scorer": cs.kind, "truncation": dict(cs.truncation)}
    if cs.scores_pairs:
        res["meta"]["judge_style"] = judge_style
    return res
