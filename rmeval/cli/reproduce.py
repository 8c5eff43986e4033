"""``rmeval reproduce``: regenerate a published table from its recipe (rmeval.reproduce), beside the
published figures; ``--dry-run`` plans it without downloading (with ``--executor slurm``: the sbatch
scripts and task scripts too), ``--stand-in`` runs it with tiny local models on local data (a CPU is
enough). The SLURM and cluster flags override the recipe's ``slurm`` and ``compute`` keys, and
``--data-source`` its ``data_sources`` (each task re-reads the recipe with the same overrides)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.runtime.wandb_log import WandbFlags
from rmcore.settings.commands import add_command, recipe_overrides
from rmcore.settings.fields import AppendEach, key_values, option, output_folder
from rmeval.cli.flags import wandb_flags
from rmeval.reproduce.recipe import load_reproduction

CLUSTER = "cluster (override the recipe's slurm, compute and data_sources keys)"


@dataclass
class ReproduceCommand:
    """``rmeval reproduce``'s settings; ``recipe`` is the positional argument."""

    recipe: str = option("", positional=True, help="a reproduction recipe (recipes/reproduce/*.yaml)")
    out: str | None = option(None, parse=output_folder("--out"),
                             help="output directory (default: the recipe's output_dir/<recipe name>, "
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
    partition: str | None = option(None, recipe_key="slurm.partition", help="SLURM partition of the job arrays")
    account: str | None = option(None, recipe_key="slurm.account", help="SLURM account the jobs are charged to")
    qos: str | None = option(None, recipe_key="slurm.qos", help="SLURM quality of service")
    timeout_min: int | None = option(None, ge=1, recipe_key="slurm.timeout_min",
                                  help="every task's time limit in minutes (default: each task's own: download + "
                                       "load + 3 x compute + 30, at least 60)")
    sbatch: dict[str, str] | None = option(None, action=AppendEach, metavar="KEY=VALUE", parse=key_values("--sbatch"),
                                           recipe_key="slurm.additional_parameters.*",
                                           help="any other #SBATCH option, e.g. constraint=h100 or exclusive=true "
                                                "(repeat the flag for each)")
    setup: list[str] | None = option(None, action=AppendEach, metavar="LINE", recipe_key="slurm.setup",
                                     help="a shell line run before each task, e.g. 'source .venv/bin/activate' "
                                          "(repeat the flag for each)")
    cpus_per_task: int | None = option(None, ge=1, recipe_key="slurm.cpus_per_task", help="CPUs per array task (8)")
    array_parallelism: int | None = option(None, ge=1, recipe_key="slurm.array_parallelism",
                                           help="array tasks running at once (16)")
    gpu_memory_gb: float | None = option(None, gt=0, recipe_key="compute.gpu_memory_gb",
                                         help="GPU memory in GB, which sets GPUs per task and tensor-parallel "
                                              "sizes (80)")
    node_gpus: int | None = option(None, ge=1, recipe_key="compute.gpus_per_node",
                                   help="GPUs of one node: a server needing more spans nodes (8)")
    download_mb_s: float | None = option(None, gt=0, recipe_key="compute.download_mb_s",
                                         help="Hub download bandwidth per task in MB/s, for the time limits (100)")
    data_source: dict[str, str] | None = option(None, action=AppendEach, metavar="NAME=PATH",
                                                parse=key_values("--data-source"), recipe_key="data_sources.*.path",
                                                help="read the recipe's data source NAME (data_sources) from PATH")
    endpoint: dict[str, str] | None = option(None, action=AppendEach, metavar="ROW=URL", parse=key_values("--endpoint"),
                                             help="score ROW's judge through the OpenAI-compatible server at URL "
                                                  "(a shared or multi-node server) instead of the recipe's")
    wandb: WandbFlags = wandb_flags()

    def output(self, recipe: Any) -> Path:
        if self.out:
            return Path(self.out)
        return Path(recipe.output_dir) / (recipe.name + ("-stand-in" if self.stand_in else ""))


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "reproduce", ReproduceCommand, run,
                help="regenerate a published table beside the published figures")


def run(s: ReproduceCommand) -> int:
    overrides = recipe_overrides(s)
    recipe = load_reproduction(s.recipe, overrides)
    # the plan and the rows' pipelines (pandas, scipy): --help and a recipe's errors load no tables
    from rmeval.reproduce.array import slurm_markdown, slurm_plan
    from rmeval.reproduce.context import Context
    from rmeval.reproduce.plan import plan_markdown, plan_recipe
    from rmeval.reproduce.runner import run_recipe

    out = s.output(recipe)
    unknown = sorted(set(s.endpoint or {}) - {m.name for m in recipe.models})
    if unknown:
        raise ConfigError(f"--endpoint {unknown[0]}=...: not a model row of {recipe.path}")
    if s.dry_run:
        ctx = Context(recipe, out, stand_in=s.stand_in, wandb_mode=s.wandb.wandb_mode, overrides=overrides,
                      endpoints=dict(s.endpoint or {}))
        plan = plan_recipe(recipe, out, stand_in=s.stand_in, ctx=ctx)
        text = plan_markdown(plan)
        if s.executor == "slurm":
            plan["slurm"] = slurm_plan(ctx, plan)
            text += "\n" + slurm_markdown(plan["slurm"])
        atomic_write_json(out / "plan.json", plan)
        atomic_write_text(out / "plan.md", text)
        print(text)
        return 0
    res = run_recipe(recipe, out, stand_in=s.stand_in, only=s.only, executor=s.executor, **s.wandb.target(),
                     overrides=overrides, endpoints=dict(s.endpoint or {}))
    print(res.console + "\n")
    print(f"{recipe.reproduce.table}: {len(res.ran)} rows computed, {len(res.cached)} cached, {len(res.failed)} failed "
          f"({res.total_seconds} s); {len(res.missing)} published cells without our figure -> {res.table['markdown']}")
    for row, why in res.failed.items():
        print(f"  {row}: {why}")
    return 1 if res.failed else 0
