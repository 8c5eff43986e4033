"""The audit of one reward model, end to end: score its rating set under prompt conditions, write
the scores, ratings and preferences tables, run the statistics on them (``rmeval.stats.audit_sections``),
the suitability step and the judge profile when asked, write the report and log it to W&B.

One pipeline, ``audit``, serves every caller: ``rmeval audit`` (a checkpoint on disk, through
``audit_checkpoint``), the in-training ``AuditCallback`` (the in-memory model at each save) and a
sweep's final audit (``rmtrain.runs.final_audit``); they differ only in their ``AuditSettings``.
Its defaults are the command line's; the two recipe blocks keep their own: ``audit:``
(``TrainingAuditSettings``: a cheap audit at every save, 200 resamples) and ``sweep.audit:``
(``FinalAuditSettings``: 1000 resamples, a seeded sample of 200 prompts).

The figures are read against ONE rated attribute, chosen by ``rmcore.data.schema.pick_attribute``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmcore.console.progress import Progress
from rmcore.data.schema import RatingSet, pick_attribute, skipped_note, table_attributes
from rmcore.errors import ConfigError, DataError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.io.markdown import num, table
from rmcore.io.tables import atomic_write_table, read_table
from rmcore.models.device import Placement
from rmcore.runtime.checkpoints import (
    CONFIG_FILE,
    SUMMARY_FILE,
    display_name,
    provenance,
    training_max_length,
)
from rmcore.runtime.wandb_log import flatten
from rmcore.settings.fields import bounded, nested, option, switch
from rmeval.audit.features import FeatureSettings, audit_feature_tables, read_feature_tables
from rmeval.audit.report import log_audit, write_report
from rmeval.audit.variants import variant_counts
from rmeval.conditions import CONDITIONS, NEEDS, check_condition_names
from rmeval.perturbations.suite import CHEAP
from rmeval.scoring import load_scorer
from rmeval.scoring.run import score_conditions, truncation_note, truncation_summary
from rmeval.stats.bootstrap import AUDIT_BYTES, check_memory
from rmeval.stats.settings import StatsSettings
from rmeval.suitability.settings import SuitabilityAuditSettings
from rmeval.tables import load_preferences, load_ratings, load_scores
from rmeval.tracking import evaluation_tracker

if TYPE_CHECKING:  # the recipe blocks are read by rmtrain.config: no scipy or model code to load them
    import pandas as pd

    from rmcore.runtime.wandb_log import Tracker
    from rmeval.scoring import Scorer, ScorerSettings
    from rmeval.scoring.run import Shard

# The cheap conditions (no related or paraphrase inputs, no embedder): the recipes' audits by default.
CHEAP_CONDITIONS = ("original", "generic", "random", "prompt_only")
# The probes' flags of rmeval audit (--probe-*: any of them turns the probes on).
PROBE_FLAGS = ("embedders", "base_model", "learners")
# The suitability flags of rmeval audit: every one but the groups of suitability-stats.
AUDIT_SUITABILITY_FLAGS = tuple(f.name for f in fields(SuitabilityAuditSettings) if f.name != "groups")


def _names(text: str) -> list[str]:
    return text.split(",")


@dataclass
class JudgeProfileSettings:
    """Profile the checkpoint as a pairwise judge on an items table (``rmeval.judges.audit_hook``)."""

    items: str = option(metavar="FILE", help="items table: also profile the checkpoint as a pairwise judge "
                                             "(rmeval judges)")
    # --judge-attribute-names in rmeval audit (its prefix), formerly --judge-attributes
    attributes: list[str] = option(default_factory=lambda: ["core"], flag="--attribute-names",
                                   deprecated=("--attributes",), metavar="NAMES", parse=_names,
                                   help="attributes for --judge-items (comma-separated)")
    max_length: int | None = bounded(None, ge=1)  # tokens per text: the scorer's (--max-length)
    batch_size: int = bounded(32, ge=1)  # the scorer's (--batch-size)


@dataclass
class AuditSettings:
    """Every setting of one audit (the defaults are ``rmeval audit``'s, whose flags are these fields)."""

    # None: every registered condition whose inputs are at hand
    conditions: list[str] | None = option(None, help="default: all with their inputs at hand")
    # resamples, seed (bootstrap streams, donors, the suitability permutations), the corrected human
    # share: the statistics' settings (rmeval.stats.settings), their keys at this level in a recipe
    stats: StatsSettings = nested(StatsSettings, embed=True)
    attribute: str | None = option(None, help="rated attribute (default helpfulness, else the first)")  # pick_attribute
    n_donors: int = option(4, ge=1, help="donor prompts per transplant condition")
    related_file: str | None = option(None, help="jsonl {prompt_id, variant, text} of related tasks")
    paraphrase_file: str | None = option(None, help="jsonl {prompt_id, variant, text} of paraphrases")
    embedder: str | None = option(None, help="sentence encoder for the embedding condition")
    # pool table (rmeval pool): scored by the audited model, for pool centring
    reference_pool: str | None = option(None, help="reference pool table (rmeval pool's pool.parquet), scored by "
                                                   "the checkpoint for pool centring")
    # the feature probes' models (rmeval.audit.features); None: no probes (any --probe-* flag turns them on)
    features: FeatureSettings | None = nested(FeatureSettings, prefix="probe-", only=PROBE_FLAGS, when=PROBE_FLAGS)
    judge: JudgeProfileSettings | None = nested(JudgeProfileSettings, prefix="judge-", when="items")
    # None: no suitability step; --suitability [CODE ...] turns it on
    suitability: SuitabilityAuditSettings | None = nested(
        SuitabilityAuditSettings, when="perturbations", only=AUDIT_SUITABILITY_FLAGS,
        options={"perturbations": {"flag": "--suitability", "nargs": "*",
                                   "help": "also run the suitability audit (no codes: every perturbation at hand)"}})
    cache: str | None = option(None, help="score cache file (default OUT/score_cache.sqlite)")
    # progress bars while scoring (stderr, only on a terminal)
    progress: bool = option(True, flag="--no-progress", action="store_false",
                            help="no progress on stderr (a bar on a terminal, else a line every 30 s)")

    def resolved_conditions(self) -> list[str]:
        return (resolve_conditions(self.conditions, related_file=self.related_file,
                                   paraphrase_file=self.paraphrase_file)
                if self.conditions is None else list(self.conditions))

    def condition_options(self) -> dict[str, Any]:
        """Options of the condition builders (rmeval.conditions); unset inputs left out."""
        opts: dict[str, Any] = {"seed": self.stats.seed, "n_donors": self.n_donors}
        for key in ("related_file", "paraphrase_file", "embedder"):
            if getattr(self, key):
                opts[key] = getattr(self, key)
        return opts

    def statistics(self) -> StatsSettings:
        """The statistics' settings with the probes' learners of ``--probe-learners`` (None without
        the probes: all four)."""
        return replace(self.stats, probe_learners=self.features.learners if self.features else None)

    def validate(self) -> None:
        """The suitability step's settings (before any scoring), ``conditions`` checked against the
        registry and resolved (comma lists split; None: every one whose inputs are at hand), the
        probes' learners known. One-line ConfigErrors."""
        if self.suitability is not None:
            self.suitability.inference(self.stats.seed)
        self.conditions = resolve_conditions(self.conditions, related_file=self.related_file,
                                             paraphrase_file=self.paraphrase_file)
        if self.features is not None:
            self.features.validate()


def resolve_conditions(requested: list[str] | None, *, related_file: str | None = None,
                       paraphrase_file: str | None = None) -> list[str]:
    """``requested`` (names or comma-separated lists) checked against the registry
    (rmeval.conditions.CONDITIONS); None: every registered condition whose inputs are at hand."""
    given = {"related_file": related_file, "paraphrase_file": paraphrase_file}
    if requested:
        conds = [c for part in requested for c in part.split(",") if c]
        check_condition_names(conds)
        for c in conds:
            if c in NEEDS and not given.get(NEEDS[c]):
                raise ConfigError(f"condition '{c}' needs --{NEEDS[c].replace('_', '-')}")
        return conds
    return [c for c in CONDITIONS if c not in NEEDS or given.get(NEEDS[c])]


def check_audit_memory(stats: StatsSettings, n_prompts: int, n_responses: int,
                       names: tuple[str, str] = ("--n-boot", "--n-boot-regression")) -> None:
    """A one-line ConfigError, before any scoring, when the audit's resamples of ``n_prompts``
    prompts and ``n_responses`` responses would not fit in this machine's memory (``names``: the
    settings of ``n_boot`` and ``n_boot_regression``, as flags or recipe keys)."""
    main, regression = AUDIT_BYTES * stats.n_boot * n_responses, 8 * stats.n_boot_regression * n_prompts
    name, value = (names[0], stats.n_boot) if main >= regression else (names[1], stats.n_boot_regression)
    check_memory(main + regression, f"{name} {value} over {n_prompts} prompts ({n_responses} responses)")


def rating_set_size(rating_set: RatingSet) -> tuple[int, int]:
    """(prompts, responses) of a rating set."""
    return len(rating_set.prompts), sum(len(p.responses) for p in rating_set.prompts)


# -- the recipe blocks (strict keys, read by rmcore.settings.recipes) ----------------------------------------

def _training_suitability() -> SuitabilityAuditSettings:
    return SuitabilityAuditSettings(perturbations=list(CHEAP), max_items=64, n_permutations=2000)


@dataclass
class TrainingSuitabilitySettings:
    """``audit.suitability``: the suitability step of each training-time audit; by default the cheap
    subset, the five controlled prompt perturbations and the rule-based stylized ST and SP."""

    enabled: bool = switch(False)  # off: another key of the block is refused (it would do nothing)
    # the step's settings; a recipe gives these of their keys here (data: a data spec, None: the
    # audit's held-out prompts; weighting None: fixed with null_share, else storey)
    base: SuitabilityAuditSettings = nested(
        _training_suitability, embed=True, keys=("perturbations", "max_items", "n_permutations", "q", "eta", "margin",
                                                 "data", "metric", "weighting", "null_share",
                                                 "procedure"))

    def audit_settings(self) -> SuitabilityAuditSettings | None:
        if not self.enabled:
            return None
        return replace(self.base, perturbations=list(self.base.perturbations or CHEAP))


def _training_audit() -> AuditSettings:
    return AuditSettings(conditions=list(CHEAP_CONDITIONS), stats=StatsSettings(n_boot=200))


@dataclass
class TrainingAuditSettings:
    """``audit``: the audit of each saved checkpoint during training (rmeval.audit.callback.AuditCallback)."""

    enabled: bool = switch(False)  # off: another key of the block is refused (it would do nothing)
    # the audit at each save: a recipe gives its conditions and n_boot here (the cheap ones, 200 resamples)
    base: AuditSettings = nested(_training_audit, embed=True, keys=("conditions", "n_boot"))
    max_prompts: int = bounded(64, ge=1)
    suitability: TrainingSuitabilitySettings = field(default_factory=TrainingSuitabilitySettings)

    def audit_settings(self, attribute: str | None = None) -> AuditSettings:
        # the regression is the slowest figure to settle: at least 200 resamples however few the rest
        stats = replace(self.base.stats, n_boot_regression=max(self.base.stats.n_boot, 200))
        return replace(self.base, attribute=attribute, stats=stats, suitability=self.suitability.audit_settings())

    def check_memory(self, rating_set: RatingSet) -> None:
        """The audit of ``rating_set`` fits in memory (``check_audit_memory``), said before training."""
        check_audit_memory(self.audit_settings().stats, *rating_set_size(rating_set), names=("audit.n_boot",) * 2)


def _final_audit() -> AuditSettings:
    return AuditSettings(conditions=list(CHEAP_CONDITIONS), stats=StatsSettings(n_boot=1000))


@dataclass
class FinalAuditSettings:
    """``sweep.audit``: the full audit of every finished run of a sweep (rmtrain.runs.final_audit)."""

    # not a switch (rmcore.settings.fields.switch): the released scorers are audited with these settings either way
    enabled: bool = True
    data: dict[str, Any] | None = None  # None: the held-out split (no run trains on it)
    # the audit of each run: a recipe gives these of its keys here (the cheap conditions, 1000
    # resamples, seed 0: also the seed of the prompt sample; features: the probes' models)
    base: AuditSettings = nested(_final_audit, embed=True, keys=("conditions", "n_boot", "paraphrase_file",
                                                                  "related_file", "seed", "features"))
    max_prompts: int | None = bounded(200, ge=1)  # seeded sample, the same for every run
    batch_size: int = bounded(32, ge=1)
    max_length: int | None = bounded(None, ge=1)  # None: training.max_length
    max_tokens: int | None = bounded(None, ge=1)  # cap on padded tokens per batch
    # where each audit runs (rmcore.models.device); trust_remote_code is the model section's
    device: str = "auto"
    dtype: str = "auto"
    attn_implementation: str | None = None  # None: the model section's
    device_map: str | None = None
    num_processes: int = bounded(1, ge=1)  # processes (GPUs) sharing one checkpoint's scoring, in its own job

    def placement(self, trust_remote_code: bool = False, attn_implementation: str | None = None) -> Placement:
        """Where each final audit's model runs: these keys, the model's remote-code and kernel settings."""
        p = Placement(device=self.device, dtype=self.dtype, trust_remote_code=trust_remote_code,
                      attn_implementation=self.attn_implementation or attn_implementation, device_map=self.device_map)
        p.validate()
        if self.num_processes < 1:
            raise ConfigError(f"sweep.audit.num_processes must be >= 1, got {self.num_processes}")
        return p

    def audit_settings(self, attribute: str | None = None) -> AuditSettings:
        # the regression resamples as often as the rest (n_boot_regression is no key of sweep.audit)
        stats = replace(self.base.stats, n_boot_regression=self.base.stats.n_boot)
        return replace(self.base, attribute=attribute, stats=stats)

    def check_memory(self, rating_set: RatingSet) -> None:
        """The audit of ``rating_set`` fits in memory (``check_audit_memory``), said before scoring."""
        check_audit_memory(self.audit_settings().stats, *rating_set_size(rating_set),
                           names=("sweep.audit.n_boot",) * 2)


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
        # scipy: --help stays cheap
        from rmeval.experiments.pool import read_pool, score_pool

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
    # scipy: --help stays cheap
    from rmeval.stats.audit_sections import compute_audit

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
        # scipy: --help stays cheap
        from rmeval.stats.judge_diagnostics import judge_diagnostics

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
        # scipy: --help stays cheap
        from rmeval.suitability import model_json

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
            # scipy: --help stays cheap
            from rmeval.suitability import log_suitability

            log_suitability(tracker, *suitability)
        if checkpoint is not None:
            tracker.summary({"checkpoint": str(checkpoint)})


def _suitability_step(scorer: Scorer, rating_set: RatingSet, settings: AuditSettings, out: Path, *, title: str,
                      cache_path: Path | None, checkpoint: str | os.PathLike | None,
                      data: str | None) -> tuple[dict[str, dict[str, Any]], dict[str, Path]]:
    # scipy: --help stays cheap
    from rmeval.suitability.checkpoints import audit_suitability

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
    # scipy: --help stays cheap
    from rmeval.stats.audit_sections import compute_audit

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
        # scipy: --help stays cheap
        from rmeval.stats.judge_diagnostics import judge_diagnostics

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
