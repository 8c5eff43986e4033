"""Audit every saved checkpoint while ``rmtrain train`` runs.

``AuditCallback.on_save`` scores the *in-memory* model (no reload) on a held-out slice of a rating
set under a cheap subset of conditions (default original, generic, random, prompt_only), computes
the audit with a small bootstrap (default 200 resamples), writes ``OUTPUT/checkpoint-N/audit/``
(audit.json, audit.md, plots) beside the checkpoint, and logs the flattened figures to the active
W&B run at that step (key ``train/global_step``, the step metric transformers' W&B callback uses).
With ``suitability`` settings (a recipe's ``audit.suitability`` block) the audit also runs the
suitability inference (``rmeval.suitability``) on the cheap subset of perturbations (controlled and
rule-based stylized: no rewriting model), writes ``suitability.json``/``.md``/``.png`` beside the
audit and puts its per-perturbation figures under ``audit/suitability/...`` at that step.
Only the main process audits; the model is put back in training mode afterwards. Under DeepSpeed
ZeRO-3 a forward pass is collective (every rank holds a shard of each weight), so a rank-0-only
audit would hang the run: that combination is refused before training starts
(``check_audit_supported``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from rmcore.data.schema import RatingSet
from rmcore.tracking import flatten

log = logging.getLogger(__name__)

DEFAULT_CONDITIONS = ("original", "generic", "random", "prompt_only")


def pick_attribute(rating_set: RatingSet, attribute: str | None) -> str:
    """The requested attribute, else helpfulness, else the set's first attribute."""
    attrs = list(rating_set.attributes)
    if attribute and (attribute in attrs or not attrs):
        return attribute
    return "helpfulness" if "helpfulness" in attrs or not attrs else attrs[0]


def audit_model(model: Any, tokenizer: Any, rating_set: RatingSet, out_dir: str | Path, *,
                conditions: list[str] | tuple[str, ...] = DEFAULT_CONDITIONS, max_length: int | None = None,
                batch_size: int = 32, n_boot: int = 200, n_boot_regression: int | None = None,
                attribute: str = "helpfulness", seed: int = 0, title: str = "matchrm audit",
                suitability: dict[str, Any] | None = None, suitability_set: RatingSet | None = None,
                **condition_opts: Any) -> tuple[dict[str, Any], dict[str, Path]]:
    """Score an in-memory reward model under ``conditions`` and write its audit to ``out_dir``;
    with ``suitability`` settings also its suitability (on ``suitability_set``, default ``rating_set``)."""
    from rmcore.io import atomic_write_table
    from rmeval.report import write_report
    from rmeval.scoring.seq_classifier import SeqClassifierScorer
    from rmeval.scoring_run import score_conditions, truncation_summary
    from rmeval.stats.audit import compute_audit

    out = Path(out_dir)
    scorer = SeqClassifierScorer(model, tokenizer=tokenizer, max_length=max_length, batch_size=batch_size)
    scores = score_conditions(scorer, rating_set, list(conditions), seed=seed, **condition_opts)
    ratings = rating_set.ratings_table(tokenizer)
    audit = compute_audit(scores, ratings, attribute=attribute, n_boot=n_boot,
                          n_boot_regression=n_boot_regression or max(n_boot, 200), seed=seed)
    audit["truncation"] = truncation_summary(scores)
    if "donor_exclusions" in scores.attrs:
        audit["donor_exclusions"] = scores.attrs["donor_exclusions"]
    if suitability is not None:
        audit["suitability"] = run_audit_suitability(scorer, suitability_set or rating_set, out, suitability,
                                                     attribute=attribute, seed=seed, title=title)
    atomic_write_table(out / "scores.parquet", scores)
    paths = write_report(audit, out, title=title)
    return audit, paths


def check_audit_supported(zero_stage: int | None) -> None:
    """AuditCallback scores on rank 0 alone; under ZeRO-3 that forward waits forever for the other
    ranks' weight shards. Refuse it, as LoRA under ZeRO-3 is refused."""
    from rmcore.errors import ConfigError

    if zero_stage == 3:
        raise ConfigError("audit.enabled under DeepSpeed ZeRO-3 would hang: the audit scores on rank 0 only and "
                          "ZeRO-3 forwards are collective. Use ZeRO-2 or DDP, or audit the saved checkpoints "
                          "afterwards with `rmeval audit`")


def run_audit_suitability(scorer: Any, rating_set: RatingSet, out: Path, settings: dict[str, Any], *,
                          attribute: str = "helpfulness", seed: int = 0, title: str = "") -> dict[str, Any]:
    """The suitability part of a training-time audit; returns its JSON record (written to ``out``)."""
    from rmeval.perturbations.suite import CHEAP
    from rmeval.suitability import (
        SuitabilitySettings,
        finalize,
        model_json,
        run_suitability,
        write_suitability,
    )

    st = SuitabilitySettings(n_permutations=int(settings.get("n_permutations", 2000)), seed=seed,
                             q=float(settings.get("q", 0.05)), eta=float(settings.get("eta", 0.5)),
                             margin=settings.get("margin"))
    specs = list(settings.get("perturbations") or CHEAP)
    res = run_suitability(scorer, rating_set, specs, settings=st, max_items=settings.get("max_items"),
                          attribute=attribute)
    results = {"model": res}
    finalize(results, st)
    write_suitability(results, out, title=f"Suitability: {title}" if title else "Suitability")
    return model_json(res)


class AuditCallback(TrainerCallback):
    def __init__(self, rating_set: RatingSet, *, tokenizer: Any | None = None, max_prompts: int | None = None,
                 conditions: list[str] | tuple[str, ...] = DEFAULT_CONDITIONS, max_length: int | None = None,
                 batch_size: int = 32, n_boot: int = 200, attribute: str = "helpfulness", seed: int = 0,
                 log_to_wandb: bool = True, suitability: dict[str, Any] | None = None,
                 **condition_opts: Any) -> None:
        if max_prompts is not None and len(rating_set) > max_prompts:
            # first N prompts: the same slice at every step, so audits are comparable over training
            rating_set = rating_set.subset([p.prompt_id for p in rating_set.prompts[:max_prompts]])
        self.rating_set, self.tokenizer = rating_set, tokenizer
        self.conditions, self.max_length, self.batch_size = list(conditions), max_length, batch_size
        self.n_boot, self.attribute, self.seed = n_boot, pick_attribute(rating_set, attribute), seed
        self.log_to_wandb, self.condition_opts = log_to_wandb, condition_opts
        self.history: list[dict[str, Any]] = []
        self.suitability, self.suitability_set = suitability, None
        if suitability is not None:
            from rmeval.perturbations.suite import build_suite

            build_suite(list(suitability.get("perturbations") or ()), [])  # unknown codes fail now, not at step N
            if suitability.get("data"):
                from rmcore.data.registry import load_rating_set

                self.suitability_set = load_rating_set(dict(suitability["data"]))

    def check_supported(self, zero_stage: int | None) -> None:
        """Called by rmtrain.train once the trainer exists, before any step."""
        check_audit_supported(zero_stage)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if not getattr(state, "is_world_process_zero", True):
            return control
        model = kwargs.get("model")
        tok = self.tokenizer or kwargs.get("processing_class") or kwargs.get("tokenizer")
        if model is None or tok is None:
            log.warning("AuditCallback: no model/tokenizer passed to on_save; skipping the audit")
            return control
        step = int(state.global_step)
        out = Path(args.output_dir) / f"checkpoint-{step}" / "audit"
        t0 = time.perf_counter()
        was_training = model.training
        try:
            audit, _ = audit_model(model, tok, self.rating_set, out, conditions=self.conditions,
                                   max_length=self.max_length, batch_size=self.batch_size, n_boot=self.n_boot,
                                   attribute=self.attribute, seed=self.seed,
                                   title=f"Audit at step {step}", suitability=self.suitability,
                                   suitability_set=self.suitability_set, **self.condition_opts)
        finally:
            model.train(was_training)
        self.history.append({"step": step, "dir": str(out)})
        log.info("audit of checkpoint-%d written to %s (%.1fs)", step, out, time.perf_counter() - t0)
        if self.log_to_wandb:
            self._log_wandb(audit, step)
        return control

    @staticmethod
    def _log_wandb(audit: dict[str, Any], step: int) -> None:
        try:
            import wandb
        except ImportError:
            return
        if wandb.run is None:
            return
        figures = {k: v for k, v in flatten(audit, "audit").items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        figures["train/global_step"] = step
        wandb.run.log(figures)
