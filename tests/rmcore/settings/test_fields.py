"""rmcore.settings.fields: flags generated from a settings dataclass and read back into it; recipes read
an embedded settings object from its parent's keys."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from rmcore.errors import ConfigError
from rmcore.settings.fields import (
    AppendEach,
    add_options,
    bounded,
    flag_names,
    flag_overrides,
    from_args,
    nested,
    option,
    option_dests,
    parser_dests,
    parser_flags,
    renamed_flags,
    switch,
)
from rmcore.settings.recipes import build_config


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
    from rmcore.settings.recipes import recipe_dict, recipe_keys

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

    from rmcore.settings.fields import type_hints

    assert type_hints(Lazy) == {"x": int, "later": Any | None}
    assert flag_names(Lazy) == {"--x"} and build_config(Lazy, {"x": "2"}, "r") == Lazy(x=2)


@dataclasses.dataclass(kw_only=True)
class Renamed:
    out: str | None = option(None, deprecated=("--output-dir", "--outdir"), help="output directory")
    force: bool = option(False, deprecated=("--overwrite",), help="start over")
    attributes_file: str | None = option(None, flag="--attributes", deprecated=("--attributes-file",),
                                         help="attribute YAML")
    overrides: list[str] = option(default_factory=list, flag="--set", action=AppendEach, metavar="KEY=VALUE",
                                  help="KEY=VALUE, once per key")


@pytest.fixture
def fresh_notices(monkeypatch):
    """Each test sees its notices printed (they are printed once per process)."""
    monkeypatch.setattr("rmcore.settings.fields._WARNED", set())


def _renamed_parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="tool")
    p = root.add_subparsers().add_parser("cmd")
    add_options(p, Renamed)
    return p


def test_an_old_flag_name_is_hidden_reads_onto_the_field_and_warns_once(capsys, fresh_notices) -> None:
    p = _renamed_parser()
    assert parser_flags(p) == flag_names(Renamed) == {"--out", "--force", "--attributes", "--set"}
    assert renamed_flags(p) == {"--output-dir": "--out", "--outdir": "--out", "--overwrite": "--force",
                                "--attributes-file": "--attributes"}
    shown = p.format_help() + p.format_usage()
    assert "--output-dir" not in shown and "--outdir" not in shown and "--attributes-file" not in shown
    assert "--overwrite" not in shown
    new = from_args(Renamed, p.parse_args(["--out", "o", "--force", "--attributes", "a.yaml"]))
    assert capsys.readouterr().err == ""
    for _ in range(2):  # the second time: no notice
        old = from_args(Renamed, p.parse_args(["--output-dir", "o", "--overwrite", "--attributes-file", "a.yaml"]))
        assert old == new == Renamed(out="o", force=True, attributes_file="a.yaml")
    assert capsys.readouterr().err.splitlines() == [
        "tool: --output-dir is now --out (the old name still works)",
        "tool: --overwrite is now --force (the old name still works)",
        "tool: --attributes-file is now --attributes (the old name still works)"]
    assert from_args(Renamed, p.parse_args([])) == Renamed()  # an old name not given sets nothing


def test_a_repeatable_flag_takes_one_value_each_time_and_still_reads_the_old_form(capsys, fresh_notices) -> None:
    p = _renamed_parser()
    assert "[--set KEY=VALUE]" in p.format_usage() and "KEY=VALUE [" not in p.format_help()
    assert from_args(Renamed, p.parse_args(["--set", "a=1", "--set", "b=2"])).overrides == ["a=1", "b=2"]
    assert capsys.readouterr().err == ""
    for _ in range(2):
        s = from_args(Renamed, p.parse_args(["--set", "a=1", "b=2", "--set", "c=3", "--force"]))
        assert (s.overrides, s.force) == (["a=1", "b=2", "c=3"], True)
    assert capsys.readouterr().err.splitlines() == [
        "tool: --set a=1 b=2 is now --set a=1 --set b=2 (the old form still works)"]
    assert from_args(Renamed, p.parse_args([])).overrides == []


# -- declared ranges -----------------------------------------------------------------------------------

@dataclasses.dataclass
class _Inner:
    rate: float = option(0.5, gt=0, le=1, help="a share")
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0, 1], metadata={})


@dataclasses.dataclass
class _Ranged:
    by_code: int = bounded(1, ge=1)  # not a flag: set by code
    n: int = option(10, ge=1, help="resamples")
    steps: int = option(-1, ge=1, also=(-1,), help="-1: epochs")
    limit: int | None = option(None, ge=1, help="optional")
    port: int = option(5000, ge=0, le=65535, help="port")
    shares: dict[str, float] = option(default_factory=dict, nargs="+", parse=_pairs, gt=0, le=1, help="NAME=R")
    inner: _Inner = nested(_Inner, prefix="in-")
    hidden: float = dataclasses.field(default=0.3, metadata={})  # no range: never checked


def _ranged(*argv: str) -> _Ranged:
    p = argparse.ArgumentParser()
    add_options(p, _Ranged)
    return from_args(_Ranged, p.parse_args(list(argv)))


@pytest.mark.parametrize("rng,integer,text", [
    (dict(ge=1), True, "an integer >= 1"),
    (dict(gt=0), False, "a finite number > 0"),
    (dict(gt=0, le=1), False, "a finite number in (0, 1]"),
    (dict(ge=0, lt=1), False, "a finite number in [0, 1)"),
    (dict(ge=0, le=65535), True, "an integer in [0, 65535]"),
    (dict(ge=1, also=(-1,)), True, "an integer >= 1, or -1"),
    (dict(le=3), True, "an integer <= 3"),
    ({}, False, "a finite number"),
])
def test_a_range_says_what_it_allows(rng, integer, text) -> None:
    from rmcore.settings.fields import Range

    assert Range(**rng).describe(integer) == text


def test_a_range_allows_its_bounds_and_specials_and_no_nan() -> None:
    from rmcore.settings.fields import Range

    r = Range(gt=0, le=1)
    assert [r.allows(v) for v in (0.0, 1e-12, 1.0, 1.0000001, float("nan"), float("inf"))] == [
        False, True, True, False, False, False]
    steps = Range(ge=1, also=(-1,))
    assert [steps.allows(v) for v in (-2, -1, 0, 1)] == [False, True, False, True]
    assert Range().allows(-1e300) and not Range().allows(float("-inf"))


def test_from_args_refuses_a_value_out_of_range_naming_the_flag() -> None:
    s = _ranged("--n", "3", "--steps", "-1", "--port", "0", "--in-rate", "1")
    assert (s.n, s.steps, s.limit, s.port, s.inner.rate) == (3, -1, None, 0, 1.0)
    for argv, message in [
        (["--n=-5"], "--n: -5 is out of range; allowed: an integer >= 1"),
        (["--steps", "0"], "--steps: 0 is out of range; allowed: an integer >= 1, or -1"),
        (["--limit", "0"], "--limit: 0 is out of range; allowed: an integer >= 1"),
        (["--port=-1"], "--port: -1 is out of range; allowed: an integer in [0, 65535]"),
        (["--port", "65536"], "--port: 65536 is out of range; allowed: an integer in [0, 65535]"),
        (["--in-rate", "nan"], "--in-rate: nan is out of range; allowed: a finite number in (0, 1]"),
        (["--in-rate", "inf"], "--in-rate: inf is out of range; allowed: a finite number in (0, 1]"),
        (["--shares", "a=0.5", "b=0"], "--shares: 0.0 (in {'a': 0.5, 'b': 0.0}) is out of range"),
    ]:
        with pytest.raises(ConfigError) as e:
            _ranged(*argv)
        assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)


def test_a_flag_is_named_before_a_field_set_by_code() -> None:
    from rmcore.settings.fields import check_ranges

    with pytest.raises(ConfigError, match=r"^--n: 0 is out of range"):
        check_ranges(_Ranged(by_code=0, n=0))
    with pytest.raises(ConfigError, match=r"^by_code: 0 is out of range; allowed: an integer >= 1"):
        check_ranges(_Ranged(by_code=0))
    s = _Ranged(hidden=float("nan"))
    check_ranges(s)  # no range declared: nothing to check


@dataclasses.dataclass
class _Block:
    lr: float = bounded(1e-5, gt=0)
    grid: list[float] = bounded(default_factory=lambda: [1e-5], gt=0)


@dataclasses.dataclass
class _Recipe:
    training: _Block = dataclasses.field(default_factory=_Block)
    seed: int = option(0, ge=0, help="seed")


def test_a_recipe_names_the_key_under_its_file() -> None:
    assert build_config(_Recipe, {"training": {"lr": "2e-5", "grid": ["1e-5", 3e-5]}}, "r.yaml").training.lr == 2e-5
    for values, message in [
        ({"training": {"lr": "nan"}}, "r.yaml.training.lr: nan is out of range; allowed: a finite number > 0"),
        ({"training": {"lr": 0}}, "r.yaml.training.lr: 0.0 is out of range; allowed: a finite number > 0"),
        ({"training": {"grid": [1e-5, -1]}}, "r.yaml.training.grid: -1 (in [1e-05, -1]) is out of range"),
        ({"seed": -3}, "r.yaml.seed: -3 is out of range; allowed: an integer >= 0"),
    ]:
        with pytest.raises(ConfigError) as e:
            build_config(_Recipe, values, "r.yaml")
        assert str(e.value).startswith(message), str(e.value)


def test_bounded_declares_a_range_on_a_field_that_is_no_flag() -> None:
    from rmcore.settings.fields import field_range, number_type

    @dataclasses.dataclass
    class Plain:
        size: int | None = bounded(None, ge=1)
        shares: dict[str, float] | None = bounded(None, gt=0, le=1)
        names: list[str] = dataclasses.field(default_factory=list)

    f = {x.name: x for x in dataclasses.fields(Plain)}
    assert (field_range(f["size"]).ge, field_range(f["names"])) == (1, None)
    hints = {"size": int | None, "shares": dict[str, float] | None, "names": list[str]}
    assert [number_type(h) for h in hints.values()] == [int, float, None]
    with pytest.raises(ConfigError, match=r"^r\.shares: 2\.0 \(in \{'a': 2\.0\}\) is out of range"):
        build_config(Plain, {"shares": {"a": 2.0}}, "r")


@dataclasses.dataclass
class Gated:
    out: str = option("o", help="output")
    probes: Probes | None = nested(Probes, prefix="probe-", only=("embedders", "n_topics"), when=("embedders",))


def test_a_flag_of_settings_that_are_off_is_refused() -> None:
    """--probe-n-topics without --probe-embedders would be read into nothing: one line naming both."""
    p = argparse.ArgumentParser(prog="x", exit_on_error=False)
    add_options(p, Gated)
    assert from_args(Gated, p.parse_args([])).probes is None
    with pytest.raises(ConfigError, match=r"^--probe-n-topics has no effect without --probe-embedders, "):
        from_args(Gated, p.parse_args(["--probe-n-topics", "5"]))
    s = from_args(Gated, p.parse_args(["--probe-n-topics", "5", "--probe-embedders", "m"]))
    assert s.probes == Probes(embedders=["m"], n_topics=5)


@dataclasses.dataclass
class Judged:
    kind: str = option("plain", flag="--scorer", choices=["plain", "judge"], help="scorer")
    style: str = option("short", needs=("--scorer", "judge"), help="the judge's style")
    url: str | None = option(None, help="endpoint")
    workers: int = option(8, ge=1, needs=("--url", None), help="requests at a time (--url)")


def test_a_flag_that_needs_another_is_refused_without_it() -> None:
    """``needs``: --style does something with --scorer judge only, --workers with --url only; given
    otherwise, one line naming both (issue 33 item 4); not given, the default reads back."""
    p = argparse.ArgumentParser(prog="x", exit_on_error=False)
    add_options(p, Judged)
    assert from_args(Judged, p.parse_args([])) == Judged()
    with pytest.raises(ConfigError, match=r"^--style has an effect only with --scorer judge; --scorer is plain$"):
        from_args(Judged, p.parse_args(["--style", "long"]))
    with pytest.raises(ConfigError, match=r"^--workers has an effect only with --url, which is not given$"):
        from_args(Judged, p.parse_args(["--workers", "8"]))  # the default value, given: still refused
    s = from_args(Judged, p.parse_args(["--scorer", "judge", "--style", "long", "--url", "u", "--workers", "2"]))
    assert (s.style, s.workers) == ("long", 2)
    with pytest.raises(ConfigError, match=r"^--workers: 0 is out of range"):  # a bad value is said first
        from_args(Judged, p.parse_args(["--workers", "0"]))


@dataclasses.dataclass
class Step:
    enabled: bool = switch(False)
    q: float = bounded(0.05, gt=0, lt=1)


@dataclasses.dataclass
class Block:
    enabled: bool = switch(False)
    n_boot: int = bounded(200, ge=1)
    step: Step = dataclasses.field(default_factory=Step)


def test_a_key_of_a_block_switched_off_is_refused_unless_an_override_switched_it_off() -> None:
    assert build_config(Block, {"enabled": False}, "r.audit") == Block()
    assert build_config(Block, {"enabled": True, "n_boot": 5}, "r.audit").n_boot == 5
    with pytest.raises(ConfigError, match=r"^r.audit.n_boot: has no effect while r.audit.enabled is false ") as e:
        build_config(Block, {"enabled": False, "n_boot": 5}, "r.audit")
    assert e.value.key == "r.audit.n_boot"
    with pytest.raises(ConfigError, match=r"^r.audit.n_boot: has no effect"):  # off by default
        build_config(Block, {"n_boot": 5}, "r.audit")
    with pytest.raises(ConfigError, match=r"^r.audit.step.q: has no effect while r.audit.step.enabled is false"):
        build_config(Block, {"enabled": True, "step": {"q": 0.1}}, "r.audit")
    # the user turned the block off: the recipe's keys stay unused; a key the override gives is refused
    off = frozenset({"r.audit.enabled"})
    assert build_config(Block, {"enabled": False, "n_boot": 5, "step": {"enabled": True}}, "r.audit",
                        overridden=off).enabled is False
    with pytest.raises(ConfigError, match=r"^r.audit.step: has no effect"):
        build_config(Block, {"enabled": False, "n_boot": 5, "step": {}}, "r.audit",
                     overridden=off | {"r.audit.step.q"})


def test_an_error_about_a_key_a_set_gave_names_the_set() -> None:
    from rmcore.settings.recipes import blame_override

    e = ConfigError.at("r.yaml.training.learning_rate", "nan is out of range")
    assert str(blame_override(e, "r.yaml", ["seed=2", "training.learning_rate=nan"])) == (
        "--set training.learning_rate=nan: nan is out of range")
    assert blame_override(e, "r.yaml", ["training.max_length=8"]) is e  # the recipe's own value: the recipe named
    inner = ConfigError.at("r.yaml.training.learning_rate", "nan is out of range")
    assert str(blame_override(inner, "r.yaml", ["training={learning_rate: nan}"])) == (
        "--set training={learning_rate: nan}: learning_rate: nan is out of range")
    typo = build_config_error(Block, {"n_bot": 3}, "r.yaml.audit")
    assert str(typo) == ("r.yaml.audit: unknown key(s) ['n_bot'] (did you mean 'n_boot'?); allowed: ['enabled', "
                         "'n_boot', 'step']")
    assert str(blame_override(typo, "r.yaml", ["audit.n_bot=3"])).startswith(
        "--set audit.n_bot=3: unknown key(s) ['n_bot'] (did you mean 'n_boot'?)")


def build_config_error(cls: type, values: dict, where: str) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        build_config(cls, values, where)
    return e.value


@pytest.mark.parametrize("hint,null", [(list[int], []), (dict[str, list[int]], {}), (int | None, None),
                                       (Block | None, None)])
def test_null_sets_none_or_an_empty_container(hint, null) -> None:
    holder = dataclasses.make_dataclass("Holder", [("x", hint, dataclasses.field(default=None))])
    assert build_config(holder, {"x": None}, "r").x == null


def test_null_for_a_number_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^r.n_boot: expected int, got null$"):
        build_config(Block, {"enabled": True, "n_boot": None}, "r")
