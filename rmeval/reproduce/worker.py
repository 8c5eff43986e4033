"""One row of a reproduction recipe in a process of its own: a task of the SLURM job array
(``rmeval.reproduce.array``)::

    python -m rmeval.reproduce.worker RECIPE OUT ROW [--stand-in] [--wandb-mode MODE]

It computes the row unless it is done (``rows/<row>/done.json``) and exits 0; the driver builds the
table once every task has ended."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
    a = p.parse_args(argv)

    recipe = load_reproduction(a.recipe)
    ctx = Context(recipe, Path(a.out), stand_in=a.stand_in, wandb_mode=a.wandb_mode)

    with one_thread(a.stand_in):
        rec = run_row(ctx, a.row)
    print(f"{a.row}: {'cached' if rec.get('cached') else 'done'} in {rec['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
