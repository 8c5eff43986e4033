"""Flags every ``rmtrain`` command that reads a recipe shares, and turning them into overrides."""

from __future__ import annotations

import argparse
from typing import Any

from rmcore.config import parse_override


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="recipe YAML (recipes/*.yaml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config key, e.g. training.learning_rate=1e-5 (repeatable)")
    p.add_argument("--wandb-mode", choices=["online", "offline", "disabled"], help="W&B mode")
    p.add_argument("--force", action="store_true", help="retrain even if train_summary.json exists")


def overrides(args: argparse.Namespace, output_key: str = "output_dir") -> dict[str, Any]:
    """--set pairs, then the dedicated flags (--wandb-mode, --arm, --seed, --model, --output-dir
    as ``output_key``), which win."""
    ov = dict(parse_override(o) for o in args.overrides)
    if getattr(args, "wandb_mode", None):
        ov["wandb.mode"] = args.wandb_mode
    for flag, key in (("arm", "arm"), ("seed", "seed"), ("model", "model.name_or_path"), ("output_dir", output_key)):
        v = getattr(args, flag, None)
        if v is not None:
            ov[key] = v
    return ov
