"""The suitability audit of checkpoints (Reward Auditor): the settings it takes, the suitability
step of an audit, and the audit of a list of checkpoints (``rmeval suitability``).

A model is suitable for a perturbation when its confidence in the preferred response does not drop
once the pair is perturbed; ``rmeval.suitability`` holds the inference (sign-flip permutation
test per perturbation, group-aware BH across them, an effect-size margin). The margin of one
model is 0 unless given; with several models it is the panel rule, which needs every model's
results before any verdict, so ``audit_checkpoints`` scores them all, then finalizes, then writes."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from rmcore.data.schema import RatingSet, pick_attribute
from rmcore.io.files import is_finite
from rmcore.runtime.checkpoints import display_name, provenance, training_max_length
from rmcore.runtime.wandb_log import DEFAULT_PROJECT
from rmeval.scoring import Scorer, ScorerSettings, load_scorer
from rmeval.suitability import (
    SuitabilitySettings,
    finalize,
    infer,
    log_suitability,
    read_pairs,
    run_suitability,
    write_suitability,
)
from rmeval.suitability.settings import SuitabilityAuditSettings
from rmeval.tracking import evaluation_tracker

__all__ = ["SuitabilityAuditSettings", "audit_checkpoints", "audit_suitability", "suitability_from_pairs",
           "suitability_line"]


def suitability_line(name: str, res: dict[str, Any], dest: str | os.PathLike) -> str:
    """One line per model, titled as its report is (a checkpoint's arm and seed, ``display_name``,
    else ``name``): Cohen's d, stars and verdict of each perturbation, and the risk."""
    def part(code: str, r: dict[str, Any]) -> str:
        if not is_finite(r["p_value"]):
            return f"{code} not tested"
        return f"{code} d={r['cohens_d']:.2f}{r['stars']}" + (" UNSUITABLE" if r["unsuitable"] else "")

    parts = [part(s, r) for s, r in res["perturbations"].items()]
    risk = res.get("suitability_risk")
    checkpoint = res["meta"].get("checkpoint")
    title = display_name(name, checkpoint) if checkpoint else name
    return (f"{title}: suitability on {res['meta'].get('n_items')} items: " + "; ".join(parts)
            + (f"; risk {risk:.2f}" if risk is not None else "") + f" -> {dest}")


def _run_one(scorer: Scorer, rating_set: RatingSet, settings: SuitabilityAuditSettings, specs: list[str],
             dest: Path, rewriters: dict[str, Any], *, seed: int, attribute: str | None,
             cache_path: str | os.PathLike | None, checkpoint: str | os.PathLike | None,
             data: str | dict[str, Any] | None, progress: bool = True) -> dict[str, Any]:
    """One model's suite scored and its inference (no margin yet), its pairs table in ``dest``
    (``progress``: the scoring's count on stderr)."""
    res = run_suitability(scorer, rating_set, specs, settings=settings.inference(seed), rewriters=rewriters,
                          cache_path=cache_path, pairs_path=dest / "suitability_pairs.parquet",
                          max_items=settings.max_items, base_level=settings.base_level,
                          attribute=pick_attribute(rating_set.attributes, attribute), judge_style=settings.judge_style,
                          judge_explain_tokens=settings.judge_explain_tokens, progress=progress)
    res["meta"]["placement"] = scorer.describe()  # device, dtype, attention kernel, loader
    res["meta"]["max_length"] = getattr(scorer, "max_length", None)  # tokens per text, as scored
    if checkpoint is not None:
        res["meta"].update({"checkpoint": str(checkpoint), "data": settings.data or data,
                            "training_max_length": training_max_length(checkpoint), **provenance(checkpoint)})
    return res


def audit_suitability(scorer: Scorer, rating_set: RatingSet, settings: SuitabilityAuditSettings,
                      out: str | os.PathLike, *, name: str, title: str, seed: int = 0, attribute: str | None = None,
                      cache_path: str | os.PathLike | None = None, checkpoint: str | os.PathLike | None = None,
                      data: str | dict[str, Any] | None = None,
                      progress: bool = True) -> tuple[dict[str, dict[str, Any]], dict[str, Path]]:
    """The suitability step of an audit: one model's suitability on the preference set
    ``rating_set`` (``settings.rating_set`` resolves it), written to ``out`` (suitability.json/.md/.png
    and the pairs table); returns ({name: results}, paths) for the audit record and its W&B run. A
    checkpoint's report is titled by its arm and seed (``display_name``), else by ``title``."""
    out = Path(out)
    res = _run_one(scorer, rating_set, settings, settings.specs(rating_set), out, settings.rewriters(out, seed),
                   seed=seed, attribute=attribute, cache_path=cache_path, checkpoint=checkpoint, data=data,
                   progress=progress)
    results = {name: res}
    finalize(results, settings.inference(seed))
    if checkpoint is not None:
        title = f"Suitability of {display_name(name, checkpoint)}"
    return results, write_suitability(results, out, title=title)


def audit_checkpoints(checkpoints: list[tuple[str, Path]], rating_set: RatingSet, scorer: ScorerSettings,
                      settings: SuitabilityAuditSettings, out: str | os.PathLike, *, seed: int = 0,
                      attribute: str | None = None, data: str | None = None, cache: str | None = None,
                      wandb_project: str | None = None, wandb_mode: str | None = None, wandb_group: str | None = None,
                      progress: bool = True) -> tuple[dict[str, dict[str, Any]], dict[str, Path] | None]:
    """Suitability of each (name, checkpoint) on ``rating_set``, into OUT (one checkpoint) or
    OUT/<name>/, each with its W&B run (in its training run's project and group unless
    ``wandb_project`` / ``wandb_group`` name others: ``rmeval.tracking``); with several, their margins by the
    panel rule and a joint report in OUT. Returns (results by name, the joint report's paths or None).
    ``progress``: the scoring's count on stderr."""
    out = Path(out)
    specs = settings.specs(rating_set)
    inference = settings.inference(seed)
    rewriters = settings.rewriters(out, seed)
    single = len(checkpoints) == 1
    results: dict[str, dict[str, Any]] = {}
    for name, ckpt in checkpoints:
        dest = out if single else out / name
        model = load_scorer(replace(scorer, model=str(ckpt)))
        try:
            results[name] = _run_one(model, rating_set, settings, specs, dest, rewriters, seed=seed,
                                     attribute=attribute,
                                     cache_path=Path(cache) if cache else dest / "score_cache.sqlite",
                                     checkpoint=ckpt, data=data, progress=progress)
        finally:
            model.close()
    finalize(results, inference)  # margins need every model (the panel rule)
    labels = {name: display_name(name, ckpt) for name, ckpt in checkpoints}
    for name, ckpt in checkpoints:
        dest = out if single else out / name
        paths = write_suitability({name: results[name]}, dest, title=f"Suitability of {labels[name]}", labels=labels)
        tracker = evaluation_tracker(f"suitability-{name}", dest, {"checkpoint": str(ckpt), "data": data,
                                                                   "perturbations": specs, **results[name]["settings"]},
                                     checkpoint=ckpt, project=wandb_project, group=wandb_group, mode=wandb_mode)
        try:
            log_suitability(tracker, {name: results[name]}, paths)
        finally:
            tracker.finish()
    joint = None if single else write_suitability(results, out, title=f"Suitability of {len(results)} checkpoints",
                                                  labels=labels)
    return results, joint


def suitability_from_pairs(pairs_path: str | os.PathLike, settings: SuitabilitySettings, out: str | os.PathLike, *,
                           groups: dict[str, str] | None = None, wandb_project: str = DEFAULT_PROJECT,
                           wandb_mode: str | None = None) -> tuple[dict[str, dict[str, Any]], dict[str, Path]]:
    """The inference alone on precomputed confidences (rows item_id, perturbation, m_original,
    m_perturbed [, model, changed]): one result per model, written to OUT with its W&B run."""
    pairs = read_pairs(pairs_path, groups, metric=settings.metric)
    stem = Path(pairs_path).stem
    if "model" in pairs.columns:
        results = {str(m): infer(g.drop(columns="model"), settings, groups=groups)
                   for m, g in pairs.groupby("model", sort=False)}
    else:
        results = {stem: infer(pairs, settings, groups=groups)}
    for r in results.values():
        r["meta"] = {"pairs": str(pairs_path)}
    finalize(results, settings)
    paths = write_suitability(results, out, title=f"Suitability from {Path(pairs_path).name}")
    tracker = evaluation_tracker(f"suitability-stats-{stem}", out,
                                 {"pairs": str(pairs_path), **next(iter(results.values()))["settings"]},
                                 project=wandb_project, mode=wandb_mode)
    try:
        log_suitability(tracker, results, paths)
    finally:
        tracker.finish()
    return results, paths
