"""The settings the experiment commands share (``rmeval pool``, ``rmeval leaderboard``, ``rmtrain
filter-experiment``): the recipe, the output directory, and overrides of the recipe's values."""

from __future__ import annotations

import json
from dataclasses import dataclass

from rmcore.settings import AppendEach, nested, option, output_folder
from rmeval.cli.flags import WandbFlags


@dataclass
class ExperimentCommand:
    """An experiment run from its recipe: the recipe, where it writes, what of it the flags override."""

    config: str = option("", required=True, help="the experiment's recipe (YAML)")
    out: str | None = option(None, parse=output_folder("--out"),
                             help="output directory (default: the recipe's output_dir)")
    data: str | None = option(None, help="data SPEC in place of the recipe's data")
    max_prompts: int | None = option(None, ge=1, help="seeded sample of this many prompts")
    overrides: list[str] = option(default_factory=list, flag="--set", action=AppendEach, metavar="KEY=VALUE",
                                  help="override a recipe value, e.g. sampling.n=2 (repeat --set for each key)")
    wandb: WandbFlags = nested(WandbFlags)

    def recipe_overrides(self) -> list[str]:
        """--set items, then --data and --max-prompts, as KEY=VALUE overrides of the recipe."""
        extra = list(self.overrides)
        if self.data is not None:
            extra.append(f"data={json.dumps(self.data)}")  # quoted: a SPEC is text, never parsed as YAML
        if self.max_prompts is not None:
            extra.append(f"max_prompts={self.max_prompts}")
        return extra
