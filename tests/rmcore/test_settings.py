"""rmcore.settings: flags generated from a settings dataclass and read back into it; recipes read
an embedded settings object from its parent's keys."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from rmcore.config import build_config
from rmcore.errors import ConfigError
from rmcore.settings import (
    add_options,
    flag_names,
    flag_overrides,
    from_args,
    nested,
    option,
    option_dests,
    parser_dests,
    parser_flags,
)


def _pairs(items: list[str] | None) -> dict[str, float]:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--reliability takes NAME=R, got {item!r}")
        out[name] = float(value)
    return out


@dataclasses.dataclass
class Batching:
    batch_size: int = option(32, help="texts per forward")
    no_progress: bool = option(False, help="no progress bars")


@dataclasses.dataclass
class Command:
    n_boot: int = option(2000, help="bootstrap resamples")
    conditions: list[str] | None = option(None, help="conditions")
    ties: str = option("half", help="ties", choices=["half", "wrong"])
    reliability: dict[str, float] = option(default_factory=dict, help="NAME=R", nargs="+", parse=_pairs,
                                           flag="--human-reliability")
    batching: Batching = nested(Batching, embed=True)
    set_by_code: int = 5


def _parser(**defaults) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="x", exit_on_error=False)
    add_options(p, Command, defaults=defaults)
    return p


def test_flags_come_from_the_fields_and_read_back() -> None:
    p = _parser()
    assert parser_flags(p) == flag_names(Command) == {
        "--n-boot", "--conditions", "--ties", "--human-reliability", "--batch-size", "--no-progress"}
    s = from_args(Command, p.parse_args(["--conditions", "original", "generic", "--batch-size", "8",
                                         "--no-progress", "--human-reliability", "a=0.5", "b=0.25"]))
    assert s == Command(n_boot=2000, conditions=["original", "generic"], ties="half",
                        reliability={"a": 0.5, "b": 0.25}, batching=Batching(8, True))
    assert from_args(Command, p.parse_args([])) == Command()


def test_command_defaults_types_and_choices() -> None:
    p = _parser(n_boot=1000, batching={"batch_size": 4})
    s = from_args(Command, p.parse_args([]))
    assert (s.n_boot, s.batching.batch_size) == (1000, 4)
    assert from_args(Command, p.parse_args(["--n-boot", "7"])).n_boot == 7
    with pytest.raises(argparse.ArgumentError):
        p.parse_args(["--ties", "draw"])
    with pytest.raises(argparse.ArgumentError):
        p.parse_args(["--n-boot", "x"])
    with pytest.raises(ConfigError, match="NAME=R"):
        from_args(Command, p.parse_args(["--human-reliability", "0.5"]))


def test_given_fields_and_an_embedded_recipe_block() -> None:
    p = _parser()
    assert from_args(Command, p.parse_args([]), set_by_code=9).set_by_code == 9
    s = build_config(Command, {"n_boot": 3, "batch_size": 4}, "recipe")
    assert (s.n_boot, s.batching, s.set_by_code) == (3, Batching(4, False), 5)
    with pytest.raises(ConfigError, match="unknown key"):
        build_config(Command, {"batch_sise": 4}, "recipe")


@dataclasses.dataclass(kw_only=True)
class Recipe:
    config: str = option(help="recipe", required=True)
    overrides: list[str] = option(default_factory=list, flag="--set", action="append", metavar="KEY=VALUE",
                                  help="KEY=VALUE (repeatable)")
    mode: str | None = option(None, help="W&B mode", choices=["online", "offline"], recipe_key="wandb.mode")


@dataclasses.dataclass(kw_only=True)
class Train(Recipe):
    model: str | None = option(None, help="base model", recipe_key="model.name_or_path")
    device: str | None = option(None, help="device", recipe_key=("training.device", "eval.device"))
    files: list[str] = option(default_factory=list, positional=True, help="files")


def test_positional_append_and_recipe_keys() -> None:
    p = argparse.ArgumentParser(prog="x", exit_on_error=False)
    add_options(p, Train)
    assert parser_flags(p) == flag_names(Train) == {"--config", "--set", "--mode", "--model", "--device"}
    assert parser_dests(p) == option_dests(Train) == {"config", "overrides", "mode", "model", "device", "files"}
    assert "--set KEY=VALUE" in p.format_usage() and "files [files ...]" in p.format_usage()
    s = from_args(Train, p.parse_args(["--config", "r.yaml", "a", "b", "--set", "x=1", "--set", "y=2",
                                       "--model", "m", "--device", "cpu"]))
    assert s == Train(config="r.yaml", overrides=["x=1", "y=2"], model="m", device="cpu", files=["a", "b"])
    # only the flags given override their recipe keys; one flag may set several keys
    assert flag_overrides(s) == {"model.name_or_path": "m", "training.device": "cpu", "eval.device": "cpu"}
    assert flag_overrides(from_args(Train, p.parse_args(["--config", "r", "f", "--mode", "online"]))) == {
        "wandb.mode": "online"}
    with pytest.raises(SystemExit):  # a missing argument exits even with exit_on_error=False
        p.parse_args(["--config", "r"])  # the positional takes one or more
