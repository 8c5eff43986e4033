"""Flags the experiment commands share (``rmeval pool``, ``rmeval leaderboard``, ``rmtrain
filter-experiment``): the recipe, the output directory, and overrides of the recipe's values."""

from __future__ import annotations

import argparse
import json

from rmeval.cli.flags import add_wandb


def add_experiment_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="the experiment's recipe (YAML)")
    p.add_argument("--out", default=None, help="output directory (default: the recipe's output_dir)")
    p.add_argument("--data", default=None, help="data SPEC in place of the recipe's data")
    p.add_argument("--max-prompts", type=int, default=None, help="seeded sample of this many prompts")
    p.add_argument("--set", dest="overrides", nargs="+", default=[], metavar="KEY=VALUE",
                   help="override recipe values, e.g. sampling.n=2")
    add_wandb(p)


def recipe_overrides(args: argparse.Namespace) -> list[str]:
    """--set items, then --data and --max-prompts, as KEY=VALUE overrides of the recipe."""
    extra = list(args.overrides)
    if args.data is not None:
        extra.append(f"data={json.dumps(args.data)}")  # quoted: a SPEC is text, never parsed as YAML
    if args.max_prompts is not None:
        extra.append(f"max_prompts={args.max_prompts}")
    return extra
