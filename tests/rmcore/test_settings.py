"""rmcore.settings: flags generated from a settings dataclass and read back into it; recipes read
an embedded settings object from its parent's keys."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from rmcore.config import build_config
from rmcore.errors import ConfigError
from rmcore.settings import add_options, flag_names, from_args, nested, option, parser_flags


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
