"""A table's rows as submitit job arrays: one row per task, each task a bash script
(``OUT/tasks/<row>.sh``, ``rmeval.reproduce.cluster.task_script``) that runs ``python -m
rmeval.reproduce.worker`` for its row, and for a judge the task serves, starts ``vllm serve`` first
and stops it at the end. Tasks go through the one executor factory of the project
(``rmcore.runtime.jobs.submitit_executor``, which rmtrain's sweeps and the judges' sharded elicitation use too)
with the recipe's ``slurm`` settings (account, QoS, partition, extra ``#SBATCH`` options, setup
lines) and each task's GPUs, memory and time limit from the dry run (``rmeval.reproduce.plan``);
rows that ask for the same resources share one array. A row already done is not submitted; a task
that fails leaves its row missing in the table. ``--dry-run --executor slurm`` prints the sbatch
script of each array (submitit's own rendering) and writes the task scripts without submitting."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io.files import atomic_write_text
from rmcore.runtime.jobs import submitit_executor
from rmeval.reproduce.cluster import executor_params, sbatch_text, task_script, worker_command

log = logging.getLogger(__name__)


def task_scripts(ctx: Any, rows: list[str], plan_rows: dict[str, dict[str, Any]]) -> dict[str, Path]:
    """``OUT/tasks/<row>.sh`` of each row (written; executable)."""
    out = {}
    for row in rows:
        p = plan_rows[row]
        worker = worker_command(ctx.recipe.path, ctx.out, row, stand_in=ctx.stand_in, wandb_mode=ctx.wandb_mode,
                                overrides=ctx.overrides, endpoint=ctx.endpoints.get(row))
        server = p.get("server") if not ctx.stand_in and row not in ctx.endpoints else None
        path = ctx.out / "tasks" / f"{row}.sh"
        atomic_write_text(path, task_script(row, worker, server=server,
                                            log=str((ctx.row_dir(row) / "vllm.log").resolve())))
        os.chmod(path, 0o755)
        out[row] = path
    return out


def array_groups(ctx: Any, rows: list[str], plan_rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The job arrays: rows of one shape (GPUs, memory, time limit) share one; each with its
    submitit parameters."""
    shapes: dict[tuple[int, int, int], list[str]] = {}
    for row in rows:
        sl = plan_rows[row]["slurm"]
        shapes.setdefault((sl["gpus"], sl["mem_gb"], sl["timeout_min"]), []).append(row)
    return [{"rows": group, "params": executor_params(ctx.recipe.slurm, name=f"reproduce-{ctx.recipe.name}", gpus=g,
                                                      mem_gb=mem, timeout_min=t)}
            for (g, mem, t), group in shapes.items()]


def slurm_plan(ctx: Any, plan: dict[str, Any]) -> dict[str, Any]:
    """The dry run's SLURM part: per array its rows and sbatch script, and the task scripts (written)."""
    plan_rows = {r["row"]: r for r in plan["rows"]}
    rows = [r["row"] for r in plan["rows"] if r["status"] == "to run"]
    scripts = task_scripts(ctx, rows, plan_rows)
    s = ctx.recipe.slurm
    unset = [f"{k} ({flag})" for k, flag in (("account", "--account"), ("qos", "--qos"), ("partition", "--partition"))
             if not getattr(s, k)]
    arrays = [{**g, "sbatch": sbatch_text(g["params"], ctx.out / "submitit", len(g["rows"]))}
              for g in array_groups(ctx, rows, plan_rows)]
    return {"arrays": arrays, "scripts": {r: str(p) for r, p in scripts.items()},
            "served": [r for r in rows if plan_rows[r].get("server")], "unset": unset}


def slurm_markdown(sp: dict[str, Any]) -> str:
    lines = ["## SLURM job arrays", ""]
    if sp["unset"]:
        lines += ["Not set (the cluster's defaults apply): " + ", ".join(sp["unset"]) + ".", ""]
    for i, a in enumerate(sp["arrays"], 1):
        lines += [f"### Array {i}: {len(a['rows'])} task(s), {a['params']['gpus_per_node']} GPU(s), "
                  f"{a['params']['mem_gb']} GB, {a['params']['timeout_min']} min: {', '.join(a['rows'])}", "",
                  "```bash", a["sbatch"].rstrip(), "```", ""]
    if not sp["arrays"]:
        return "\n".join([*lines, "No job array: the table has no row to run (its work is its panel step's).", ""])
    lines += ["Each task runs its script `bash OUT/tasks/ROW.sh` (written): " +
              ", ".join(f"`{p}`" for p in sp["scripts"].values()), ""]
    for row in sp["served"]:
        lines += [f"### Task script of {row} (starts its judge server)", "", "```bash",
                  Path(sp["scripts"][row]).read_text().rstrip(), "```", ""]
    return "\n".join(lines)


def run_served_locally(ctx: Any, row: str, plan_row: dict[str, Any]) -> None:
    """A row whose judge the task serves, on this machine: its task script (server, worker, stop)."""
    script = task_scripts(ctx, [row], {row: plan_row})[row]
    res = subprocess.run(["bash", str(script)], check=False)
    if res.returncode != 0 or not ctx.done_path(row).is_file():
        raise ConfigError(f"{row}: its task script {script} exited with {res.returncode} (the server's log: "
                          f"{ctx.row_dir(row) / 'vllm.log'})")


def run_array(ctx: Any, rows: list[str], outcome: Any, plan_rows: dict[str, dict[str, Any]], *,
              cluster: str | None = None) -> None:
    from submitit.helpers import CommandFunction

    todo = []
    for row in rows:
        if ctx.done_path(row).is_file():
            outcome.cached.append(row)
        else:
            todo.append(row)
    scripts = task_scripts(ctx, todo, plan_rows)
    submitted = []
    for g in array_groups(ctx, todo, plan_rows):
        ex = submitit_executor("slurm", ctx.out / "submitit", cluster=cluster, **g["params"])
        fns = [CommandFunction(["bash", str(scripts[row])], cwd=os.getcwd(), verbose=True) for row in g["rows"]]
        jobs = ex.submit_array(fns)
        log.info("submitted %d rows (%d GPU, %s GB) as job array %s", len(jobs), g["params"]["gpus_per_node"],
                 g["params"]["mem_gb"], jobs[0].job_id.split("_")[0])
        submitted += list(zip(g["rows"], jobs))
    for row, job in submitted:
        try:
            job.result()
        except Exception as e:  # the row stays missing; the table says why
            lines = str(e).strip().splitlines()
            outcome.failed[row] = f"job {job.job_id} failed: {lines[-1] if lines else type(e).__name__}"
            continue
        outcome.ran.append(row)
        outcome.seconds[row] = json.loads(ctx.done_path(row).read_text())["seconds"]
