"""`rmtrain`: thin command line over rmtrain's Python API.

    rmtrain train --config RECIPE [--arm A] [--seed S] [--model M] [--out DIR] [--set KEY=VALUE]...
    rmtrain sweep --config RECIPE [--executor local|slurm|submitit-local] [--dry-run]
    rmtrain policy --config RECIPE --reward-model RM --environment clean|perturbed [--launch]
    rmtrain policy-eval --config RECIPE --out OUT [--clean DIR --perturbed DIR]
    rmtrain check RECIPE ...
    rmtrain filter-experiment --config RECIPE [--out DIR] [--set KEY=VALUE]...

One module per command (``rmtrain.cli.<command>``), each with ``add_parser(subparsers)`` and its
settings dataclass (``TrainCommand``, ``SweepCommand`` ...; ``rmcore.settings``): the flags are
generated from the settings, read back into them, and the command's ``run(settings)`` builds the
config, makes one library call and prints its result.
"""

from __future__ import annotations

import argparse
import logging
import sys

from rmcore.config import blame_override
from rmcore.errors import ConfigError, DataError
from rmcore.io import check_path
from rmcore.quiet import quiet_libraries
from rmcore.settings import Parser, from_args
from rmtrain.cli import check, filter_experiment, policy, sweep, train


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="rmtrain", description="Train matched reward-model arms.")
    sub = ap.add_subparsers(dest="command", required=True)
    for command in (train, sweep, policy, check, filter_experiment):
        command.add_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)  # first: --help and a bad flag end here, before any library loads
    quiet_libraries()
    try:
        settings = from_args(args.settings, args)
        if isinstance(getattr(settings, "config", None), str):
            check_path(settings.config, "recipe")  # load_recipe's own check, made before torch loads
        return int(args.func(settings) or 0)
    except (ConfigError, DataError, OSError) as e:
        if isinstance(e, ConfigError) and getattr(args, "overrides", None):  # a key a --set gave: name the --set
            e = blame_override(e, str(getattr(args, "config", "")), args.overrides)
        lines = str(e).strip().splitlines()
        print(f"rmtrain: error: {lines[0] if lines else type(e).__name__}", file=sys.stderr)
        return 2
