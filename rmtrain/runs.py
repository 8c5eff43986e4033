"""The wiring layer for one run: `rmtrain.train` with `rmeval`'s audit callback attached, and the
full audit of a finished checkpoint. The CLI and the sweep call these; the libraries below
(`rmtrain.train`, `rmtrain.trainer`, `rmcore.data`, ...) never run an audit (the recipe's audit
blocks are rmeval's settings, which `rmtrain.config` only reads)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from rmcore.data.loading import load_rating_set
from rmeval.audit.callback import AuditCallback
from rmeval.audit.pipeline import audit_checkpoint, audit_line
from rmeval.audit.settings import FinalAuditSettings
from rmeval.scoring import ScorerSettings
from rmeval.stats.audit_sections import figure_values
from rmtrain.config import TrainConfig
from rmtrain.prepare import PreparedData, load_run_data, prompt_texts, split_prompts
from rmtrain.train import train

log = logging.getLogger(__name__)

def audit_callback(cfg: TrainConfig, data: PreparedData, tokenizer: Any) -> Any:
    """rmeval's AuditCallback on the run's held-out prompts (the recipe's `audit` section)."""
    # the recipe's audit.max_prompts, and nothing else, decides how many held-out prompts are audited;
    # the scorer lowers max_length to what the model can read
    held_rs = data.rating_set.subset(data.heldout_prompt_ids[: cfg.audit.max_prompts])
    cfg.audit.check_memory(held_rs)  # before the first step: an n_boot that cannot fit is said now
    return AuditCallback(held_rs, cfg.audit.audit_settings(cfg.attribute), tokenizer=tokenizer,
                         max_prompts=cfg.audit.max_prompts, max_length=cfg.training.max_length)


def train_run(cfg: TrainConfig, *, force: bool = False) -> dict[str, Any]:
    """`rmtrain.train.train` with the audit callback attached when the recipe enables it."""
    return train(cfg, force=force, callbacks=[audit_callback] if cfg.audit.enabled else [])


def audit_rating_set(cfg: TrainConfig, settings: FinalAuditSettings) -> tuple[Any, dict[str, int]]:
    """The prompts the final audit reads: the held-out split of the run's data, or `settings.data`
    with every prompt whose text is a training or selection prompt removed (and counted). Every run
    of a sweep shares the split, so no run trained on these prompts. The split alone is redrawn
    (rmtrain.prepare.split_prompts): no pairs are built."""
    run_rs = load_run_data(cfg)
    train_ids, held_ids, sel_ids = split_prompts(cfg, run_rs)
    if settings.data is None:
        rs = run_rs.subset(held_ids)
        counts = {"n_candidate_prompts": len(rs), "n_dropped_seen_in_training": 0}
    else:
        texts = prompt_texts(run_rs)
        seen = {texts[p] for p in (*train_ids, *sel_ids)}
        cand = load_rating_set(dict(settings.data))
        keep = [pid for pid, t in prompt_texts(cand).items() if t not in seen]
        counts = {"n_candidate_prompts": len(cand), "n_dropped_seen_in_training": len(cand) - len(keep)}
        rs = cand.subset(keep)
    rs = rs.sample(settings.max_prompts, settings.base.stats.seed)  # the same seeded sample for every run of the sweep
    counts["n_audit_prompts"] = len(rs)
    return rs, counts


def final_audit(cfg: TrainConfig, settings: FinalAuditSettings, out: Path, *,
                wandb_mode: str | None = None, shard: Any = None) -> dict[str, Any] | None:
    """Full rmeval audit of the finished checkpoint in cfg.output_dir (loaded from disk, as any
    user would, placed as ``settings`` say), written to `out`; the audited prompts' counts go into
    audit.json's ``meta.prompts``. Returns the sweep figures (``audit_record_figures``); None in a
    process that only scored its share (``shard``: one of several processes of one audit)."""
    rs, counts = audit_rating_set(cfg, settings)
    settings.check_memory(rs)  # before the model loads
    where = json.dumps(settings.data) if settings.data else f"held-out prompts of {json.dumps(cfg.data)}"
    name = f"{cfg.arm}-seed{cfg.seed}"
    scorer = ScorerSettings(batch_size=settings.batch_size, max_length=settings.max_length or cfg.training.max_length,
                            max_tokens=settings.max_tokens,
                            placement=settings.placement(cfg.model.trust_remote_code, cfg.model.attn_implementation))
    audit = audit_checkpoint(Path(cfg.output_dir), rs, scorer, settings.audit_settings(cfg.attribute), out, name=name,
                             data=where, wandb_project=cfg.wandb.project, wandb_mode=wandb_mode or cfg.wandb.mode,
                             shard=shard, meta={"prompts": counts})
    if audit is None:
        return None
    print(audit_line(name, audit, out))
    return audit_record_figures(audit)


def audit_record_figures(audit: dict[str, Any]) -> dict[str, Any]:
    """The sweep's figures of one run's final audit record (audit.json): ``audit_figures`` plus
    the prompt counts."""
    return {**audit_figures(audit), **audit.get("meta", {}).get("prompts", {})}


def audit_figures(audit: dict[str, Any]) -> dict[str, float | None]:
    """The figures a run's final audit gives its ledger row (``rmeval.stats.audit_sections.sweep_figures``:
    the run's and the data's; its pair accuracy is training's held-out one)."""
    return figure_values(audit, "run", "reference")
