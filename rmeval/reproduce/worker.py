"""One row of a reproduction recipe in a process of its own: a task of the SLURM job array
(``rmeval.reproduce.array``)::

    python -m rmeval.reproduce.worker RECIPE OUT ROW [--stand-in] [--wandb-mode MODE] [--set KEY=VALUE ...]
                                      [--endpoint URL]

It computes the row unless it is done (``rows/<row>/done.json``) and exits 0; the driver builds the
table once every task has ended. ``--set`` repeats the driver's overrides of recipe keys (data
sources, SLURM settings), ``--endpoint`` the server the row's judge is scored through (the task's
own vLLM server, or one given with ``rmeval reproduce --endpoint``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rmcore.config import parse_override
from rmcore.errors import ConfigError
from rmeval.reproduce.context import Context
from rmeval.reproduce.recipe import load_reproduction
from rmeval.reproduce.runner import one_thread, run_row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rmeval.reproduce.worker")
    p.add_argument("recipe")
    p.add_argument("out")
    p.add_argument("row")
    p.add_argument("--stand-in", action="store_true")
    p.add_argument("--wandb-mode", default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--endpoint", default=None, help="the OpenAI-compatible server of the row's judge")
    a = p.parse_args(argv)

    try:
        overrides = dict(parse_override(o) for o in a.overrides)
        recipe = load_reproduction(a.recipe, overrides)
        ctx = Context(recipe, Path(a.out), stand_in=a.stand_in, wandb_mode=a.wandb_mode, overrides=overrides,
                      endpoints={a.row: a.endpoint} if a.endpoint else {})
        with one_thread(a.stand_in):
            rec = run_row(ctx, a.row)
    except ConfigError as e:  # a bad recipe or row: one line, as the command says it
        print(f"rmeval.reproduce.worker: {e}", file=sys.stderr)
        return 2
    print(f"{a.row}: {'cached' if rec.get('cached') else 'done'} in {rec['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
