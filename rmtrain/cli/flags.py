"""Flags every ``rmtrain`` command that reads a recipe shares (:class:`RecipeCommand`, the base of
each command's settings); a command's settings become recipe overrides as every command's do
(``rmcore.settings.commands.recipe_overrides``)."""

from __future__ import annotations

from dataclasses import dataclass

from rmcore.runtime.wandb_log import WandbFlags
from rmcore.settings.fields import AppendEach, nested, option


@dataclass(kw_only=True)
class RecipeCommand:
    """The recipe, ``--set`` overrides of its keys, W&B mode and ``--force``; a command's settings
    extend it (its fields come first on the command line)."""

    config: str = option(required=True, help="recipe YAML (recipes/*.yaml)")
    overrides: list[str] = option(default_factory=list, flag="--set", action=AppendEach, metavar="KEY=VALUE",
                                  help="override any config key, e.g. training.learning_rate=1e-5 (repeat --set "
                                       "for each key)")
    # the recipe's wandb block says the rest (rmtrain.config.WandbSettings)
    wandb: WandbFlags = nested(WandbFlags, only=("wandb_mode",),
                               options={"wandb_mode": {"help": "W&B mode", "recipe_keys": ("wandb.mode",)}})
    force: bool = option(False, help="retrain even if train_summary.json exists")
