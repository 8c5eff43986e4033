"""The command lines of ``rmeval`` and ``rmtrain``, built one way: a subcommand is its settings
dataclass (:mod:`rmcore.settings.fields`: the fields declare the flags) and a ``run(settings)`` function,
registered by :func:`add_command`; :func:`run_main` is both tools' ``main``: it parses, reads the
settings back, runs the command and turns a bad input into one line and exit code 2.

A command that runs a recipe overrides its keys one way (:func:`recipe_overrides`): the ``--set
KEY=VALUE`` items of its field ``overrides``, then each flag declared with a ``recipe_key``
(``--seed`` -> ``seed``, ``--data`` -> ``data``, ``--sbatch K=V`` -> ``slurm.additional_parameters.K``).
Nothing heavy is imported here: ``--help`` stays cheap."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rmcore.console.quiet import quiet_libraries
from rmcore.errors import ConfigError, DataError
from rmcore.io.files import check_path
from rmcore.settings.fields import add_options, flag_overrides, from_args
from rmcore.settings.recipes import blame_override, parse_override

T = TypeVar("T")


def add_command(sub: argparse._SubParsersAction, name: str, settings: type[T], run: Callable[[T], int | None],
                **parser: Any) -> argparse.ArgumentParser:
    """Subcommand ``name`` (``parser``: ``help``, ``description`` ... of ``add_parser``): its flags
    are the fields of ``settings``, and ``run`` takes them back as a ``settings`` object (the
    parser's defaults ``func`` and ``settings``, which :func:`run_main` and the flag tests read)."""
    p = sub.add_parser(name, **parser)
    add_options(p, settings)
    p.set_defaults(func=run, settings=settings)
    return p


def read_settings(cls: type[T], args: argparse.Namespace, argv: Sequence[str] = ()) -> T:
    """``cls`` from the parsed flags; a command that runs itself again (``--num-processes``) gets
    its command line ``argv`` in its field ``argv``."""
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return from_args(cls, args, **({"argv": list(argv)} if "argv" in fields else {}))


def recipe_overrides(settings: Any) -> dict[str, Any]:
    """The recipe keys a command's flags override: its ``--set`` pairs (the field ``overrides``,
    values read as YAML), then the flags declared with a ``recipe_key`` that were given, which win."""
    out = dict(parse_override(o) for o in getattr(settings, "overrides", None) or [])
    out.update(flag_overrides(settings))
    return out


def run_main(prog: str, parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """The ``main`` of a tool whose subcommands :func:`add_command` registered: parse ``argv``
    (a bad flag ends here, before any library loads), read the command's settings, check a recipe
    path (``config``) before the command loads torch, run it. A ConfigError, DataError or OSError is
    one line ``PROG: error: ...`` and exit code 2 (a key a ``--set`` gave is named by that ``--set``)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = parser.parse_args(argv)
    quiet_libraries()  # the libraries' loading bars and notices off; our warnings and errors stay
    try:  # a flag's value that does not parse is a one-line error too
        settings = read_settings(args.settings, args, sys.argv[1:] if argv is None else argv)
        if isinstance(getattr(settings, "config", None), str):
            check_path(settings.config, "recipe")  # the recipe loader's own check, made before torch loads
        return int(args.func(settings) or 0)
    except (ConfigError, DataError, OSError) as e:
        if isinstance(e, ConfigError) and getattr(args, "overrides", None):  # a key a --set gave: name the --set
            e = blame_override(e, str(getattr(args, "config", "")), args.overrides)
        # one line: a Hub lookup that failed (OSError from transformers) explains itself in its first
        lines = str(e).strip().splitlines()
        print(f"{prog}: error: {lines[0] if lines else type(e).__name__}", file=sys.stderr)
        return 2
