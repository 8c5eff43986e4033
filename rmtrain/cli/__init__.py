"""`rmtrain`: thin command line over rmtrain's Python API.

    rmtrain train --config RECIPE [--arm A] [--seed S] [--model M] [--out DIR] [--set KEY=VALUE]...
    rmtrain sweep --config RECIPE [--executor local|slurm|submitit-local] [--dry-run]
    rmtrain policy --config RECIPE --reward-model RM --environment clean|perturbed [--launch]
    rmtrain policy-eval --config RECIPE --out OUT [--clean DIR --perturbed DIR]
    rmtrain check RECIPE ...
    rmtrain filter-experiment --config RECIPE [--out DIR] [--set KEY=VALUE]...

One module per command (``rmtrain.cli.<command>``), each with ``add_parser(subparsers)`` and its
settings dataclass (``TrainCommand``, ``SweepCommand`` ...; ``rmcore.settings.fields``), registered with its
``run`` by ``rmcore.settings.commands.add_command`` as ``rmeval``'s commands are: the flags are generated from
the settings, read back into them by ``main`` (``rmcore.settings.commands.run_main``), and the command's
``run(settings)`` builds the config, makes one library call and prints its result.
"""

from __future__ import annotations

import argparse

from rmcore.settings.commands import run_main
from rmcore.settings.fields import Parser
from rmtrain.cli import check, filter_experiment, policy, sweep, train


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="rmtrain", description="Train matched reward-model arms.")
    sub = ap.add_subparsers(dest="command", required=True)
    for command in (train, sweep, policy, check, filter_experiment):
        command.add_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    return run_main("rmtrain", build_parser(), argv)
