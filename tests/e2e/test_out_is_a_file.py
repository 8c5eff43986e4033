"""An output folder flag (``--out``) naming an existing file: every command of
``rmeval`` and ``rmtrain`` that writes a folder says so in one line naming the flag, exits 2 and
writes nothing (the file is left as it was), before any model, data or recipe is read."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rmeval.cli import build_parser as rmeval_parser
from rmeval.cli import main as rmeval_main
from rmtrain.cli import build_parser as rmtrain_parser
from rmtrain.cli import main as rmtrain_main
from tests.support import subcommands

FOLDER_FLAGS = ("--out",)  # the one name of an output folder (an old name is a hidden alias of it)
FILE_OUT = {("rmeval", "variants")}  # its --out is the output jsonl itself


def _argv(words: str, p: argparse.ArgumentParser, flag: str, value: str) -> list[str]:
    """The command with placeholders for its other required arguments (never read: the flags are
    checked first) and ``flag value``."""
    argv = words.split()
    for a in p._actions:
        if a.dest == "help" or flag in a.option_strings:
            continue
        if not a.option_strings:  # a positional
            argv.append("x.yaml")
        elif a.required:
            argv += [a.option_strings[0], str(a.choices[0]) if a.choices else "x"]
    return [*argv, flag, value]


def _parsers(prog: str) -> dict[str, argparse.ArgumentParser]:
    return dict(subcommands(rmeval_parser() if prog == "rmeval" else rmtrain_parser(), has="func"))


def _cases() -> list[tuple[str, str, str]]:
    """(program, command words, flag) of every command with an output-folder flag."""
    cases = []
    for prog in ("rmeval", "rmtrain"):
        for words, p in _parsers(prog).items():
            flags = [f for a in p._actions for f in a.option_strings[:1] if f in FOLDER_FLAGS]
            if (prog, words) not in FILE_OUT:
                cases += [(prog, words, f) for f in flags]
    return cases


CASES = _cases()


def test_every_command_with_an_output_folder_is_covered():
    commands = {words for _, words, _ in CASES}
    assert {"audit", "pairwise", "suitability", "stats", "features", "human", "judges elicit", "judges analyze",
            "judges reweight", "pool", "leaderboard", "reproduce", "suitability-stats", "train", "sweep", "policy",
            "policy-eval", "filter-experiment"} <= commands


@pytest.mark.parametrize("prog,words,flag", CASES, ids=[" ".join(c) for c in CASES])
def test_an_output_folder_that_is_a_file_is_one_line(prog, words, flag, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the placeholders are relative paths: nothing of them may appear here
    file = tmp_path / "results.txt"
    file.write_text("kept\n")
    sub = _parsers(prog)[words]
    main = rmeval_main if prog == "rmeval" else rmtrain_main
    for value, named in ((str(file), str(file)), (str(file / "sub"), str(file))):
        assert main(_argv(words, sub, flag, value)) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert err == [f"{prog}: error: {flag}: {named} is a file, not a folder"], err
        assert file.read_text() == "kept\n" and sorted(p.name for p in Path(tmp_path).iterdir()) == ["results.txt"]
