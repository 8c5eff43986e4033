"""A table's rows as a submitit job array: one row per task (``rmeval.reproduce.worker``), through
the one executor factory of the project (``rmcore.jobs.make_executor``, which rmtrain's sweeps and
the judges' sharded elicitation use too). Each task asks for the GPUs and memory the dry run
derives for its model (``rmeval.reproduce.plan``); rows that ask for the same resources share one
array, so a table of 8B models is one array and a 70B judge with ``device_map: auto`` another.
A row already done is not submitted; a task that fails leaves its row missing in the table."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from rmcore.jobs import make_executor
from rmeval.reproduce.plan import plan_recipe

log = logging.getLogger(__name__)


def worker_args(recipe: str, out: str | os.PathLike, row: str, *, stand_in: bool, wandb_mode: str | None) -> list[str]:
    """The command line of one task (``python -m`` prepended): ``rmeval.reproduce.worker``."""
    args = ["rmeval.reproduce.worker", str(recipe), str(out), row]
    if stand_in:
        args.append("--stand-in")
    if wandb_mode:
        args += ["--wandb-mode", wandb_mode]
    return args


def run_array(ctx: Any, rows: list[str], outcome: Any, *, cluster: str | None = None, partition: str | None = None,
              cpus_per_task: int = 8, array_parallelism: int = 16, setup: list[str] | None = None) -> None:
    import json

    from submitit.helpers import CommandFunction

    plan = {r["row"]: r for r in plan_recipe(ctx.recipe, ctx.out, stand_in=ctx.stand_in)["rows"]}
    todo = []
    for row in rows:
        if ctx.done_path(row).is_file():
            outcome.cached.append(row)
        else:
            todo.append(row)
    shapes: dict[tuple[int, int, int], list[str]] = {}
    for row in todo:
        p = plan[row]
        shapes.setdefault((p["slurm"]["gpus"], p["slurm"]["mem_gb"], p["slurm"]["timeout_min"]), []).append(row)
    submitted = []
    for (gpus, mem, timeout), group in shapes.items():
        params: dict[str, Any] = {"name": f"reproduce-{ctx.recipe.name}", "timeout_min": timeout, "gpus_per_node": gpus,
                                  "cpus_per_task": cpus_per_task, "mem_gb": mem,
                                  "slurm_array_parallelism": array_parallelism}
        if partition:
            params["slurm_partition"] = partition
        if setup:
            params["slurm_setup"] = list(setup)
        ex = make_executor("slurm", ctx.out / "submitit", cluster=cluster, **params)
        fns = [CommandFunction([sys.executable, "-m", *worker_args(ctx.recipe.path, ctx.out, row, stand_in=ctx.stand_in,
                                                                   wandb_mode=ctx.wandb_mode)],
                               cwd=os.getcwd(), verbose=True) for row in group]
        jobs = ex.submit_array(fns)
        log.info("submitted %d rows (%d GPU, %d GB) as job array %s", len(jobs), gpus, mem, jobs[0].job_id.split("_")[0])
        submitted += list(zip(group, jobs))
    for row, job in submitted:
        try:
            job.result()
        except Exception as e:  # the row stays missing; the table says why
            lines = str(e).strip().splitlines()
            outcome.failed[row] = f"job {job.job_id} failed: {lines[-1] if lines else type(e).__name__}"
            continue
        outcome.ran.append(row)
        outcome.seconds[row] = json.loads(ctx.done_path(row).read_text())["seconds"]
