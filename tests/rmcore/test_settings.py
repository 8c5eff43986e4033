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


@dataclasses.dataclass
class Probes:
    embedders: list[str] = option(default_factory=list, help="encoders", metavar="MODEL")
    learners: list[str] = option(default_factory=lambda: ["ridge", "mlp"], help="learners",
                                 parse=lambda v: v.split(","))
    n_topics: int = option(20, help="topics")


@dataclasses.dataclass
class Holder:
    out: str = option(help="output", required=True)
    batching: Batching = nested(Batching, group="batching")
    probes: Probes | None = nested(Probes, prefix="probe-", only=("embedders", "learners"),
                                   when=("embedders", "learners"))
    codes: list[str] | None = option(None, help="codes", flag="--perturbations", metavar="CODE")


@dataclasses.dataclass
class Outer:
    holder: Holder = nested(Holder, only=("out", "probes.learners"),
                            options={"out": {"flag": "--dest", "help": "where"}})


def test_groups_prefixes_and_an_optional_block() -> None:
    p = argparse.ArgumentParser(prog="x", exit_on_error=False)
    add_options(p, Holder)
    assert parser_flags(p) == flag_names(Holder) == {
        "--out", "--batch-size", "--no-progress", "--probe-embedders", "--probe-learners", "--perturbations"}
    assert [a.dest for g in p._action_groups if g.title == "batching" for a in g._group_actions] == [
        "batching.batch_size", "batching.no_progress"]
    s = from_args(Holder, p.parse_args(["--out", "o"]))
    assert s == Holder(out="o") and s.probes is None  # no --probe-* flag: no probes
    s = from_args(Holder, p.parse_args(["--out", "o", "--probe-learners", "ridge"]))
    assert s.probes == Probes(learners=["ridge"])  # parsed; the fields not given keep their defaults
    assert from_args(Holder, p.parse_args(["--out", "o", "--probe-embedders", "m"])).probes == Probes(embedders=["m"])


def test_only_and_options_of_a_holder() -> None:
    p = argparse.ArgumentParser(prog="x", exit_on_error=False)
    add_options(p, Outer)
    assert parser_flags(p) == flag_names(Outer) == {"--dest", "--probe-learners"}
    assert next(a for a in p._actions if a.dest == "holder.out").help == "where"
    s = from_args(Outer, p.parse_args(["--dest", "o", "--probe-learners", "a,b"]))
    assert s.holder.out == "o" and s.holder.probes == Probes(learners=["a", "b"])


@dataclasses.dataclass
class Final:
    enabled: bool = True
    command: Command = nested(lambda: Command(n_boot=1000, conditions=["original"]), embed=True,
                              keys=("n_boot", "conditions", "batch_size"))


def test_an_embedded_block_with_some_keys_keeps_the_holders_defaults() -> None:
    from rmcore.config import recipe_dict, recipe_keys

    assert recipe_keys(Final) == ["enabled", "n_boot", "conditions", "batch_size"]
    s = build_config(Final, {"batch_size": 4}, "sweep.audit")
    assert (s.command.n_boot, s.command.conditions, s.command.batching.batch_size) == (1000, ["original"], 4)
    assert recipe_dict(s) == {"enabled": True, "n_boot": 1000, "conditions": ["original"], "batch_size": 4}
    assert build_config(Final, recipe_dict(s), "x") == s
    for bad in ("ties", "command"):  # a held field outside keys, and the holder's own name, are not keys
        with pytest.raises(ConfigError, match=rf"unknown key\(s\) \['{bad}'\]; allowed: \['batch_size', "):
            build_config(Final, {bad: 1}, "sweep.audit")


@dataclasses.dataclass
class Lazy:
    x: int = option(1, help="x")
    later: NotImported | None = None  # noqa: F821 (a name imported under TYPE_CHECKING only)


def test_a_name_imported_for_type_checking_only_is_any() -> None:
    from typing import Any

    from rmcore.settings import type_hints

    assert type_hints(Lazy) == {"x": int, "later": Any | None}
    assert flag_names(Lazy) == {"--x"} and build_config(Lazy, {"x": "2"}, "r") == Lazy(x=2)
