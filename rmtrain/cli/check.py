"""``rmtrain check``: validate recipes without training (a policy recipe, a sweep, or one run)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rmcore.settings.commands import add_command
from rmcore.settings.fields import option
from rmcore.settings.recipes import load_recipe


@dataclass(kw_only=True)
class CheckCommand:
    """``rmtrain check``'s settings."""

    recipes: list[str] = option(default_factory=list, positional=True,
                                help="recipe YAML files: a training run, a sweep, a policy recipe or an experiment")


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "check", CheckCommand, run, help="validate recipes without training")


def check_recipe(path: str) -> str:
    """What the recipe holds, once it has loaded and validated like the command that runs it."""
    raw = load_recipe(path)  # first: a missing or malformed recipe is said before torch loads
    # torch: --help stays cheap
    from rmtrain.config import load_sweep, load_train_config

    if "reproduce" in raw:  # rmeval reproduce: a published table
        # scipy: --help stays cheap
        from rmeval.reproduce.recipe import build_recipe

        r = build_recipe(raw, path)
        return (f"ok (reproduction of {r.reproduce.table}, {r.reproduce.analysis}, {len(r.models)} models, "
                f"{len(r.published)} published figures)")
    if "experiment" in raw:  # rmeval pool / leaderboard, rmtrain filter-experiment
        # torch: --help stays cheap
        from rmtrain.filtering import check_experiment_recipe

        return check_experiment_recipe(path)
    if "policy" in raw:
        # torch: --help stays cheap
        from rmtrain.policy.config import load_policy_config

        pc = load_policy_config(path)
        return f"ok (policy, {pc.training.algorithm}, {len(pc.reward_model_names())} reward models)"
    if "sweep" in raw:
        # torch: --help stays cheap
        from rmtrain.sweep import expand

        load_train_config(path)  # the recipe as `rmtrain train` reads it (its seed, arm: the sweep sets its own)
        m = expand(load_sweep(path))
        return f"ok ({len(m.seeds)} runs, {len(m.search)} search runs)"
    load_train_config(path)
    return "ok"


def run(s: CheckCommand) -> int:
    for r in s.recipes:
        print(f"{r}: {check_recipe(r)}")
    return 0
