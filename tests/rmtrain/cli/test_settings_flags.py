"""Each ``rmtrain`` command's flags are its settings dataclass's fields (rmcore.settings.fields): every
field has a flag and every flag a field, the defaults, choices and required flags are the ones the
commands had when they were written by hand, and the flags that override recipe keys map onto them."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from rmcore.runtime.wandb_log import WandbFlags
from rmcore.settings.commands import recipe_overrides as overrides
from rmcore.settings.fields import AppendEach, flag_names, from_args, option_dests, parser_dests, parser_flags
from rmeval.cli.experiments import ExperimentCommand
from rmtrain.cli import build_parser
from rmtrain.cli.check import CheckCommand
from rmtrain.cli.policy import PolicyCommand, PolicyEvalCommand
from rmtrain.cli.sweep import SweepCommand
from rmtrain.cli.train import TrainCommand

SETTINGS = {"train": TrainCommand, "sweep": SweepCommand, "policy": PolicyCommand, "policy-eval": PolicyEvalCommand,
            "check": CheckCommand, "filter-experiment": ExperimentCommand}

WANDB = ("online", "offline", "disabled")
DTYPES = ("auto", "float32", "bfloat16", "float16")
RECIPE = {"--config": (None, None, True), "--set": ([], None, False), "--wandb-mode": (None, WANDB, False),
          "--force": (False, None, False)}
# flag -> (default, choices, required), as the commands declared them by hand before their settings
BEFORE: dict[str, dict[str, tuple[Any, Any, bool]]] = {
    "train": {**RECIPE, "--arm": (None, None, False), "--seed": (None, None, False), "--model": (None, None, False),
              "--out": (None, None, False)},
    "sweep": {**RECIPE, "--out": (None, None, False), "--dry-run": (False, None, False),
              "--executor": ("local", ("local", "slurm", "submitit-local"), False),
              "--max-parallel": (None, None, False)},
    "policy": {**RECIPE, "--reward-model": (None, None, True), "--environment": (None, None, True),
               "--out": (None, None, False), "--launch": (False, None, False),
               "--collect": (False, None, False), "--device": (None, None, False),
               "--dtype": (None, DTYPES, False)},
    "policy-eval": {**RECIPE, "--clean": (None, None, False), "--perturbed": (None, None, False),
                    "--judge": (None, None, False), "--judge-base-url": (None, None, False),
                    "--out": (None, None, True), "--device": (None, None, False), "--dtype": (None, DTYPES, False)},
    "check": {},
    "filter-experiment": {"--config": (None, None, True), "--out": (None, None, False),
                          "--data": (None, None, False), "--max-prompts": (None, None, False),
                          "--set": ([], None, False), "--wandb-mode": (None, WANDB, False),
                          "--wandb-project": ("matchrm", None, False)},
}
# what each flag parses to (int flags) and how many values it takes, as before
TYPED = {("train", "--seed"): int, ("sweep", "--max-parallel"): int, ("filter-experiment", "--max-prompts"): int}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    ap = build_parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("command", list(SETTINGS))
def test_every_field_is_a_flag_and_every_flag_a_field(command: str) -> None:
    p = _subparsers()[command]
    cls = SETTINGS[command]
    assert parser_flags(p) == flag_names(cls) == set(BEFORE[command])
    assert parser_dests(p) == option_dests(cls)
    assert p.get_default("settings") is cls


@pytest.mark.parametrize("command", list(SETTINGS))
def test_defaults_choices_and_required_flags_are_todays(command: str) -> None:
    p = _subparsers()[command]
    for a in p._actions:
        if not a.option_strings or a.dest == "help" or a.help == argparse.SUPPRESS:
            continue  # a hidden old name (--output-dir): tests/rmtrain/cli/test_vocabulary.py
        flag = a.option_strings[0]
        default, choices, required = BEFORE[command][flag]
        assert (a.default if not a.required else None, tuple(a.choices) if a.choices else None, a.required) == (
            default, choices, required), flag
        # an int flag parses an int; the others keep the text (argparse's default, or str)
        assert a.type in ((TYPED[command, flag],) if (command, flag) in TYPED else (None, str)), flag
        if flag == "--set":  # once per pair in every command (the old K=V K=V form still reads)
            assert (a.metavar, type(a)) == ("KEY=VALUE", AppendEach)
        if default is False:
            assert isinstance(a, argparse._StoreTrueAction), flag


def test_check_takes_one_or_more_recipes() -> None:
    p = _subparsers()["check"]
    (a,) = [a for a in p._actions if a.dest != "help"]
    assert (a.option_strings, a.dest, a.nargs) == ([], "recipes", "+")
    assert from_args(CheckCommand, p.parse_args(["a.yaml", "b.yaml"])) == CheckCommand(recipes=["a.yaml", "b.yaml"])


def _settings(command: str, argv: list[str]) -> Any:
    return from_args(SETTINGS[command], _subparsers()[command].parse_args(argv))


def test_the_settings_read_back_with_todays_defaults() -> None:
    assert _settings("train", ["--config", "r.yaml"]) == TrainCommand(
        config="r.yaml", overrides=[], wandb=WandbFlags(wandb_mode=None), force=False, arm=None, seed=None, model=None,
        output_dir=None)
    assert _settings("sweep", ["--config", "r.yaml", "--max-parallel", "3"]) == SweepCommand(
        config="r.yaml", output_dir=None, dry_run=False, executor="local", max_parallel=3)
    s = _settings("filter-experiment", ["--config", "r.yaml", "--set", "a=1", "--set", "b=2"])
    assert s == ExperimentCommand(config="r.yaml", out=None, data=None, max_prompts=None, overrides=["a=1", "b=2"],
                                  wandb=WandbFlags(wandb_mode=None, wandb_project="matchrm"))
    assert overrides(s) == {"a": 1, "b": 2} and s.wandb.target() == {"wandb_mode": None,
                                                                     "wandb_project": "matchrm"}
    s = _settings("filter-experiment", ["--config", "r.yaml", "--out", "o", "--data", "simulated", "--max-prompts",
                                        "5", "--wandb-mode", "offline", "--wandb-project", "p"])
    assert (s.out, overrides(s), s.wandb.target()) == (
        "o", {"data": "simulated", "max_prompts": 5}, {"wandb_mode": "offline", "wandb_project": "p"})


def test_flags_override_their_recipe_keys_over_set() -> None:
    """--set pairs first, then each dedicated flag that was given, onto its recipe key (or keys)."""
    recipe = ["--config", "r.yaml", "--set", "seed=9", "--set", "training.max_steps=4"]
    assert overrides(_settings("train", recipe)) == {"seed": 9, "training.max_steps": 4}
    s = _settings("train", [*recipe, "--seed", "3", "--arm", "regression", "--model", "m", "--out", "o",
                            "--wandb-mode", "offline", "--force"])
    assert overrides(s) == {"seed": 3, "training.max_steps": 4, "wandb.mode": "offline", "arm": "regression",
                            "model.name_or_path": "m", "output_dir": "o"}
    assert overrides(_settings("sweep", ["--config", "r", "--out", "o", "--executor", "slurm"])) == {
        "sweep.output_root": "o"}
    s = _settings("policy", ["--config", "r", "--reward-model", "rm", "--environment", "clean", "--out", "o",
                             "--device", "cpu", "--dtype", "float32"])
    assert overrides(s) == {"environment": "clean", "training.reward_device": "cpu", "openrlhf.reward_device": "cpu",
                            "training.reward_dtype": "float32", "openrlhf.reward_dtype": "float32"}
    s = _settings("policy-eval", ["--config", "r", "--out", "o", "--judge", "openai:x", "--judge-base-url", "u",
                                  "--device", "cpu"])
    assert overrides(s) == {"evaluation.judge": "openai:x", "evaluation.judge_base_url": "u",
                            "evaluation.device": "cpu"}
