"""What the experiment commands share (``rmeval pool``, ``rmeval leaderboard``, ``rmtrain
filter-experiment``): their recipes' policy, reward-model and judge blocks, loading a recipe
strictly, and the notice every toy run prints.

A recipe names its kind at the top (``experiment: pool | leaderboard | filtering``) and is read into
the command's dataclass by ``rmcore.settings.recipes`` (an unknown key is an error naming the key and the
file). Policies are a list of mappings (``rmeval.experiments.responses.PolicySpec``), reward models a mapping
name -> checkpoint or name -> {model, kind, batch_size, max_length, ...} (``ScorerSettings``),
judges a mapping name -> ``rmeval.experiments.comparisons.JudgeSpec``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypeVar

from rmcore.errors import ConfigError
from rmcore.settings.recipes import build_config, config_from_dict, load_recipe, parse_override
from rmeval.experiments.comparisons import JudgeSpec
from rmeval.experiments.responses import TINY, PolicySpec
from rmeval.scoring import SCORERS, ScorerSettings

T = TypeVar("T")
KINDS = ("pool", "leaderboard", "filtering")  # what a recipe's ``experiment`` may say
TOY_NOTICE = ("TOY RUN: tiny untrained local models (a toy recipe). It exercises the pipeline end to end; "
              "its figures mean nothing.")


def policy_specs(items: Any, where: str) -> list[Any]:
    """The ``policies`` block: a list of PolicySpec mappings, names unique."""
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{where}: policies must be a non-empty list of {{name, model, ...}} mappings")
    out = []
    for i, item in enumerate(items):
        spec = build_config(PolicySpec, item, f"{where}[{i}]")
        spec.validate()
        out.append(spec)
    names = [p.name for p in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: policy names must be unique, got {names}")
    return out


def reward_models(block: Any, where: str) -> dict[str, Any]:
    """The ``reward_models`` block: name -> ScorerSettings (a bare string is the model)."""
    if not isinstance(block, Mapping) or not block:
        raise ConfigError(f"{where}: reward_models must map names to checkpoints")
    out = {}
    for name, v in block.items():
        s = build_config(ScorerSettings, {"model": v} if isinstance(v, str) else v, f"{where}.{name}")
        if not s.model:
            raise ConfigError(f"{where}.{name}: no model")
        if s.kind not in SCORERS:
            raise ConfigError(f"{where}.{name}: unknown scorer kind '{s.kind}'")
        out[str(name)] = s
    return out


def check_reward_models(settings: Mapping[str, Any]) -> None:
    """Each reward model (``seq_classifier``) the recipe names is a local path or a Hub id, checked
    before anything is generated: a missing checkpoint is one line saying what writes it."""
    # torch: this module loads without it
    from rmeval.scoring.loaders import check_reward_path

    for s in settings.values():
        if s.kind == "seq_classifier" and not str(s.model).startswith(TINY):
            check_reward_path(s.model)


def judge_specs(block: Any, where: str) -> dict[str, Any]:
    """The ``judges`` block: name -> JudgeSpec (a bare string is a local model); the first is the
    primary judge."""
    if not isinstance(block, Mapping) or not block:
        raise ConfigError(f"{where}: judges must map names to judge models")
    out = {}
    for name, v in block.items():
        spec = build_config(JudgeSpec, {"model": v} if isinstance(v, str) else v, f"{where}.{name}")
        spec.validate()
        out[str(name)] = spec
    return out


def load_experiment(cls: type[T], path: str | os.PathLike, kind: str, *,
                    overrides: Mapping[str, Any] | list[str] | None = None, required: tuple[str, ...] = ()) -> T:
    """The recipe at ``path`` (``experiment: kind``) as ``cls``, with overrides: a mapping of dotted
    keys (a command's, ``rmcore.settings.commands.recipe_overrides``) or ``KEY=VALUE`` items."""
    raw = load_recipe(path)
    if raw.get("experiment") != kind:
        raise ConfigError(f"{path}: not a {kind} recipe (it says experiment: {raw.get('experiment')!r})")
    pairs = dict(overrides) if isinstance(overrides, Mapping) else dict(parse_override(o) for o in overrides or [])
    return config_from_dict(cls, raw, where=str(path), overrides=pairs, required=required,
                            drop=("description", "experiment"))
