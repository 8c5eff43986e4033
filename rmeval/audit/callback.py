"""Audit every saved checkpoint while ``rmtrain train`` runs.

``AuditCallback.on_save`` audits the *in-memory* model (no reload) with ``rmeval.audit.pipeline.audit`` on a
held-out slice of a rating set, by default under a cheap subset of conditions (original, generic,
random, prompt_only) with a small bootstrap (200 resamples; the recipe's ``audit`` block,
``rmeval.audit.settings.TrainingAuditSettings``), writes ``OUTPUT/checkpoint-N/audit/`` (audit.json,
audit.md, plots and tables) beside the checkpoint, and logs the flattened figures to the active
W&B run at that step (key ``train/global_step``, the step metric transformers' W&B callback uses).
With a suitability block (a recipe's ``audit.suitability``) the audit also runs the suitability
step on the cheap subset of perturbations (controlled and rule-based stylized: no rewriting
model), writes ``suitability.json``/``.md``/``.png`` beside the audit and puts its
per-perturbation figures under ``audit/suitability/...`` at that step.
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
from rmcore.errors import ConfigError
from rmeval.audit.pipeline import audit
from rmeval.audit.report import wandb_scalars
from rmeval.audit.settings import AuditSettings, TrainingAuditSettings
from rmeval.perturbations.suite import build_suite
from rmeval.scoring.seq_classifier import SeqClassifierScorer

log = logging.getLogger(__name__)


def check_audit_supported(zero_stage: int | None) -> None:
    """AuditCallback scores on rank 0 alone; under ZeRO-3 that forward waits forever for the other
    ranks' weight shards. Refuse it, as LoRA under ZeRO-3 is refused."""
    if zero_stage == 3:
        raise ConfigError("audit.enabled under DeepSpeed ZeRO-3 would hang: the audit scores on rank 0 only and "
                          "ZeRO-3 forwards are collective. Use ZeRO-2 or DDP, or audit the saved checkpoints "
                          "afterwards with `rmeval audit`")


class AuditCallback(TrainerCallback):
    """``settings``: the audit at each save (default: the recipe block's defaults, TrainingAuditSettings);
    ``max_prompts``: the first N prompts of ``rating_set``, the same slice at every save."""

    def __init__(self, rating_set: RatingSet, settings: AuditSettings | None = None, *, tokenizer: Any | None = None,
                 max_prompts: int | None = None, max_length: int | None = None, batch_size: int = 32,
                 log_to_wandb: bool = True) -> None:
        if max_prompts is not None and len(rating_set) > max_prompts:
            # first N prompts: the same slice at every step, so audits are comparable over training
            rating_set = rating_set.subset([p.prompt_id for p in rating_set.prompts[:max_prompts]])
        self.rating_set, self.tokenizer = rating_set, tokenizer
        self.settings = settings or TrainingAuditSettings().audit_settings()
        self.max_length, self.batch_size, self.log_to_wandb = max_length, batch_size, log_to_wandb
        self.history: list[dict[str, Any]] = []
        self.preference_set = None
        suit = self.settings.suitability
        if suit is not None:
            build_suite(list(suit.perturbations or ()), [])  # unknown codes fail now, not at step N
            if suit.data:  # loaded once, not at every save
                self.preference_set = suit.rating_set(rating_set, self.settings.stats.seed)

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
            scorer = SeqClassifierScorer(model, tokenizer=tok, max_length=self.max_length, batch_size=self.batch_size)
            result = audit(scorer, self.rating_set, self.settings, out, title=f"Audit at step {step}", cache=False,
                           preference_set=self.preference_set)
        finally:
            model.train(was_training)
        self.history.append({"step": step, "dir": str(out)})
        log.info("audit of checkpoint-%d written to %s (%.1fs)", step, out, time.perf_counter() - t0)
        if self.log_to_wandb:
            self._log_wandb(result, step)
        return control

    @staticmethod
    def _log_wandb(audit: dict[str, Any], step: int) -> None:
        try:
            import wandb
        except ImportError:
            return
        if wandb.run is None:
            return
        figures: dict[str, Any] = wandb_scalars(audit, "audit")
        figures["train/global_step"] = step
        wandb.run.log(figures)
