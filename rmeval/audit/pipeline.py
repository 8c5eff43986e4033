"""The audit of one reward model, end to end: score its rating set under prompt conditions, write
the scores, ratings and preferences tables, run the statistics on them (``rmeval.stats.audit_sections``),
the suitability step and the judge profile when asked, write the report and log it to W&B.

One pipeline, ``audit``, serves every caller: ``rmeval audit`` (a checkpoint on disk, through
``audit_checkpoint``), the in-training ``AuditCallback`` (the in-memory model at each save) and a
sweep's final audit (``rmtrain.runs.final_audit``); they differ only in their ``AuditSettings``
(``rmeval.audit.settings``). Its defaults are the command line's; the two recipe blocks keep their
own: ``audit:`` (``TrainingAuditSettings``: a cheap audit at every save, 200 resamples) and
``sweep.audit:`` (``FinalAuditSettings``: 1000 resamples, a seeded sample of 200 prompts).

The figures are read against ONE rated attribute, chosen by ``rmcore.data.schema.pick_attribute``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmcore.console.progress import Progress
from rmcore.data.schema import RatingSet, pick_attribute, skipped_note, table_attributes
from rmcore.errors import ConfigError, DataError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.io.markdown import num, table
from rmcore.io.tables import atomic_write_table, read_table
from rmcore.runtime.checkpoints import (
    CONFIG_FILE,
    SUMMARY_FILE,
    display_name,
    provenance,
    training_max_length,
)
from rmcore.runtime.wandb_log import flatten
from rmeval.audit.features import audit_feature_tables, read_feature_tables
from rmeval.audit.report import log_audit, write_report
from rmeval.audit.settings import AuditSettings, check_audit_memory
from rmeval.audit.variants import variant_counts
from rmeval.experiments.pool import read_pool, score_pool
from rmeval.scoring import load_scorer
from rmeval.scoring.run import score_conditions, truncation_note, truncation_summary
from rmeval.stats.audit_sections import compute_audit
from rmeval.stats.judge_diagnostics import judge_diagnostics
from rmeval.suitability import log_suitability, model_json
from rmeval.suitability.checkpoints import audit_suitability
from rmeval.tables import load_preferences, load_ratings, load_scores
from rmeval.tracking import evaluation_tracker

if TYPE_CHECKING:
    import pandas as pd

    from rmcore.runtime.wandb_log import Tracker
    from rmeval.scoring import Scorer, ScorerSettings
    from rmeval.scoring.run import Shard


# -- the pipeline ----------------------------------------------------------------------------------

def audit(scorer: Scorer, rating_set: RatingSet, settings: AuditSettings, out: str | os.PathLike, *,
          tracker: Tracker | None = None, label: str = "", title: str = "matchrm audit",
          checkpoint: str | os.PathLike | None = None, data: str | None = None, cache: bool = True,
          preference_set: RatingSet | None = None, shard: Shard | None = None,
          meta: dict[str, Any] | None = None, started: float | None = None) -> dict[str, Any] | None:
    """Audit the model behind ``scorer`` on ``rating_set`` into ``out`` and return the audit record.

    ``shard``: this process's share of an audit launched as several processes (``accelerate
    launch``): each scores its share of the texts (``rmeval.scoring.run``); the main process merges
    them, computes the statistics once and writes everything; the others return None.

    The scorer is closed once every text is scored (the judge profile loads the checkpoint anew).
    ``checkpoint``/``data``: where the model and the prompts come from, recorded in the audit's
    meta with the run's provenance (and needed by the judge profile). ``cache=False`` scores
    afresh, with no score cache and no reuse of an earlier scores table: an in-memory model has no
    identity that outlives its process. ``preference_set``: the suitability step's preference set
    when already loaded (else ``settings.suitability.data``, else ``rating_set``).
    ``label`` heads the progress lines; ``title`` the report; ``meta`` joins the record's meta.
    With a ``tracker`` everything is logged to it (the caller finishes it). ``started``: when the
    run began (``time.perf_counter()``; the caller's, e.g. before its model loaded; default now):
    the record's ``meta.seconds`` runs from there to the report written, ``seconds_scoring`` from
    there to the last text scored, ``seconds_statistics`` is the statistics' own time.

    The steps: score (``_score_step``) -> tables and statistics (``_tables_step``) -> the extra
    sections (``_extras_step``) -> report and W&B (``_report_step``)."""
    started = time.perf_counter() if started is None else started
    out = Path(out)
    scored = _score_step(scorer, rating_set, settings, out, cache=cache, label=label, title=title,
                         checkpoint=checkpoint, data=data, preference_set=preference_set, shard=shard)
    if scored is None:  # another process's share: the main process does the rest
        return None
    seconds_scoring = time.perf_counter() - started
    result = _tables_step(scored, rating_set, settings, out, cache=cache, label=label)
    judge_images = _extras_step(result, scored, scorer, rating_set, settings, out, checkpoint=checkpoint,
                                data=data, meta=meta)
    # compute_audit's own meta.seconds times the statistics alone; the record's covers the whole run
    result["meta"]["seconds_statistics"] = result["meta"].pop("seconds", None)
    result["meta"]["seconds_scoring"] = round(seconds_scoring, 3)
    _report_step(result, out, title=title, tracker=tracker, judge_images=judge_images,
                 suitability=scored.suitability, checkpoint=checkpoint, started=started)
    return result


@dataclass
class _Scored:
    """What the scoring step hands on: the scores and ratings tables and what was scored beside them."""

    scores: pd.DataFrame
    ratings: pd.DataFrame
    placement: dict[str, Any]  # the scorer's device, dtype, kernel (and loader)
    pool_scores: pd.DataFrame | None  # the reference pool scored by the audited model
    digits: pd.DataFrame | None  # a generative judge's digit distributions
    suitability: tuple[dict[str, dict[str, Any]], dict[str, Path]] | None  # the suitability step's results


def _score_step(scorer: Scorer, rating_set: RatingSet, settings: AuditSettings, out: Path, *, cache: bool,
                label: str, title: str, checkpoint: str | os.PathLike | None, data: str | None,
                preference_set: RatingSet | None, shard: Shard | None) -> _Scored | None:
    """Score every condition, and the judge digits, the reference pool and the suitability suite when
    asked, then close the scorer; None on a process that is not the main one."""
    cache_path = (Path(settings.cache) if settings.cache else out / "score_cache.sqlite") if cache else None
    suitability = digits = None
    if settings.reference_pool:  # read first: a bad pool table fails before any scoring
        pool_table = read_pool(settings.reference_pool)
    is_judge = scorer.kind == "generative_judge"  # its digit distributions go beside the scores
    if is_judge and cache_path is not None:
        scorer.keep_digits(cache_path)
    placement = scorer.describe()  # device, dtype, kernel (and loader): recorded before the model is freed
    try:
        scores = score_conditions(scorer, rating_set, settings.resolved_conditions(),
                                  out_path=out / "scores.parquet" if cache else None, cache_path=cache_path,
                                  progress=settings.progress, label=label, shard=shard,
                                  **settings.condition_options())
        if scores is None:  # another process's share
            return None
        if is_judge:
            # torch: --help stays cheap
            from rmeval.scoring.judge import judge_digit_table

            digits = judge_digit_table(scorer, rating_set, settings.resolved_conditions(),
                                       **settings.condition_options())
        ratings = rating_set.ratings_table(scorer.tokenizer)
        pool_scores = None
        if settings.reference_pool:  # the independent pool, scored by the model under audit
            pool_scores = score_pool(scorer, rating_set, pool_table, cache_path=cache_path,
                                     progress=settings.progress, label=label)
        if settings.suitability is not None:
            prefs_rs = preference_set or settings.suitability.rating_set(rating_set, settings.stats.seed)
            suitability = _suitability_step(scorer, prefs_rs, settings, out, title=title, cache_path=cache_path,
                                            checkpoint=checkpoint, data=data)
    finally:
        scorer.close()
    return _Scored(scores, ratings, placement, pool_scores, digits, suitability)


def _tables_step(scored: _Scored, rating_set: RatingSet, settings: AuditSettings, out: Path, *,
                 cache: bool, label: str = "") -> dict[str, Any]:
    """Write the scores, ratings, preferences and feature tables and compute the audit's statistics on them
    (``rmeval.stats.audit_sections``), with the truncation counts and the reference pool's."""
    scores, ratings, pool_scores = scored.scores, scored.ratings, scored.pool_scores
    if not cache:  # score_conditions writes the table (and what resumes it) only when it may be reused
        atomic_write_table(out / "scores.parquet", scores)
    atomic_write_table(out / "ratings.parquet", ratings)
    prefs = rating_set.preferences_table()
    if prefs is not None:
        atomic_write_table(out / "preferences.parquet", prefs)
    # after the scorer is freed: the prompt table, and the probes' embeddings and hidden states
    # (only these take long enough to need a progress line)
    with Progress(f"features {label}".strip(), enabled=settings.progress and settings.features is not None):
        tables = audit_feature_tables(rating_set, settings.features, out, seed=settings.stats.seed)
    # the statistics report no count of their own: a line every half minute while they run
    with Progress(f"statistics {label}".strip(), enabled=settings.progress):
        result = compute_audit(scores, ratings, settings.statistics(), preferences=prefs,
                               attribute=pick_attribute(rating_set.attributes, settings.attribute)
                               if rating_set.attributes or settings.attribute else None,
                               reference_scores=pool_scores, **tables)
    result["truncation"] = truncation_summary(scores)
    if pool_scores is not None:
        atomic_write_table(out / "reference_scores.parquet", pool_scores[[c for c in (
            "prompt_id", "response_id", "policy", "sample", "score") if c in pool_scores.columns]])
        result["reference_pool"] = {"path": str(settings.reference_pool), "n_scored": int(len(pool_scores)),
                                    "n_prompts": int(pool_scores["prompt_id"].nunique()),
                                    "n_rows_of_other_prompts": pool_scores.attrs["n_unused"]}
    return result


def _extras_step(result: dict[str, Any], scored: _Scored, scorer: Scorer, rating_set: RatingSet,
                 settings: AuditSettings, out: Path, *, checkpoint: str | os.PathLike | None, data: str | None,
                 meta: dict[str, Any] | None) -> dict[str, Path]:
    """Add the extra sections to ``result``: judge diagnostics, what the variants files held, the run's
    meta and provenance, the judge profile, donor exclusions and the suitability record; returns the
    judge profile's images."""
    if scored.digits is not None:
        atomic_write_table(out / "judge_digits.parquet", scored.digits)
        result["judge_diagnostics"] = judge_diagnostics(scored.digits, n_boot=settings.stats.n_boot,
                                                        seed=settings.stats.seed)
    for cond, path in (("paraphrase", settings.paraphrase_file), ("related", settings.related_file)):
        section = result.get(cond) if cond == "paraphrase" else result.get("transplant", {}).get(cond)
        if path and section is not None:  # what the variants file held: subtype, paraphrases judged valid

            section["variants"] = variant_counts(path, rating_set)
    result["meta"]["placement"] = scored.placement
    result["meta"]["max_length"] = getattr(scorer, "max_length", None)  # tokens per text, as scored
    result["meta"]["skipped"] = dict(rating_set.skipped)  # rows the data's on_bad: skip dropped, by reason
    result["meta"]["n_processes"] = scored.scores.attrs.get("n_processes", 1)
    result["meta"].update(meta or {})
    if getattr(scorer, "drop_special", ()):  # scored without BOS/EOS markers: say so, and how often one was there
        result["meta"]["drop_special"] = list(scorer.drop_special)
        result["markers_dropped"] = dict(scorer.markers_dropped)
    judge_images: dict[str, Path] = {}
    if settings.judge is not None:  # a judge checkpoint: its attribute profile joins the audit
        # torch: --help stays cheap
        from rmeval.judges.audit_hook import profile_checkpoint

        if checkpoint is None:
            raise ConfigError("the judge profile of an audit needs the checkpoint on disk")
        j = settings.judge
        result["judge_profile"], judge_images = profile_checkpoint(
            checkpoint, j.items, out / "judge_profile", attribute_names=j.attributes, max_length=j.max_length,
            batch_size=j.batch_size, seed=settings.stats.seed)
    if "donor_exclusions" in scored.scores.attrs:
        result["donor_exclusions"] = scored.scores.attrs["donor_exclusions"]
    if scored.suitability is not None:
        result["suitability"] = model_json(next(iter(scored.suitability[0].values())))
    if checkpoint is not None:
        # the run's seed goes in as run_seed: meta's seed is the audit's own (bootstrap, donors)
        prov = {("run_seed" if k == "seed" else k): v for k, v in provenance(checkpoint).items()}
        result["meta"].update({"checkpoint": str(checkpoint), "data": data, "scorer": scorer.kind,
                               "training_max_length": training_max_length(checkpoint), **prov})
    return judge_images


def _report_step(result: dict[str, Any], out: Path, *, title: str, tracker: Tracker | None,
                 judge_images: dict[str, Path], suitability: tuple[dict[str, dict[str, Any]], dict[str, Path]] | None,
                 checkpoint: str | os.PathLike | None, started: float) -> None:
    """Write the report (``rmeval.audit.report``; ``meta.seconds`` from ``started`` to the report
    written) and, with a tracker, log the audit, the judge profile's images, the suitability figures
    and the checkpoint to it."""
    paths = write_report(result, out, title=title, started=started)
    if tracker is not None:
        # the suitability figures go to W&B once, with their table and plot (log_suitability)
        log_audit(tracker, {k: v for k, v in result.items() if k != "suitability"}, paths)
        for key, path in judge_images.items():
            tracker.log_image(f"audit/judge_profile/{key}", path)
        if suitability is not None:
            log_suitability(tracker, *suitability)
        if checkpoint is not None:
            tracker.summary({"checkpoint": str(checkpoint)})


def _suitability_step(scorer: Scorer, rating_set: RatingSet, settings: AuditSettings, out: Path, *, title: str,
                      cache_path: Path | None, checkpoint: str | os.PathLike | None,
                      data: str | None) -> tuple[dict[str, dict[str, Any]], dict[str, Path]]:
    # a checkpoint on disk is named by its directory; an in-memory model by the audit's title
    name = Path(str(checkpoint)).name if checkpoint is not None else "model"
    return audit_suitability(scorer, rating_set, settings.suitability, out, name=name,
                             title=f"Suitability of {name}" if checkpoint is not None else f"Suitability: {title}",
                             seed=settings.stats.seed, attribute=settings.attribute, cache_path=cache_path,
                             checkpoint=checkpoint, data=data, progress=settings.progress)


def audit_checkpoint(checkpoint: str | os.PathLike, rating_set: RatingSet, scorer: ScorerSettings,
                     settings: AuditSettings, out: str | os.PathLike, *, name: str, data: str | None = None,
                     wandb_project: str | None = None, wandb_mode: str | None = None, wandb_group: str | None = None,
                     shard: Shard | None = None, meta: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """``audit`` of a saved checkpoint (scored as ``scorer`` says), with a W&B run of its own in the
    project and group of the checkpoint's training run (``wandb_project``, ``wandb_group`` None; else
    those: ``rmeval.tracking``); ``name`` names the run (``audit-<name>``).
    ``shard``: this process's share of a multi-process audit (``rmeval.scoring.run.Shard``); the
    main process alone logs to W&B and returns the record, the others return None."""
    started = time.perf_counter()  # meta.seconds counts the model's loading too
    label = display_name(name, checkpoint)
    model = load_scorer(replace(scorer, model=str(checkpoint)))
    if shard is not None and not shard.main:
        return audit(model, rating_set, settings, out, label=label, checkpoint=checkpoint, data=data, shard=shard)
    tracker = evaluation_tracker(f"audit-{name}", out, {"checkpoint": str(checkpoint), "data": data,
                                                        "conditions": settings.resolved_conditions(),
                                                        "n_boot": settings.stats.n_boot},
                                 checkpoint=checkpoint, project=wandb_project, group=wandb_group, mode=wandb_mode)
    try:
        return audit(model, rating_set, settings, out, tracker=tracker, label=label, title=f"Audit of {label}",
                     checkpoint=checkpoint, data=data, shard=shard, meta=meta, started=started)
    finally:
        tracker.finish()


def audit_line(name: str, result: dict[str, Any], out: str | os.PathLike) -> str:
    """One line per audited checkpoint, titled as its report is (``display_name``: the run's arm and
    seed, else ``name``): how many scores, of how many tokens at most, how many texts were cut to fit,
    what the data's ``on_bad: skip`` dropped."""
    total = result["truncation"]["total"]
    meta = result.get("meta", {})
    at = f" of at most {meta['max_length']:,} tokens" if meta.get("max_length") else ""
    skipped = skipped_note(meta.get("skipped") or {})
    return (f"{result_title(name, result)}: {total['n']:,} scores{at} ({truncation_note(total)}"
            + (f"; skipped: {skipped}" if skipped else "") + f") -> {out}")


def result_title(name: str, result: dict[str, Any]) -> str:
    """What a record's report is titled by: the arm and seed of the checkpoint in its meta
    (``rmcore.runtime.checkpoints.display_name``), else ``name``."""
    checkpoint = result.get("meta", {}).get("checkpoint")
    return display_name(name, checkpoint) if checkpoint else name


def audit_tables(scores: str | os.PathLike, ratings: str | os.PathLike, settings: AuditSettings,
                 out: str | os.PathLike, *, preferences: str | os.PathLike | None = None,
                 reference_scores: str | os.PathLike | None = None, features: str | os.PathLike | None = None,
                 compare: dict[str, str] | None = None, wandb_project: str | None = None,
                 wandb_mode: str | None = None,
                 wandb_group: str | None = None) -> tuple[dict[str, Any], dict[str, Path]]:
    """The audit's statistics on tables already written (``rmeval stats``): scores and ratings
    tables, optionally released preferences and the scores of a reference pool (prompt_id, score)
    for pool centring (the preferences default to the table ``audit`` writes beside the scores),
    written to OUT and logged to a W&B run (``stats_run_name``; tagged, grouped and in the project of
    the scored run, whose provenance and scoring the record's meta keeps: ``tables_provenance``,
    ``_scored_meta``; ``wandb_project`` and ``wandb_group`` name another project and group). Each file is
    validated on its own, so an error names the file it is in. ``features``: the folder of the prompt and
    feature tables (``rmeval features``; default the scores' folder, where ``audit`` writes them);
    ``compare``: {name: scores file} of the same texts scored another way. Returns (audit, report paths)."""
    started = time.perf_counter()
    attribute = settings.attribute
    if attribute is None:
        table = read_table(ratings, "ratings table")
        # no attribute column (a preference set): the human-referenced sections are left out
        attribute = pick_attribute(table_attributes(table)) if table_attributes(table) else None
    rt = load_ratings(ratings, attribute=attribute)
    check_audit_memory(settings.stats, int(rt["prompt_id"].nunique()), len(rt))  # before the statistics
    st = load_scores(scores, rt)
    beside = Path(scores).with_name("preferences.parquet")
    if preferences is None and beside.is_file():
        # `audit` writes preferences.parquet beside scores.parquet: without it the pairwise
        # section would silently vanish from the recomputed audit
        preferences = beside
        print(f"using preferences {beside} (found beside the scores)", file=sys.stderr)
    prefs = load_preferences(preferences) if preferences else None
    pool = read_table(reference_scores, "reference scores") if reference_scores else None
    if pool is not None and not {"prompt_id", "score"} <= set(pool.columns):
        raise DataError(f"reference scores need columns prompt_id and score; the file has {list(pool.columns)}",
                        file=str(reference_scores))
    tables = read_feature_tables(features if features is not None else Path(scores).parent,
                                 explicit=features is not None)
    result = compute_audit(st, rt, settings.statistics(), preferences=prefs, attribute=attribute, reference_scores=pool,
                           compare={name: load_scores(path, rt) for name, path in (compare or {}).items()},
                           **tables)
    digits = Path(scores).with_name("judge_digits.parquet")  # a generative judge's audit writes it
    if digits.is_file():
        print(f"using judge digits {digits} (found beside the scores)", file=sys.stderr)
        result["judge_diagnostics"] = judge_diagnostics(read_table(digits, "judge digits table"),
                                                        n_boot=settings.stats.n_boot, seed=settings.stats.seed)
    result["meta"]["seconds_statistics"] = result["meta"].pop("seconds", None)
    prov = tables_provenance(scores)
    result["meta"].update({**_scored_meta(scores), **{("run_seed" if k == "seed" else k): v for k, v in prov.items()}})
    paths = write_report(result, out, title=f"Audit of {Path(scores).name}", started=started)
    tracker = evaluation_tracker(stats_run_name(scores, prov), out, {"scores": str(scores), "ratings": str(ratings)},
                                 prov=prov, project=wandb_project, group=wandb_group, mode=wandb_mode)
    try:
        log_audit(tracker, result, paths)
    finally:
        tracker.finish()
    return result, paths


def stats_run_name(scores: str | os.PathLike, prov: dict[str, Any]) -> str:
    """The W&B run of ``rmeval stats``: ``stats-<arm>-seed<seed>`` for the tables of a run trained
    by rmtrain, else ``stats-<folder>-<file>`` (the folder names the tables more than their file:
    every audit writes ``scores.parquet``)."""
    if "arm" in prov and "seed" in prov:
        return f"stats-{prov['arm']}-seed{prov['seed']}"
    return f"stats-{Path(scores).resolve().parent.name}-{Path(scores).stem}"


def _earlier_meta(scores: str | os.PathLike) -> dict[str, Any]:
    """The meta of the ``audit.json`` beside ``scores`` (the audit that wrote them); empty without one."""
    record = Path(scores).with_name("audit.json")
    if not record.is_file():
        return {}
    try:
        meta = json.loads(record.read_text()).get("meta")
    except (json.JSONDecodeError, AttributeError):  # not an audit record: nothing to keep from it
        return {}
    return meta if isinstance(meta, dict) else {}


def tables_provenance(scores: str | os.PathLike) -> dict[str, Any]:
    """The provenance (``rmcore.runtime.checkpoints.provenance``) of the run whose texts ``scores`` holds,
    from where the table lies: a training run's directory (its ``heldout_scores.parquet``), else the
    ``audit.json`` an audit wrote beside it (its meta keeps the run's seed as ``run_seed``)."""
    folder = Path(scores).parent
    if (folder / CONFIG_FILE).is_file() or (folder / SUMMARY_FILE).is_file():
        return provenance(folder)
    meta = _earlier_meta(scores)
    keys = {"arm": "arm", "run_seed": "seed", "model": "model", "project": "project", "entity": "entity",
            "group": "group"}
    return {key: meta[k] for k, key in keys.items() if meta.get(k) is not None}


def _scored_meta(scores: str | os.PathLike) -> dict[str, Any]:
    """What the audit that wrote ``scores`` recorded of its scoring (the checkpoint, data, scorer,
    length, skipped rows), kept in a recomputed record: the statistics are new, the scores are not."""
    meta = _earlier_meta(scores)
    keep = ("checkpoint", "data", "scorer", "placement", "max_length", "training_max_length", "skipped")
    return {k: meta[k] for k in keep if k in meta}


# Point estimates compared across checkpoints.
SUMMARY_KEYS = re.compile(r"(estimate|accuracy|margin)$|/(hard|normal|easy|average)/estimate$")


def write_summary(audits: dict[str, dict[str, Any]], out: str | os.PathLike) -> dict[str, Path]:
    """Comparison of checkpoints: every numeric figure to JSON; point estimates to a Markdown table."""
    out = Path(out)
    flat = {name: {k: v for k, v in flatten(a).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            for name, a in audits.items()}
    keys: list[str] = []
    for f in flat.values():
        keys += [k for k in f if k not in keys and SUMMARY_KEYS.search(k) and not k.startswith("truncation")]
    names = list(audits)
    rows = [[k, *(num(flat[n].get(k)) for n in names)] for k in keys]
    lines = ["# Checkpoint comparison", "", *table(["figure", *names], rows)]
    return {"json": atomic_write_json(out / "summary.json", flat),
            "markdown": atomic_write_text(out / "summary.md", "\n".join(lines) + "\n")}
