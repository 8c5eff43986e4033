"""The settings the experiment commands share (``rmeval pool``, ``rmeval leaderboard``, ``rmtrain
filter-experiment``): the recipe, the output directory, and overrides of the recipe's values
(``rmcore.settings.commands.recipe_overrides``: ``--set`` items, then ``--data`` and ``--max-prompts``)."""

from __future__ import annotations

from dataclasses import dataclass

from rmcore.runtime.wandb_log import WandbFlags
from rmcore.settings.fields import AppendEach, option, output_folder
from rmeval.cli.flags import wandb_flags


@dataclass
class ExperimentCommand:
    """An experiment run from its recipe: the recipe, where it writes, what of it the flags override."""

    config: str = option("", required=True, help="the experiment's recipe (YAML)")
    out: str | None = option(None, parse=output_folder("--out"),
                             help="output directory (default: the recipe's output_dir)")
    data: str | None = option(None, recipe_key="data", help="data SPEC in place of the recipe's data")
    max_prompts: int | None = option(None, ge=1, recipe_key="max_prompts", help="seeded sample of this many prompts")
    overrides: list[str] = option(default_factory=list, flag="--set", action=AppendEach, metavar="KEY=VALUE",
                                  help="override a recipe value, e.g. sampling.n=2 (repeat --set for each key)")
    wandb: WandbFlags = wandb_flags()

