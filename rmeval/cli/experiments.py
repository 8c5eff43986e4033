"""The settings the experiment commands share (``rmeval pool``, ``rmeval leaderboard``, ``rmtrain
filter-experiment``): the recipe, the output directory, and overrides of the recipe's values."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from rmcore.settings import add_options, from_args, nested, option
from rmeval.cli.flags import WandbFlags


@dataclass
class ExperimentCommand:
    """An experiment run from its recipe: the recipe, where it writes, what of it the flags override."""

    config: str = option("", required=True, help="the experiment's recipe (YAML)")
    out: str | None = option(None, help="output directory (default: the recipe's output_dir)")
    data: str | None = option(None, help="data SPEC in place of the recipe's data")
    max_prompts: int | None = option(None, help="seeded sample of this many prompts")
    overrides: list[str] = option(default_factory=list, flag="--set", metavar="KEY=VALUE",
                                  help="override recipe values, e.g. sampling.n=2")
    wandb: WandbFlags = nested(WandbFlags)

    def recipe_overrides(self) -> list[str]:
        """--set items, then --data and --max-prompts, as KEY=VALUE overrides of the recipe."""
        extra = list(self.overrides)
        if self.data is not None:
            extra.append(f"data={json.dumps(self.data)}")  # quoted: a SPEC is text, never parsed as YAML
        if self.max_prompts is not None:
            extra.append(f"max_prompts={self.max_prompts}")
        return extra


def add_experiment_flags(p: argparse.ArgumentParser) -> None:
    """The flags of ``ExperimentCommand`` (for a command registered by hand: ``rmtrain filter-experiment``)."""
    add_options(p, ExperimentCommand)


def recipe_overrides(settings: ExperimentCommand | argparse.Namespace) -> list[str]:
    """``ExperimentCommand.recipe_overrides`` of the settings, or of a namespace parsed with
    ``add_experiment_flags``."""
    if isinstance(settings, argparse.Namespace):
        settings = from_args(ExperimentCommand, settings)
    return settings.recipe_overrides()
