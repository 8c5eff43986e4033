"""One row of a reproduction recipe in a process of its own: a task of the SLURM job array
(``rmeval.reproduce.array``)::

    python -m rmeval.reproduce.worker RECIPE OUT ROW [--stand-in] [--wandb-mode MODE] [--set KEY=VALUE ...]
                                      [--endpoint URL]

It computes the row unless it is done (``rows/<row>/done.json``) and exits 0; the driver builds the
table once every task has ended. ``--set`` repeats the driver's overrides of recipe keys (data
sources, SLURM settings), ``--endpoint`` the server the row's judge is scored through (the task's
own vLLM server, or one given with ``rmeval reproduce --endpoint``). Its flags are the fields of
:class:`ReproduceWorkerCommand` (``rmcore.settings.fields``), as every command's are."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from rmcore.errors import ConfigError
from rmcore.runtime.wandb_log import WandbFlags
from rmcore.settings.commands import recipe_overrides
from rmcore.settings.fields import Parser, add_options, from_args, nested, option
from rmeval.reproduce.context import Context
from rmeval.reproduce.recipe import load_reproduction
from rmeval.reproduce.runner import one_thread, run_row

PROG = "rmeval.reproduce.worker"


@dataclass
class ReproduceWorkerCommand:
    """One task's command line (``rmeval.reproduce.cluster.worker_command`` writes it)."""

    recipe: str = option(positional=True, help="the reproduction recipe")
    out: str = option(positional=True, help="the reproduction's output directory")
    row: str = option(positional=True, help="the row this task computes")
    stand_in: bool = option(False, help="tiny local stand-ins, as rmeval reproduce --stand-in")
    wandb: WandbFlags = nested(WandbFlags, only=("wandb_mode",))
    overrides: list[str] = option(default_factory=list, flag="--set", action="append", metavar="KEY=VALUE",
                                  help="a recipe key the driver overrides (once per key)")
    endpoint: str | None = option(None, help="the OpenAI-compatible server of the row's judge")


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog=PROG)
    add_options(p, ReproduceWorkerCommand)
    args = p.parse_args(argv)
    try:
        a = from_args(ReproduceWorkerCommand, args)
        overrides = recipe_overrides(a)
        recipe = load_reproduction(a.recipe, overrides)
        ctx = Context(recipe, Path(a.out), stand_in=a.stand_in, wandb_mode=a.wandb.wandb_mode, overrides=overrides,
                      endpoints={a.row: a.endpoint} if a.endpoint else {})
        with one_thread(a.stand_in):
            rec = run_row(ctx, a.row)
    except ConfigError as e:  # a bad recipe or row: one line, as the command says it
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    print(f"{a.row}: {'cached' if rec.get('cached') else 'done'} in {rec['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
