"""``rmeval reproduce``: regenerate a published table from its recipe (rmeval.reproduce), beside the
published figures; ``--dry-run`` plans it without downloading, ``--stand-in`` runs it with tiny
local models on local data (a CPU is enough)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmcore.io import atomic_write_json, atomic_write_text
from rmcore.settings import add_options, from_args, option, output_folder
from rmeval.reproduce.plan import plan_markdown, plan_recipe
from rmeval.reproduce.recipe import load_reproduction
from rmeval.reproduce.runner import run_recipe


@dataclass
class ReproduceCommand:
    """``rmeval reproduce``'s settings; ``recipe`` is the positional argument."""

    recipe: str = ""
    out: str | None = option(None, parse=output_folder("--out"), help="output directory (default: the recipe's output_dir/<recipe name>, "
                                        "with -stand-in for a stand-in run)")
    dry_run: bool = option(False, help="print each row's loader, head, GPU memory, texts and GPU hours; "
                                       "download and score nothing")
    stand_in: bool = option(False, help="every Hub id a tiny local model of the same kind, the data local "
                                        "files in the released schemas: the figures mean nothing")
    only: list[str] | None = option(None, metavar="ROW", help="compute only these rows (models, human rows); "
                                                              "the table lists the rest as missing")
    executor: str = option("local", choices=["local", "slurm", "submitit-local"],
                           help="local: one row after another here; slurm: one submitit job array (one row per "
                                "task); submitit-local: the same tasks as local processes")
    partition: str | None = option(None, help="SLURM partition of the job array")
    cpus_per_task: int = option(8, ge=1, help="CPUs per array task")
    array_parallelism: int = option(16, ge=1, help="array tasks running at once")
    wandb_mode: str | None = option(None, choices=["online", "offline", "disabled"],
                                    help="default: online with an API key, else offline")
    wandb_project: str = option("matchrm", help="W&B project")

    def output(self, recipe: Any) -> Path:
        if self.out:
            return Path(self.out)
        return Path(recipe.output_dir) / (recipe.name + ("-stand-in" if self.stand_in else ""))


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="regenerate a published table beside the published figures")
    p.add_argument("recipe", help="a reproduction recipe (recipes/reproduce/*.yaml)")
    add_options(p, ReproduceCommand)
    p.set_defaults(func=lambda args: run(from_args(ReproduceCommand, args, recipe=args.recipe)))


def run(s: ReproduceCommand) -> int:
    recipe = load_reproduction(s.recipe)
    out = s.output(recipe)
    if s.dry_run:
        plan = plan_recipe(recipe, out, stand_in=s.stand_in)
        text = plan_markdown(plan)
        atomic_write_json(out / "plan.json", plan)
        atomic_write_text(out / "plan.md", text)
        print(text)
        return 0
    res = run_recipe(recipe, out, stand_in=s.stand_in, only=s.only, executor=s.executor, wandb_mode=s.wandb_mode,
                     wandb_project=s.wandb_project,
                     slurm={"partition": s.partition, "cpus_per_task": s.cpus_per_task,
                            "array_parallelism": s.array_parallelism})
    print(res.console + "\n")
    print(f"{recipe.reproduce.table}: {len(res.ran)} rows computed, {len(res.cached)} cached, {len(res.failed)} failed "
          f"({res.total_seconds} s); {len(res.missing)} published cells without our figure -> {res.table['markdown']}")
    for row, why in res.failed.items():
        print(f"  {row}: {why}")
    return 1 if res.failed else 0
