"""Flags every ``rmtrain`` command that reads a recipe shares (:class:`RecipeCommand`, the base of
each command's settings), and turning a command's settings into recipe overrides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmcore.config import parse_override
from rmcore.settings import AppendEach, flag_overrides, option


@dataclass(kw_only=True)
class RecipeCommand:
    """The recipe, ``--set`` overrides of its keys, W&B mode and ``--force``; a command's settings
    extend it (its fields come first on the command line)."""

    config: str = option(required=True, help="recipe YAML (recipes/*.yaml)")
    overrides: list[str] = option(default_factory=list, flag="--set", action=AppendEach, metavar="KEY=VALUE",
                                  help="override any config key, e.g. training.learning_rate=1e-5 (repeat --set "
                                       "for each key)")
    wandb_mode: str | None = option(None, choices=["online", "offline", "disabled"], help="W&B mode",
                                    recipe_key="wandb.mode")
    force: bool = option(False, help="retrain even if train_summary.json exists")


def overrides(settings: RecipeCommand) -> dict[str, Any]:
    """--set pairs, then the flags declared with a ``recipe_key`` that were given (--wandb-mode,
    --arm, --seed, --model, --out ...), which win."""
    ov = dict(parse_override(o) for o in settings.overrides)
    ov.update(flag_overrides(settings))
    return ov
