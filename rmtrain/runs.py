"""The wiring layer for one run: `rmtrain.train` with `rmeval`'s audit callback attached, and the
full audit of a finished checkpoint. The CLI and the sweep call these; the libraries below
(`rmtrain.train`, `rmtrain.trainer`, `rmcore.data`, ...) never import `rmeval`."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from rmtrain.config import FinalAuditSettings, TrainConfig
from rmtrain.prepare import PreparedData, prepare_data, prompt_texts

log = logging.getLogger(__name__)

# The figures a sweep reports per run, and where each sits in an rmeval audit.
AUDIT_FIGURES = {
    "share_original": ("share", "original", "estimate"),
    "share_generic": ("share", "generic", "estimate"),
    "share_human": ("share", "human", "estimate"),
    "transplant_random_margin_sd": ("transplant", "random", "margin_sd", "estimate"),
    "transplant_random_accuracy": ("transplant", "random", "accuracy", "estimate"),
    "sibling_coefficient": ("sibling_regression", "sibling", "estimate"),
}


def audit_callback(cfg: TrainConfig, data: PreparedData, tokenizer: Any) -> Any:
    """rmeval's AuditCallback on the run's held-out prompts (the recipe's `audit` section)."""
    from rmeval.callback import AuditCallback

    # the recipe's audit.max_prompts, and nothing else, decides how many held-out prompts are audited;
    # the scorer lowers max_length to what the model can read
    held_rs = data.rating_set.subset(data.heldout_prompt_ids[: cfg.audit.max_prompts])
    suit = cfg.audit.suitability
    return AuditCallback(rating_set=held_rs, tokenizer=tokenizer, conditions=cfg.audit.conditions,
                         max_prompts=cfg.audit.max_prompts, max_length=cfg.training.max_length,
                         n_boot=cfg.audit.n_boot, attribute=cfg.attribute,
                         suitability=dataclasses.asdict(suit) if suit.enabled else None)


def train_run(cfg: TrainConfig, *, force: bool = False) -> dict[str, Any]:
    """`rmtrain.train.train` with the audit callback attached when the recipe enables it."""
    from rmtrain.train import train

    return train(cfg, force=force, callbacks=[audit_callback] if cfg.audit.enabled else [])


def audit_rating_set(cfg: TrainConfig, settings: FinalAuditSettings) -> tuple[Any, dict[str, int]]:
    """The prompts the final audit reads: the held-out split of the run's data, or `settings.data`
    with every prompt whose text is a training or selection prompt removed (and counted). Every run
    of a sweep shares the split, so no run trained on these prompts."""
    import numpy as np

    from rmcore.data.registry import load_rating_set

    data = prepare_data(cfg)
    if settings.data is None:
        rs = data.rating_set.subset(data.heldout_prompt_ids)
        counts = {"n_candidate_prompts": len(rs), "n_dropped_seen_in_training": 0}
    else:
        seen_ids = set(data.train_prompt_ids) | set(data.selection_prompt_ids)
        texts = prompt_texts(data.rating_set)
        seen = {texts[p] for p in seen_ids}
        cand = load_rating_set(dict(settings.data))
        keep = [pid for pid, t in prompt_texts(cand).items() if t not in seen]
        counts = {"n_candidate_prompts": len(cand), "n_dropped_seen_in_training": len(cand) - len(keep)}
        rs = cand.subset(keep)
    if settings.max_prompts is not None and len(rs) > settings.max_prompts:
        # the same seeded sample for every run of the sweep
        idx = np.sort(np.random.default_rng(settings.seed).choice(len(rs), size=settings.max_prompts, replace=False))
        rs = rs.subset([rs.prompts[i].prompt_id for i in idx])
    counts["n_audit_prompts"] = len(rs)
    return rs, counts


def final_audit(cfg: TrainConfig, settings: FinalAuditSettings, out: Path, *,
                wandb_mode: str | None = None) -> dict[str, Any]:
    """Full rmeval audit of the finished checkpoint in cfg.output_dir (loaded from disk, as any
    user would), written to `out`. Returns the sweep figures (AUDIT_FIGURES) plus prompt counts."""
    from rmeval.cli import audit_checkpoint, build_parser

    rs, counts = audit_rating_set(cfg, settings)
    import json

    where = json.dumps(settings.data) if settings.data else f"held-out prompts of {json.dumps(cfg.data)}"
    argv = ["audit", "--checkpoint", cfg.output_dir, "--data", where, "--out", str(out),
            "--n-boot", str(settings.n_boot), "--n-boot-regression", str(settings.n_boot),
            "--seed", str(settings.seed), "--max-length", str(settings.max_length or cfg.training.max_length),
            "--batch-size", str(settings.batch_size), "--attribute", cfg.attribute,
            "--wandb-project", cfg.wandb.project, "--conditions", *settings.conditions]
    for flag, value in (("--paraphrase-file", settings.paraphrase_file), ("--related-file", settings.related_file),
                        ("--wandb-mode", wandb_mode or cfg.wandb.mode)):
        if value:
            argv += [flag, str(value)]
    args = build_parser().parse_args(argv)
    audit = audit_checkpoint(args, f"{cfg.arm}-seed{cfg.seed}", Path(cfg.output_dir), rs,
                             list(settings.conditions), out)
    return {**audit_figures(audit), **counts}


def audit_figures(audit: dict[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, path in AUDIT_FIGURES.items():
        cur: Any = audit
        for k in path:
            cur = cur.get(k) if isinstance(cur, dict) else None
        out[name] = float(cur) if cur is not None else None
    return out
