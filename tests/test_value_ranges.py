"""Every numeric value is checked before work starts (issue 26 item 1).

The walk over every ``rmeval`` and ``rmtrain`` command tries, for each flag that declares a range,
a value just outside it through the real ``main`` with a temporary output folder: exit 2, one
stderr line naming the flag and the value, no traceback, no output folder. No model loads: the
refusal comes while the flags are read (the checkpoints and data named here do not exist). The
coverage walk asserts that every numeric field of every settings dataclass a command or a recipe
reaches declares a range that holds its default; the recipe walk changes one numeric key at a time
of the shipped recipes and runs ``rmtrain check`` on it."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from rmcore.settings.fields import (
    Range,
    field_range,
    flag_names,
    flag_ranges,
    is_embedded,
    nesting,
    number_type,
    type_hints,
)
from rmcore.settings.recipes import _embedded_keys, dataclass_in, set_dotted
from rmeval.cli import main as rmeval_main
from rmtrain.cli import main as rmtrain_main
from tests.rmeval.cli.test_settings_flags import COMMANDS as RMEVAL_COMMANDS
from tests.rmeval.cli.test_settings_flags import REQUIRED as RMEVAL_REQUIRED
from tests.rmtrain.cli.test_settings_flags import SETTINGS as RMTRAIN_SETTINGS

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
OUT_FLAGS = ("--out", "--output-dir")

# flags whose held settings are None unless another flag turns them on
TURN_ON = {"audit": ["--suitability"],
           "judges reweight": ["--baselines", "rubric", "--baseline-model", "m", "--baseline-judge", "j"]}
# a parsed flag's value as its parser reads one number
FORMAT = {"--human-reliability": "a={}", "--reliability": "a={}", "--null-share": "controlled={}"}
RMTRAIN_REQUIRED = {
    "train": ["--config", str(RECIPES / "demo.yaml")],
    "sweep": ["--config", str(RECIPES / "demo.yaml")],
    "policy": ["--config", str(RECIPES / "policy_demo.yaml"), "--reward-model", "r", "--environment", "clean"],
    "policy-eval": ["--config", str(RECIPES / "policy_demo.yaml")],
    "check": [str(RECIPES / "demo.yaml")],
    "filter-experiment": ["--config", str(RECIPES / "filtering_toy.yaml")],
}


def outside(r: Range, kind: type) -> list[float]:
    """Values just outside range ``r`` (a number type ``kind``), and NaN for a float."""
    step = 1 if kind is int else 1e-6
    out = [r.ge - step if r.ge is not None else None, r.gt, r.le + step if r.le is not None else None, r.lt]
    out = [v for v in out if v is not None and v not in r.also]
    return [int(v) if kind is int else v for v in out] + ([math.nan] if kind is float else [])


def _shown(v: float) -> str:
    return "nan" if isinstance(v, float) and math.isnan(v) else str(v)


def _cases() -> list[tuple[str, str, type, str, list[str], str | None]]:
    """(program, command, settings class, flag, argv before the flag, the output flag) for every
    flag that declares a range."""
    commands = [("rmeval", c, sp.get_default("settings"), [*RMEVAL_REQUIRED[c], *TURN_ON.get(c, [])])
                for c, sp in RMEVAL_COMMANDS.items()]
    commands += [("rmtrain", c, cls, RMTRAIN_REQUIRED[c]) for c, cls in RMTRAIN_SETTINGS.items()]
    return [(program, command, cls, flag, argv, next((f for f in OUT_FLAGS if f in flag_names(cls)), None))
            for program, command, cls, argv in commands for flag in flag_ranges(cls)
            if not _choices(command, flag)]


def _choices(command: str, flag: str) -> list[Any] | None:
    """The choices argparse itself holds a flag to (it refuses any other value with its usage)."""
    sp = RMEVAL_COMMANDS.get(command)
    action = sp._option_string_actions.get(flag) if sp is not None else None
    return action.choices if action is not None else None


def test_a_flag_with_choices_offers_only_values_in_its_range() -> None:
    rng, _ = flag_ranges(RMEVAL_COMMANDS["suitability"].get_default("settings"))["--base-level"]
    assert _choices("suitability", "--base-level") == [0, 1, 2] and all(rng.allows(v) for v in (0, 1, 2))
    assert not rng.allows(3) and not rng.allows(-1)


CASES = _cases()


def test_the_walk_covers_every_command_and_finds_the_known_flags() -> None:
    assert set(RMTRAIN_REQUIRED) == set(RMTRAIN_SETTINGS)
    flags = {(c[1], c[3]) for c in CASES}
    # a few hand-picked ones: the issue's, and one inside each block a flag turns on
    assert {("pairwise", "--n-boot"), ("audit", "--n-boot"), ("serve-reward", "--port"), ("pairwise", "--max-length"),
            ("serve-reward", "--max-batch-items"), ("audit", "--q"), ("judges reweight", "--rubric-k"),
            ("suitability", "--beta"), ("train", "--seed"), ("sweep", "--max-parallel"),
            ("reproduce", "--cpus-per-task")} <= flags
    assert len(CASES) > 100


@pytest.mark.parametrize("program,command,cls,flag,argv,out_flag", CASES, ids=[f"{c[1]} {c[3]}" for c in CASES])
def test_a_value_out_of_range_is_refused_before_work_starts(tmp_path, capsys, program, command, cls, flag, argv,
                                                            out_flag) -> None:
    rng, kind = flag_ranges(cls)[flag]
    out = tmp_path / "out"
    argv = list(argv)
    if out_flag is not None:
        if out_flag in argv:
            argv[argv.index(out_flag) + 1] = str(out)
        else:
            argv += [out_flag, str(out)]
    main = rmeval_main if program == "rmeval" else rmtrain_main
    bad_values = outside(rng, kind)
    assert bad_values, (flag, rng)
    for bad in bad_values:
        assert not rng.allows(bad)
        rc = main([*command.split(), *argv, f"{flag}={FORMAT.get(flag, '{}').format(_shown(bad))}"])
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert rc == 2, (flag, bad, captured.err)
        assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
        assert lines[0].startswith(f"{program}: error: {flag}: "), lines[0]
        assert f" is out of range; allowed: {rng.describe(kind is int)}" in lines[0], lines[0]
        assert _shown(float(bad)) in lines[0] or str(bad) in lines[0], lines[0]
        assert not out.exists()


# -- every numeric field declares its range ---------------------------------------------------------

def _recipe_classes() -> list[type]:
    from rmcore.data.simulated import SimulationSettings
    from rmeval.experiments.settings import JudgeSpec, LeaderboardConfig, PolicySpec, PoolConfig, SamplingSettings
    from rmeval.reproduce.recipe import Column, DataEntry, Figure, ModelSpec, ReproductionConfig
    from rmeval.reproduce.settings import JudgeTableSettings
    from rmtrain.arms import ARMS
    from rmtrain.config import SweepSettings, TrainConfig
    from rmtrain.filtering import FilteringConfig
    from rmtrain.filtering import FilterVariantSettings as FilterVariant
    from rmtrain.policy.config import PolicyConfig

    arms = [ARMS.lookup(name).config_class for name in ARMS.names()]
    return [TrainConfig, SweepSettings, PolicyConfig, FilteringConfig, FilterVariant, PoolConfig, LeaderboardConfig,
            PolicySpec, SamplingSettings, JudgeSpec, ReproductionConfig, ModelSpec, DataEntry, Column, Figure,
            JudgeTableSettings, SimulationSettings, *arms]


def _reachable() -> list[type]:
    """Every settings dataclass a command or a recipe reaches (held, nested or embedded)."""
    todo = [sp.get_default("settings") for sp in RMEVAL_COMMANDS.values()] + list(RMTRAIN_SETTINGS.values())
    todo += _recipe_classes()
    seen: list[type] = []
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.append(cls)
        hints = type_hints(cls)
        for f in dataclasses.fields(cls):
            n = nesting(f)
            held = (n.cls if n else None) or dataclass_in(hints[f.name])
            if held is None and n is not None:
                held = type(f.default_factory())
            if held is not None:
                todo.append(held)
    return seen


REACHABLE = _reachable()


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None


def _numbers(v: Any) -> list[float]:
    if isinstance(v, dict):
        v = list(v.values())
    return [x for x in (v if isinstance(v, (list, tuple)) else [v]) if isinstance(x, (int, float))
            and not isinstance(x, bool)]


def test_every_numeric_field_declares_a_range_that_holds_its_default() -> None:
    names = {c.__name__ for c in REACHABLE}
    assert {"TrainingSettings", "SweepSlurmSettings", "RLSettings", "RayLayout", "StatsSettings", "ServerSettings",
            "ScorerSettings", "LoraSettings", "DPOSettings", "BaselineSettings", "ElicitSettings", "ShuffledMeanConfig",
            "Compute", "DataSize"} <= names
    missing, bad_default, checked = [], [], 0
    for cls in REACHABLE:
        hints = type_hints(cls)
        for f in dataclasses.fields(cls):
            kind = number_type(hints[f.name])
            if kind is None:
                continue
            checked += 1
            rng = field_range(f)
            if rng is None:
                missing.append(f"{cls.__module__}.{cls.__name__}.{f.name}")
                continue
            if any(not rng.allows(v) for v in _numbers(_default(f))):
                bad_default.append(f"{cls.__name__}.{f.name} = {_default(f)!r}")
    assert missing == [], "numeric fields without a declared range: " + ", ".join(missing)
    assert bad_default == []
    assert checked > 150


# -- recipes ----------------------------------------------------------------------------------------

def _shaped(hint: Any, value: float) -> Any:
    """``value`` as a field of annotation ``hint`` holds it: alone, in a list, or in a mapping."""
    t = next((a for a in typing.get_args(hint) if a is not type(None)), hint) if typing.get_origin(hint) in (
        typing.Union, types.UnionType) else hint
    origin = typing.get_origin(t)
    return [value] if origin in (list, tuple) else {"controlled": value} if origin is dict else value


def _recipe_keys(cls: type, prefix: str = "") -> list[tuple[str, Range, type, Any]]:
    """(dotted recipe key, range, number type, annotation) of every numeric key a recipe gives for
    ``cls`` (an embedded block's keys at its holder's level, as many of them as it takes)."""
    hints = type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if is_embedded(f):
            held = nesting(f).cls or type(f.default_factory())
            allowed = set(_embedded_keys(f, hints[f.name]))
            out += [k for k in _recipe_keys(held, prefix) if k[0][len(prefix):].split(".")[0] in allowed]
            continue
        sub = dataclass_in(hints[f.name])
        if sub is not None:
            out += _recipe_keys(sub, f"{prefix}{f.name}.")
        elif (kind := number_type(hints[f.name])) is not None and field_range(f) is not None:
            out.append((prefix + f.name, field_range(f), kind, hints[f.name]))
    return out


def _recipe_cases() -> list[tuple[str, str, Any]]:
    from rmtrain.config import SweepSettings, TrainConfig
    from rmtrain.filtering import FilteringConfig
    from rmtrain.policy.config import PolicyConfig

    return [(recipe, key, _shaped(hint, outside(rng, kind)[0]))
            for recipe, cls, prefix in (("demo.yaml", TrainConfig, ""), ("demo.yaml", SweepSettings, "sweep."),
                                        ("policy_demo.yaml", PolicyConfig, ""),
                                        ("filtering_toy.yaml", FilteringConfig, ""))
            for key, rng, kind, hint in _recipe_keys(cls, prefix)]


RECIPE_CASES = _recipe_cases()


def test_the_recipe_walk_reaches_the_keys_of_each_recipe() -> None:
    keys = {(r, k) for r, k, _ in RECIPE_CASES}
    assert {("demo.yaml", "training.learning_rate"), ("demo.yaml", "max_train_pairs"), ("demo.yaml", "audit.n_boot"),
            ("demo.yaml", "training.max_steps"), ("demo.yaml", "sweep.seeds"), ("demo.yaml", "sweep.audit.n_boot"),
            ("demo.yaml", "sweep.slurm.timeout_min"), ("demo.yaml", "model.lora.dropout"),
            ("policy_demo.yaml", "openrlhf.colocated.nodes"), ("policy_demo.yaml", "training.top_p"),
            ("filtering_toy.yaml", "dpo.learning_rates"), ("demo.yaml", "audit.suitability.q")} <= keys
    assert len(RECIPE_CASES) > 100


@pytest.mark.parametrize("recipe,key,bad", RECIPE_CASES, ids=[f"{r} {k}" for r, k, _ in RECIPE_CASES])
def test_rmtrain_check_refuses_a_recipe_value_out_of_range(tmp_path, capsys, recipe, key, bad) -> None:
    raw = yaml.safe_load((RECIPES / recipe).read_text(encoding="utf-8"))
    set_dotted(raw, key, bad)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    rc = rmtrain_main(["check", str(path)])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in captured.err, captured.err
    leaf = key.rsplit(".", 1)[-1]
    assert lines[0].startswith(f"rmtrain: error: {path}") and f".{leaf}: " in lines[0], lines[0]
    assert "is out of range; allowed: " in lines[0] and captured.out == "", lines[0]


@pytest.mark.parametrize("override,message", [
    ("training.learning_rate=nan", "nan is out of range; allowed: a finite number > 0"),
    ("training.per_device_batch_size=0", "0 is out of range; allowed: an integer >= 1"),
    ("training.max_length=-5", "-5 is out of range; allowed: an integer >= 1"),
    ("max_train_pairs=-3", "-3 is out of range; allowed: an integer >= 1"),
    ("training.max_steps=0", "0 is out of range; allowed: an integer >= 1, or -1"),
])
def test_rmtrain_train_refuses_a_bad_override_and_writes_nothing(tmp_path, capsys, override, message) -> None:
    """The error names the --set that gave the value, not the recipe file (issue 33 item 4)."""
    out = tmp_path / "run"
    recipe = RECIPES / "demo.yaml"
    rc = rmtrain_main(["train", "--config", str(recipe), "--output-dir", str(out), "--set", override,
                       "--wandb-mode", "disabled"])
    captured = capsys.readouterr()
    # the last line (a library imported by the command may log a line of its own first: issue 26 item 3)
    assert rc == 2
    assert (f"\n{captured.err}").endswith(f"\nrmtrain: error: --set {override}: {message}\n"), captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert not out.exists()


def test_rmtrain_train_keeps_max_steps_minus_one_and_takes_a_positive_rate(tmp_path) -> None:
    from rmtrain.config import load_train_config

    cfg = load_train_config(RECIPES / "demo.yaml", {"training.max_steps": -1, "training.learning_rate": "3e-4"})
    assert (cfg.training.max_steps, cfg.training.learning_rate) == (-1, 3e-4)


# -- the other item-1 cases -------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["pairwise", "audit"])
def test_n_boot_minus_five_is_refused_before_scoring(tmp_path, capsys, command) -> None:
    """The issue's command line: refused while the flags are read, so even a checkpoint that is
    not there is never looked at, and nothing is written."""
    out = tmp_path / "O"
    rc = rmeval_main([command, "--checkpoint", str(tmp_path / "C"), "--data", "simulated:n_prompts=4",
                      "--out", str(out), "--n-boot", "-5"])
    err = capsys.readouterr().err
    assert rc == 2 and err == "rmeval: error: --n-boot: -5 is out of range; allowed: an integer >= 1\n"
    assert not out.exists()


def test_serve_reward_port_minus_one(tmp_path, capsys) -> None:
    rc = rmeval_main(["serve-reward", "--checkpoint", str(tmp_path / "C"), "--port", "-1"])
    assert rc == 2
    assert capsys.readouterr().err == ("rmeval: error: --port: -1 is out of range; allowed: an integer in "
                                       "[0, 65535]\n")


def test_a_yaml_syntax_error_names_the_file_line_and_column(tmp_path, capsys) -> None:
    path = tmp_path / "broken.yaml"
    # "x" continues on line 3 as "x bad", and the colon after it (column 6) cannot open a mapping there
    path.write_text("arm: bradley_terry\nmodel: x\n  bad: indentation\n", encoding="utf-8")
    rc = rmtrain_main(["check", str(path)])
    err = capsys.readouterr().err
    assert rc == 2 and err == (f"rmtrain: error: {path}, line 3, column 6: not valid YAML (mapping values are not "
                               "allowed here)\n")


def _safetensors_bytes(n_floats: int) -> bytes:
    """A safetensors file by its specification: 8-byte little-endian header length, JSON header, data."""
    import json

    header = json.dumps({"w": {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]}}).encode()
    return len(header).to_bytes(8, "little") + header + bytes(4 * n_floats)


def test_check_safetensors_passes_a_whole_file_and_names_a_broken_one(tmp_path) -> None:
    from safetensors import safe_open

    from rmcore.errors import DataError
    from rmcore.io.files import check_safetensors

    whole = _safetensors_bytes(3)
    (tmp_path / "model.safetensors").write_bytes(whole)
    with safe_open(str(tmp_path / "model.safetensors"), framework="numpy") as f:  # the reference reader agrees
        assert list(f.keys()) == ["w"]
    check_safetensors(tmp_path)
    check_safetensors(tmp_path / "not-a-dir")  # a Hub id: nothing to check here
    for data, why in [(b"", "empty"), (whole[:5], "5 bytes, shorter than a header"),
                      (whole[:20], "its header says"), (whole[:-4], f"cut short: its tensors need {len(whole)} bytes"),
                      (whole[:8] + b"x" * (len(whole) - 8), "not a safetensors header")]:
        (tmp_path / "model.safetensors").write_bytes(data)
        with pytest.raises(DataError) as e:
            check_safetensors(tmp_path)
        assert str(e.value).startswith(f"file {tmp_path / 'model.safetensors'}: not a readable safetensors file"), e
        assert why in str(e.value)


def test_an_empty_model_safetensors_is_one_line_naming_it(tmp_path, capsys) -> None:
    ckpt = tmp_path / "C"
    ckpt.mkdir()
    (ckpt / "config.json").write_text('{"architectures": ["BertForSequenceClassification"], "model_type": "bert"}')
    (ckpt / "model.safetensors").write_bytes(b"")
    out = tmp_path / "O"
    rc = rmeval_main(["pairwise", "--checkpoint", str(ckpt), "--data", "simulated:n_prompts=4", "--out", str(out),
                      "--wandb-mode", "disabled"])
    err = capsys.readouterr().err
    assert rc == 2 and err == (f"rmeval: error: file {ckpt / 'model.safetensors'}: not a readable safetensors file "
                               "(empty); save or download the checkpoint again\n")
    assert not (out / "scores.parquet").exists() and not (out / "score_cache.sqlite").exists()


@pytest.mark.parametrize("knob,message", [
    ("n_prompts=-5", "simulated.n_prompts: -5 is out of range; allowed: an integer >= 2"),
    ("human_share=nan", "simulated.human_share: nan is out of range; allowed: a finite number in [0, 1]"),
    ("human_share=0.95,rater_noise_sd=0.9", "simulated: human_share=0.95 with rater_noise_sd=0.9 leaves no "
                                            "within-prompt quality variance"),
])
def test_a_simulated_data_spec_out_of_range_is_one_line(tmp_path, capsys, knob, message) -> None:
    out = tmp_path / "O"
    rc = rmeval_main(["human", "--data", f"simulated:{knob}", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"rmeval: error: {message}") and err.count("\n") == 1, err
    assert not out.exists()
