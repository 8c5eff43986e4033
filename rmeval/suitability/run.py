"""One suitability audit end to end: build the perturbation suite, score it, and run the inference
of ``rmeval.stats.suitability`` per perturbation (paired confidence drop ΔM = M − M′, sign-flip
permutation test, group-aware Benjamini–Hochberg); ``finalize`` sets the margins and the
unsuitable flags once every model of a panel is in. Pairwise accuracy is 1{M > ½} (½ for M = ½),
on the original and on the perturbed items.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from rmcore.data.schema import RatingSet
from rmcore.errors import ConfigError, DataError
from rmcore.io import atomic_write_table
from rmeval.perturbations.suite import GROUPS, Item, build_suite, preference_items
from rmeval.scoring.base import Scorer
from rmeval.stats.suitability import (
    DEFAULT_B,
    DEFAULT_ETA,
    DEFAULT_Q,
    group_bh,
    mark_unsuitable,
    paired_effect,
    panel_margins,
    suitability_inference,
)
from rmeval.suitability.scoring import confidence_scorer, score_suite, suite_counts

RECORD_KEYS = ("group", "n", "mean_delta", "cohens_d", "t", "p_value", "rejected", "unsuitable")


@dataclass
class SuitabilitySettings:
    n_permutations: int = DEFAULT_B
    seed: int = 0
    q: float = DEFAULT_Q
    eta: float = DEFAULT_ETA
    margin: float | None = None  # None: the panel rule for several models, else 0
    weighting: str = "storey"  # storey | equal (plain BH)

    def validate(self) -> None:
        if self.n_permutations < 1:
            raise ConfigError(f"n_permutations must be >= 1, got {self.n_permutations}")
        if not 0 < self.q < 1:
            raise ConfigError(f"q must be in (0, 1), got {self.q}")
        if not 0 < self.eta < 1:
            raise ConfigError(f"eta must be in (0, 1), got {self.eta}")
        if self.weighting not in ("storey", "equal"):
            raise ConfigError(f"weighting must be storey or equal, got '{self.weighting}'")


def _accuracy(m: np.ndarray) -> float:
    return float(np.mean(np.where(m > 0.5, 1.0, np.where(m == 0.5, 0.5, 0.0)))) if len(m) else float("nan")


def infer(pairs: pd.DataFrame, settings: SuitabilitySettings, *, groups: Mapping[str, str] | None = None,
          counts: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Inference for one model's pairs table: {"perturbations": {spec: record}, "groups": ...}.
    Margins and ``unsuitable`` are set by ``finalize``."""
    settings.validate()
    groups = {**GROUPS, **(groups or {})}
    order = list(dict.fromkeys(pairs["perturbation"]))
    deltas, extra = {}, {}
    for spec in order:
        g = pairs[pairs["perturbation"] == spec]
        n_unchanged = 0
        if "changed" in g.columns:
            n_unchanged = int((~g["changed"]).sum())
            g = g[g["changed"]]
        mo, mp = g["m_original"].to_numpy(float), g["m_perturbed"].to_numpy(float)
        deltas[spec] = mo - mp
        acc_o, acc_p = _accuracy(mo), _accuracy(mp)
        extra[spec] = {"mean_m_original": float(mo.mean()) if len(mo) else float("nan"),
                       "mean_m_perturbed": float(mp.mean()) if len(mp) else float("nan"),
                       "accuracy_original": acc_o, "accuracy_perturbed": acc_p, "accuracy_change": acc_p - acc_o,
                       "n_unchanged": n_unchanged, **dict((counts or {}).get(spec, {}))}
    grp = {s: groups[s] if s in groups else groups[s.partition("@")[0]] for s in order}
    # fewer than 2 changed items: no test; reported, outside the BH family
    tested = [s for s in order if len(deltas[s]) >= 2]
    res = suitability_inference({s: deltas[s] for s in tested}, grp, n_permutations=settings.n_permutations,
                                seed=settings.seed, q=settings.q, eta=settings.eta, weighting=settings.weighting)
    for s in order:
        if s not in tested:
            res[s] = {"group": grp[s], **paired_effect(deltas[s]), "p_value": float("nan"), "rejected": False,
                      "stars": "", "weight": float("nan"), "note": "fewer than 2 changed items: not tested"}
    pv = np.array([res[s]["p_value"] for s in tested])
    pi0 = group_bh(pv, [grp[s] for s in tested], q=settings.q, eta=settings.eta,
                   weighting=settings.weighting)["pi0"] if tested else {}
    per = {s: {**res[s], **extra[s]} for s in order}
    return {"perturbations": per, "groups": {g: {"pi0": v} for g, v in pi0.items()}}


def finalize(results: dict[str, dict[str, Any]], settings: SuitabilitySettings) -> dict[str, Any]:
    """Margins (user-set, the panel rule for several models, else 0) and the unsuitable flags."""
    if settings.margin is not None:
        margins: Any = float(settings.margin)
        source = "user"
    elif len(results) > 1:
        margins = panel_margins({n: r["perturbations"] for n, r in results.items()})
        source = "panel"
    else:
        margins, source = 0.0, "default"
    for r in results.values():
        mark_unsuitable(r["perturbations"], margins)
        r["settings"] = {**settings_dict(settings), "m": margins, "margin_source": source}
    return {"margins": margins, "margin_source": source}


def settings_dict(s: SuitabilitySettings) -> dict[str, Any]:
    d = asdict(s)
    return {"B": d["n_permutations"], "seed": d["seed"], "q": d["q"], "eta": d["eta"], "m": d["margin"],
            "weighting": d["weighting"]}


def ordered_record(r: dict[str, Any]) -> dict[str, Any]:
    """The issue's keys first, the rest after."""
    return {**{k: r[k] for k in RECORD_KEYS}, **{k: v for k, v in r.items() if k not in RECORD_KEYS}}


def model_json(r: dict[str, Any], meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"perturbations": {s: ordered_record(v) for s, v in r["perturbations"].items()},
            "groups": r.get("groups", {}), "settings": r["settings"], "meta": dict(meta or r.get("meta", {}))}


def run_suitability(scorer: Scorer, rating_set: RatingSet, specs: list[str], *, settings: SuitabilitySettings,
                    items: list[Item] | None = None, rewriters: Mapping[str, Any] | None = None,
                    cache_path: str | os.PathLike | None = None, pairs_path: str | os.PathLike | None = None,
                    max_items: int | None = None, base_level: int = 0, attribute: str = "helpfulness",
                    controlled_options: Mapping[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Build the suite, score original and perturbed items, run the inference (margins are set by
    ``finalize``). The pairs table goes to ``pairs_path`` when given."""
    skipped: dict[str, int] = {}
    if items is None:
        items, sk = preference_items(rating_set, base_level=base_level, attribute=attribute, max_items=max_items)
        skipped = dict(sk)
    if not items:
        raise DataError(f"{rating_set.name}: no preference items to perturb (skipped: {skipped})")
    suite = build_suite(specs, items, rating_set=rating_set, seed=settings.seed, rewriters=dict(rewriters or {}),
                        options=dict(controlled_options or {}))
    counts = suite_counts(suite)
    cs, own_cache = confidence_scorer(scorer, cache_path)
    try:
        pairs = score_suite(cs, suite)
    finally:
        if own_cache:
            cs.cache.close()
    if pairs_path is not None:
        atomic_write_table(pairs_path, pairs)
    res = infer(pairs, settings, counts=counts)
    res["meta"] = {"data": rating_set.name, "n_items": len(items), "items_skipped": skipped,
                   "scorer": cs.kind, "truncation": dict(cs.truncation)}
    return res
