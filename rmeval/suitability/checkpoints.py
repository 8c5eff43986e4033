"""The suitability audit of checkpoints (Reward Auditor): the settings it takes, the suitability
step of an audit, and the audit of a list of checkpoints (``rmeval suitability``).

A model is suitable for a perturbation when its confidence in the preferred response does not drop
once the pair is perturbed; ``rmeval.suitability`` holds the inference (sign-flip permutation
test per perturbation, group-aware BH across them, an effect-size margin). The margin of one
model is 0 unless given; with several models it is the panel rule, which needs every model's
results before any verdict, so ``audit_checkpoints`` scores them all, then finalizes, then writes."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rmcore.checkpoints import display_name, provenance
from rmcore.data.registry import load_data
from rmcore.data.schema import RatingSet, pick_attribute
from rmcore.errors import ConfigError
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
from rmeval.tracking import evaluation_tracker


@dataclass
class SuitabilityAuditSettings:
    """What a suitability audit perturbs, how it rewrites, and the inference settings."""

    perturbations: list[str] | None = None  # codes; None or empty: every one whose inputs are at hand
    data: str | dict[str, Any] | None = None  # preference-set spec; None: the audit's own rating set
    max_prompts: int | None = None  # seeded sample of `data`'s prompts
    max_items: int | None = None  # first N preference items
    base_level: int = 0  # RM-Bench style level of the base pairs
    n_permutations: int = 10_000
    q: float = 0.05
    eta: float = 0.5
    margin: float | None = None  # None: the panel rule for several models, else 0
    weighting: str | None = None  # storey | fixed | equal (plain BH); None: fixed with null_share, else storey
    null_share: dict[str, float] | None = None  # fixed null share per group, in (0, 1]
    alpha: float = 0.05  # the panel rule's level
    metric: str = "log_confidence"  # log_confidence | confidence
    robustness: bool = True  # the B.1 tests and B.3 structure
    procedure: str = "paper"  # whose decisions are shown: paper | released (Reward Auditor's script); both kept
    judge_style: str = "verdict"  # a generative judge's question: verdict | explain (Reward Auditor's)
    judge_explain_tokens: int = 256  # explanation budget of judge_style explain
    groups: dict[str, str] | None = None  # CODE -> GROUP for codes outside the ten (suitability-stats)
    rewriter: str | None = None  # hf:MODEL | openai:MODEL | file:PATH, for the stylized codes
    rewrite_file: str | None = None  # jsonl {item_id, perturbation, side, text} (CODE@file)
    rewrite_cache: str | None = None  # None: OUT/rewrite_cache.sqlite
    base_url: str | None = None  # OpenAI-compatible endpoint of an openai: rewriter
    language: str = "Chinese"  # target language of LC and SLC

    def inference(self, seed: int) -> SuitabilitySettings:
        s = SuitabilitySettings(n_permutations=self.n_permutations, seed=seed, q=self.q, eta=self.eta,
                                margin=self.margin, weighting=self.weighting, null_share=self.null_share,
                                alpha=self.alpha, metric=self.metric, robustness=self.robustness,
                                procedure=self.procedure)
        s.validate()
        self.validate()
        return s

    def validate(self) -> None:
        """Every setting outside the inference's in range (one-line ConfigErrors)."""
        from rmeval.scoring.pairwise_judge import STYLES

        for name, lo in (("max_items", 1), ("max_prompts", 1), ("judge_explain_tokens", 1)):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
                raise ConfigError(f"{name} must be a whole number >= {lo}, got {v!r}")
        if self.base_level not in (0, 1, 2) or isinstance(self.base_level, bool):
            raise ConfigError(f"base_level must be an RM-Bench style level 0, 1 or 2, got {self.base_level!r}")
        if self.judge_style not in STYLES:
            raise ConfigError(f"judge_style must be one of {', '.join(STYLES)}, got '{self.judge_style}'")
        from rmeval.perturbations.suite import GROUPS

        known = set(GROUPS.values()) | set((self.groups or {}).values())
        unknown = sorted(set(self.null_share or {}) - known)
        if unknown:
            raise ConfigError(f"--null-share names group(s) {unknown} that no perturbation belongs to; groups: "
                              f"{', '.join(sorted(known))}")

    def specs(self, rating_set: RatingSet) -> list[str]:
        from rmeval.perturbations.suite import default_specs

        if self.perturbations:
            return [c for part in self.perturbations for c in part.split(",") if c]
        return default_specs(rating_set, with_lm=bool(self.rewriter))

    def rewriters(self, out: str | os.PathLike, seed: int) -> dict[str, Any]:
        from rmeval.perturbations.rewriters import make_rewriter

        rewriters: dict[str, Any] = {}
        if self.rewriter:
            cache = Path(self.rewrite_cache) if self.rewrite_cache else Path(out) / "rewrite_cache.sqlite"
            rewriters["lm"] = make_rewriter(self.rewriter, seed=seed, language=self.language, base_url=self.base_url,
                                            cache_path=cache)
        if self.rewrite_file:
            rewriters["file"] = make_rewriter(f"file:{self.rewrite_file}")
        return rewriters

    def rating_set(self, default: RatingSet, seed: int) -> RatingSet:
        """The preference set perturbed: ``data`` (sampled like the audit's), else ``default``."""
        return load_data(self.data, self.max_prompts, seed) if self.data else default


def suitability_line(name: str, res: dict[str, Any], dest: str | os.PathLike) -> str:
    """One line per model, titled as its report is (a checkpoint's arm and seed, ``display_name``,
    else ``name``): Cohen's d, stars and verdict of each perturbation, and the risk."""
    def part(code: str, r: dict[str, Any]) -> str:
        if not math.isfinite(r["p_value"]):
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
             data: str | dict[str, Any] | None) -> dict[str, Any]:
    """One model's suite scored and its inference (no margin yet), its pairs table in ``dest``."""
    res = run_suitability(scorer, rating_set, specs, settings=settings.inference(seed), rewriters=rewriters,
                          cache_path=cache_path, pairs_path=dest / "suitability_pairs.parquet",
                          max_items=settings.max_items, base_level=settings.base_level,
                          attribute=pick_attribute(rating_set.attributes, attribute), judge_style=settings.judge_style,
                          judge_explain_tokens=settings.judge_explain_tokens)
    res["meta"]["placement"] = scorer.describe()  # device, dtype, attention kernel, loader
    if checkpoint is not None:
        res["meta"].update({"checkpoint": str(checkpoint), "data": settings.data or data, **provenance(checkpoint)})
    return res


def audit_suitability(scorer: Scorer, rating_set: RatingSet, settings: SuitabilityAuditSettings,
                      out: str | os.PathLike, *, name: str, title: str, seed: int = 0, attribute: str | None = None,
                      cache_path: str | os.PathLike | None = None, checkpoint: str | os.PathLike | None = None,
                      data: str | dict[str, Any] | None = None) -> tuple[dict[str, dict[str, Any]], dict[str, Path]]:
    """The suitability step of an audit: one model's suitability on the preference set
    ``rating_set`` (``settings.rating_set`` resolves it), written to ``out`` (suitability.json/.md/.png
    and the pairs table); returns ({name: results}, paths) for the audit record and its W&B run. A
    checkpoint's report is titled by its arm and seed (``display_name``), else by ``title``."""
    out = Path(out)
    res = _run_one(scorer, rating_set, settings, settings.specs(rating_set), out, settings.rewriters(out, seed),
                   seed=seed, attribute=attribute, cache_path=cache_path, checkpoint=checkpoint, data=data)
    results = {name: res}
    finalize(results, settings.inference(seed))
    if checkpoint is not None:
        title = f"Suitability of {display_name(name, checkpoint)}"
    return results, write_suitability(results, out, title=title)


def audit_checkpoints(checkpoints: list[tuple[str, Path]], rating_set: RatingSet, scorer: ScorerSettings,
                      settings: SuitabilityAuditSettings, out: str | os.PathLike, *, seed: int = 0,
                      attribute: str | None = None, data: str | None = None, cache: str | None = None,
                      wandb_project: str = "matchrm", wandb_mode: str | None = None
                      ) -> tuple[dict[str, dict[str, Any]], dict[str, Path] | None]:
    """Suitability of each (name, checkpoint) on ``rating_set``, into OUT (one checkpoint) or
    OUT/<name>/, each with its W&B run; with several, their margins by the panel rule and a joint
    report in OUT. Returns (results by name, the joint report's paths or None)."""
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
                                     attribute=attribute, cache_path=Path(cache) if cache else dest / "score_cache.sqlite",
                                     checkpoint=ckpt, data=data)
        finally:
            model.close()
    finalize(results, inference)  # margins need every model (the panel rule)
    labels = {name: display_name(name, ckpt) for name, ckpt in checkpoints}
    for name, ckpt in checkpoints:
        dest = out if single else out / name
        paths = write_suitability({name: results[name]}, dest, title=f"Suitability of {labels[name]}", labels=labels)
        tracker = evaluation_tracker(f"suitability-{name}", dest, {"checkpoint": str(ckpt), "data": data,
                                                                   "perturbations": specs, **results[name]["settings"]},
                                     checkpoint=ckpt, project=wandb_project, mode=wandb_mode)
        try:
            log_suitability(tracker, {name: results[name]}, paths)
        finally:
            tracker.finish()
    joint = None if single else write_suitability(results, out, title=f"Suitability of {len(results)} checkpoints",
                                                  labels=labels)
    return results, joint


def suitability_from_pairs(pairs_path: str | os.PathLike, settings: SuitabilitySettings, out: str | os.PathLike, *,
                           groups: dict[str, str] | None = None, wandb_project: str = "matchrm",
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
