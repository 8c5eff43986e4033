"""JudgeProfile end to end, one call per step: elicit a judge's attribute and overall verdicts on
an items table (sharded, cached, resumable), analyze a judgments table (agreement, consistency,
position bias, priority weights and the paper's controls), and reweight attributes toward reference labels
(with the rubric and LoRA baselines under the same label budgets). ``rmeval judges`` is a thin layer over
these; the steps' settings are ``rmeval.judges.settings``'. The judge itself (``rmeval.judges.elicit``: torch)
and the data loaders load when an elicitation starts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmcore.errors import ConfigError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.io.tables import atomic_write_table
from rmcore.runtime.wandb_log import DEFAULT_PROJECT, Tracker, flatten
from rmeval.tracking import evaluation_tracker

from .analysis import analysis_markdown, analyze
from .baselines import run_baselines
from .inventory import load_inventory
from .plots import analysis_plots, plots_not_drawn, weight_profiles
from .reweight import reweight, reweight_markdown
from .settings import AnalysisSettings, BaselineSettings, ElicitSettings, ExecutorSettings, ReweightSettings
from .shards import run_shards, submitit_executor
from .store import load_store
from .tables import load_items

__all__ = ["ElicitSettings", "ExecutorSettings", "ReweightSettings", "analyze_judgments", "prepare_items",
           "reweight_judgments", "run_elicit"]


def prepare_items(cfg: ElicitSettings) -> tuple[Path, dict[str, dict[str, int]]]:
    """The items file: --items as given, or OUT/items.jsonl built from --data preference sets (each
    spec one source; the same seed gives the same file, so a restarted run sees the same items);
    and the rows each source's loader skipped (``on_bad=skip``), by reason."""
    # scipy, the data sets' loaders: only an elicitation from --data reads them
    from rmcore.data.loading import load_data, parse_data_spec

    # torch: only an elicitation loads the judge
    from .elicit import items_from_rating_set

    if cfg.items:
        load_items(cfg.items)  # fail early on a bad row
        return Path(cfg.items), {}
    if not cfg.data:
        raise ConfigError("give --items FILE or at least one --data SPEC")
    frames, skipped = [], {}
    for k, spec in enumerate(cfg.data):
        rs = load_data(spec)
        if not rs.preferences:
            raise ConfigError(f"--data {spec}: no preference pairs (use a preference set such as hh_rlhf or rm_bench)")
        parsed = parse_data_spec(spec)
        source = rs.name or parsed["name"]
        if parsed.get("path"):
            source = f"{parsed['name']}:{Path(parsed['path']).name.split('.')[0]}"
        frames.append(items_from_rating_set(rs, source, limit=cfg.max_items_per_source, seed=cfg.seed + k))
        if rs.skipped:
            skipped[source] = {reason: int(n) for reason, n in sorted(rs.skipped.items())}
    return atomic_write_table(Path(cfg.out) / "items.jsonl", pd.concat(frames, ignore_index=True)), skipped


def run_elicit(cfg: ElicitSettings) -> dict[str, Any]:
    # torch: only an elicitation loads the judge
    from .elicit import ElicitJob, merge_shards, questions_for

    spec = cfg.judge_spec()  # the judge and the attributes are checked before OUT/items.jsonl is written
    if cfg.model:
        # torch: only a local judge needs it
        from rmcore.models.modeling import check_model_name

        check_model_name(cfg.model, "--model")  # a local path, or a Hub id that exists
    attrs = load_inventory(cfg.attributes, extend=cfg.extend_attributes, names=cfg.attribute_names or None)
    questions = questions_for(attrs, overall=cfg.overall)
    items_path, skipped = prepare_items(cfg)
    shards = [cfg.shard] if cfg.shard is not None else list(range(cfg.n_shards))
    jobs = [ElicitJob(str(items_path), spec, questions, cfg.out, shard=i, n_shards=cfg.n_shards,
                      chunk_items=cfg.chunk_items, progress=cfg.progress) for i in shards]
    executor = None
    if cfg.executor != "none":
        executor = submitit_executor(cfg.executor, str(Path(cfg.out) / "submitit"), **cfg.executor_params.params())
    stats = run_shards(jobs, executor)
    summary: dict[str, Any] = {"shards": stats, "n_attributes": len(attrs), "items": str(items_path),
                               "rows_skipped": skipped}
    for key in ("n_cells", "n_cached", "n_made", "n_malformed", "n_unresolved"):
        summary[key] = int(sum(s[key] for s in stats))
    if any("generated_tokens" in s.get("extra", {}) for s in stats):  # an endpoint's tokens for this run's calls
        summary["generated_tokens"] = int(sum(s.get("extra", {}).get("generated_tokens", 0) for s in stats))
    if cfg.shard is None:
        summary["judgments"] = str(merge_shards(cfg.out, table=cfg.table))
    atomic_write_json(Path(cfg.out) / "elicit_stats.json", summary)
    return summary


def _log(tracker: Tracker, prefix: str, doc: dict[str, Any], images: dict[str, Path]) -> None:
    scalars = {k: v for k, v in flatten(doc, prefix).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    tracker.log(scalars)
    for key, path in images.items():
        tracker.log_image(f"{prefix}/{key}", path)


def _log_run(name: str, out: Path, config: dict[str, Any], prefix: str, doc: dict[str, Any], images: dict[str, Path],
             wandb_project: str, wandb_mode: str | None) -> None:
    tracker = evaluation_tracker(name, out, config, project=wandb_project, mode=wandb_mode, job_type="judges")
    try:
        _log(tracker, prefix, {k: v for k, v in doc.items() if k != "meta"}, images)
    finally:
        tracker.finish()


# Sections of analysis.json whose per-attribute, per-pair, per-source and per-judge detail stays in
# the file: W&B gets their headline figures only.
CONTROL_SECTIONS = ("single_read_control", "three_category_kappa", "matched_items", "no_conflict",
                    "attribute_importance", "difficulty_strata", "label_associations", "identical_preference_null",
                    "component_swaps")
DETAIL_KEYS = ("attributes", "pairs", "sources", "pooled", "targets", "judges", "thresholds", "quartiles", "families")


def _headline(doc: dict[str, Any]) -> dict[str, Any]:
    def trim(d: Any) -> Any:
        return {k: trim(v) for k, v in d.items() if k not in DETAIL_KEYS} if isinstance(d, dict) else d

    return {k: (trim(v) if k in CONTROL_SECTIONS else v) for k, v in doc.items()}


def analyze_judgments(judgments: str | os.PathLike, out: str | os.PathLike, *, items: str | os.PathLike | None = None,
                      settings: AnalysisSettings | None = None, wandb_project: str = DEFAULT_PROJECT,
                      wandb_mode: str | None = None) -> dict[str, Any]:
    """OUT/analysis.json and .md, the weight profiles and agreement plots, and a W&B run, as
    ``settings`` say (default its defaults); ``items`` (optional): the items table, whose reference
    labels add the difficulty strata and the label associations."""
    settings = settings or AnalysisSettings()
    store = load_store(judgments)  # a store, or a long table converted
    item_table = load_items(items) if items is not None else None
    res = analyze(store, item_table, settings=settings)  # bad settings fail before anything is written
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    res["meta"]["judgments"] = str(judgments)
    if items is not None:
        res["meta"]["items"] = str(items)
    atomic_write_json(out / "analysis.json", res)
    notes = "".join(f"\n{note}.\n" for note in plots_not_drawn(res))
    atomic_write_text(out / "analysis.md", analysis_markdown(res) + notes)
    images = analysis_plots(res, out)
    _log_run("judges-analyze", out, {"judgments": str(judgments), "items": None if items is None else str(items),
                                     "seed": settings.seed, "null_repeats": settings.null_repeats},
             "judges", _headline(res), images, wandb_project, wandb_mode)
    return res


MAX_PROFILES = 20  # lines in the reweighted-weights plot before it shows one per source


def _source_means(res: dict[str, Any]) -> dict[str, dict[str, float]]:
    """source -> the mean over judges of the reweighted weights (sources by name)."""
    by_source: dict[str, list[dict[str, float]]] = {}
    for jr in res["judges"].values():
        for s, r in jr["sources"].items():
            if r.get("weights"):
                by_source.setdefault(s, []).append(r["weights"])
    return {s: {a: float(np.mean([w[a] for w in ws])) for a in ws[0]} for s, ws in sorted(by_source.items())}


def reweight_judgments(judgments: str | os.PathLike, items: str | os.PathLike, out: str | os.PathLike,
                       settings: ReweightSettings | None = None, *, baselines: BaselineSettings | None = None,
                       jobs: int | None = None, wandb_project: str = DEFAULT_PROJECT,
                       wandb_mode: str | None = None) -> dict[str, Any]:
    """OUT/reweight.json and .md, the reweighted profiles' plot, and a W&B run, as ``settings`` say
    (default its defaults); with ``baselines`` the rubric and LoRA baselines too. ``jobs``: worker
    processes for the fits (default: this process's CPUs; the figures do not depend on it)."""
    settings = settings or ReweightSettings()
    settings.validate()
    item_table = load_items(items, need_labels=True)
    res = reweight(item_table, load_store(judgments), budgets=settings.budgets, n_repeats=settings.n_repeats,
                   top_k=settings.top_k, seed=settings.seed, jobs=jobs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if baselines is not None:
        run_baselines(baselines, res, item_table, judgments, out / "baselines")
    res["meta"].update(judgments=str(judgments), items=str(items))
    atomic_write_json(out / "reweight.json", res)
    atomic_write_text(out / "reweight.md", reweight_markdown(res))
    profiles = {f"{j}/{s}": r["weights"] for j, jr in res["judges"].items() for s, r in jr["sources"].items()
                if r.get("weights")}
    title = "reweighted attribute weights (reference labels)"
    if len(profiles) > MAX_PROFILES:  # 357 judge/source lines (the published panel) are no plot: one per source
        profiles, title = _source_means(res), f"{title}, mean over judges per source"
    images = {}
    if profiles:
        images["weight_profiles"] = weight_profiles(profiles, out / "reweight_weights.png", title=title)
    _log_run("judges-reweight", out, {"judgments": str(judgments), "items": str(items)}, "reweight", res, images,
             wandb_project, wandb_mode)
    return res
