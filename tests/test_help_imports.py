"""``--help`` and argument errors load no model library (issue 26, item 3: ``rmtrain train --help``
spent 10 s importing transformers and peft). One fresh interpreter per tool walks its parser: the
``--help`` of the tool and of every subcommand (nested ones included), an unknown flag on each,
and the errors the parser or the first checks find (a missing required flag, a bad choice, a missing
input file), each run in-process with ``SystemExit`` caught; then ``sys.modules`` holds none of the
heavy libraries. The walk's own record (exit codes, the libraries it saw) is what is checked, and a
light library the parsers do import (``argparse``) must show up in it, so the check sees imports."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the model stack (the five, and what comes with them), and plotting and tracking
HEAVY = ("torch", "transformers", "peft", "trl", "deepspeed", "accelerate", "datasets", "wandb", "sklearn",
         "matplotlib")
# the table and statistics libraries: --help reads settings, not tables
TABLES = ("pandas", "scipy")
# rmcore's modules that command-line and settings modules import for their flags and first checks
LIGHT_RMCORE = ("rmcore.errors", "rmcore.io.files", "rmcore.console.quiet", "rmcore.console.progress",
                "rmcore.data.schema", "rmcore.data.loading",
                "rmcore.settings.fields", "rmcore.settings.registry", "rmcore.settings.recipes",
                "rmcore.settings.commands", "rmcore.models.device", "rmcore.runtime.checkpoints",
                "rmcore.runtime.wandb_log", "rmcore.runtime.jobs")

WALK = r"""
import argparse, contextlib, io, json, sys
tool, heavy, extra = sys.argv[1], sys.argv[2].split(","), json.loads(sys.argv[3])
cli = __import__(tool + ".cli", fromlist=["build_parser", "main"])


def commands(parser, prefix=()):
    yield list(prefix)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*prefix, name))


every = list(commands(cli.build_parser()))
runs = [c + ["--help"] for c in every] + [c + ["--no-such-flag"] for c in every] + extra
record = []
for argv in runs:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as e:
            code = e.code
    lines = err.getvalue().strip().splitlines()
    record.append({"argv": argv, "code": code, "last": lines[-1] if lines else ""})
print(json.dumps({"runs": record, "seen": sorted({m.split(".")[0] for m in sys.modules} & set(heavy))}))
"""


@functools.cache
def _walk_once(tool: str, extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", WALK, tool, ",".join((*HEAVY, *TABLES, "argparse")), extra],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _walk(tool: str, extra: list[list[str]]) -> dict:
    """The walk's record, once per tool and argument list in a test run (two tests read it)."""
    return _walk_once(tool, json.dumps(extra))


def _check(walk: dict, errors: list[list[str]]) -> None:
    runs = {tuple(r["argv"]): r for r in walk["runs"]}
    helps = [r for a, r in runs.items() if a[-1:] == ("--help",)]
    assert helps and all(r["code"] == 0 for r in helps), [r for r in helps if r["code"] != 0]
    failed = [r for a, r in runs.items() if a[-1:] != ("--help",)]
    assert all(r["code"] == 2 for r in failed), [r for r in failed if r["code"] != 2]
    for argv in errors:  # one line naming the problem, no traceback
        assert "Traceback" not in runs[tuple(argv)]["last"]
    assert [m for m in walk["seen"] if m not in TABLES] == ["argparse"], walk["seen"]


def _errors(tool: str, tmp: Path) -> list[tuple[list[str], str]]:
    """(argv, what its one error line names): missing required flags, a bad choice, a missing file."""
    missing, out = str(tmp / "missing.yaml"), str(tmp / "o")
    return {
        "rmeval": [(["audit"], "--checkpoint"),
                   (["audit", "--checkpoint", "c", "--data", "simulated", "--out", out, "--scorer", "nope"], "'nope'"),
                   (["judges", "elicit", "--out", out, "--executor", "nope"], "'nope'"),
                   (["reproduce", missing], missing),
                   (["stats", "--scores", missing, "--ratings", missing, "--out", out], missing),
                   (["pool", "--config", missing], missing),
                   (["suitability-stats", "--pairs", missing, "--out", out], missing)],
        "rmtrain": [(["train"], "--config"), (["sweep", "--config", "c", "--executor", "nope"], "'nope'"),
                    (["train", "--config", missing], missing), (["check", missing], missing),
                    (["sweep", "--config", missing], missing),
                    (["policy", "--config", missing, "--reward-model", "r", "--environment", "clean"], missing),
                    (["filter-experiment", "--config", missing], missing)],
    }[tool]


@pytest.fixture(scope="session")
def walk_dir(tmp_path_factory) -> Path:
    """Where the error runs' missing files would be: one folder, so both tests read one walk."""
    return tmp_path_factory.mktemp("help_walk")


@pytest.mark.parametrize("tool", ["rmeval", "rmtrain"])
def test_help_of_every_command_and_argument_errors_import_no_model_library(tool, walk_dir):
    errors = _errors(tool, walk_dir)
    walk = _walk(tool, [argv for argv, _ in errors])
    assert len(walk["runs"]) >= 2 * 5 + len(errors)
    _check(walk, [argv for argv, _ in errors])
    last = {tuple(r["argv"]): r["last"] for r in walk["runs"]}
    for argv, named in errors:
        assert named in last[tuple(argv)], (argv, last[tuple(argv)])


@pytest.mark.parametrize("tool", ["rmeval", "rmtrain"])
def test_help_of_every_command_and_argument_errors_import_no_table_library(tool, walk_dir):
    """pandas and scipy too: ``--help`` reads settings, not tables."""
    walk = _walk(tool, [argv for argv, _ in _errors(tool, walk_dir)])
    assert [m for m in walk["seen"] if m in TABLES] == [], walk["seen"]


def test_rmcore_modules_read_for_flags_load_no_table_or_model_library():
    """What the command-line and settings modules import from rmcore at --help (path checks, settings,
    recipes, commands, devices, run files, W&B flags) loads neither pandas nor scipy nor a model
    library; ``argparse`` (which rmcore.settings.fields imports) shows the check sees imports."""
    libs = (*HEAVY, *TABLES, "argparse")
    code = ("import json, sys\n" + "".join(f"import {m}\n" for m in LIGHT_RMCORE) +
            f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({libs!r}))))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == ["argparse"]
