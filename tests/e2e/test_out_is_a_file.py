"""An output folder flag (``--out``, ``--output-dir``) naming an existing file: every command of
``rmeval`` and ``rmtrain`` that writes a folder says so in one line naming the flag, exits 2 and
writes nothing (the file is left as it was), before any model, data or recipe is read."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmeval.cli import build_parser as rmeval_parser
from rmeval.cli import main as rmeval_main
from rmtrain.cli import build_parser as rmtrain_parser
from rmtrain.cli import main as rmtrain_main

FOLDER_FLAGS = ("--out", "--output-dir")
FILE_OUT = {("rmeval", "variants")}  # its --out is the output jsonl itself


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                             argparse.ArgumentParser]]:
    sub = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not sub:
        yield path, parser
    for action in sub:
        for name, p in action.choices.items():
            yield from _commands(p, (*path, name))


def _argv(path: tuple[str, ...], p: argparse.ArgumentParser, flag: str, value: str) -> list[str]:
    """The command with placeholders for its other required arguments (never read: the flags are
    checked first) and ``flag value``."""
    argv = list(path[1:])
    for a in p._actions:
        if a.dest == "help" or flag in a.option_strings:
            continue
        if not a.option_strings:  # a positional
            argv.append("x.yaml")
        elif a.required:
            argv += [a.option_strings[0], str(a.choices[0]) if a.choices else "x"]
    return [*argv, flag, value]


def _cases() -> list[tuple[tuple[str, ...], str]]:
    cases = []
    for prog, parser in (("rmeval", rmeval_parser()), ("rmtrain", rmtrain_parser())):
        for path, p in _commands(parser, (prog,)):
            flags = [f for a in p._actions for f in a.option_strings[:1] if f in FOLDER_FLAGS]
            if path[:2] not in FILE_OUT:
                cases += [(path, f) for f in flags]
    return cases


CASES = _cases()


def test_every_command_with_an_output_folder_is_covered():
    commands = {" ".join(path[1:]) for path, _ in CASES}
    assert {"audit", "pairwise", "suitability", "stats", "features", "human", "judges elicit", "judges analyze",
            "judges reweight", "pool", "leaderboard", "reproduce", "suitability-stats", "train", "sweep", "policy",
            "policy-eval", "filter-experiment"} <= commands


@pytest.mark.parametrize("path,flag", CASES, ids=[" ".join((*p, f)) for p, f in CASES])
def test_an_output_folder_that_is_a_file_is_one_line(path, flag, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the placeholders are relative paths: nothing of them may appear here
    file = tmp_path / "results.txt"
    file.write_text("kept\n")
    parser = rmeval_parser() if path[0] == "rmeval" else rmtrain_parser()
    sub = dict(_commands(parser, (path[0],)))[path]
    main = rmeval_main if path[0] == "rmeval" else rmtrain_main
    for value, named in ((str(file), str(file)), (str(file / "sub"), str(file))):
        assert main(_argv(path, sub, flag, value)) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert err == [f"{path[0]}: error: {flag}: {named} is a file, not a folder"], err
        assert file.read_text() == "kept\n" and sorted(p.name for p in Path(tmp_path).iterdir()) == ["results.txt"]
