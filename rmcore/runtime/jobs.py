"""The one submitit executor factory: a SLURM job array, or the same jobs as local processes.

Sharded judge elicitation (``rmeval.judges.shards``) and training sweeps
(``rmtrain.sweep.executors.SubmititExecutor``) both submit through it, so a cluster set-up that
works for one works for the other. submitit is imported here only: it is an optional dependency
(``matchrm[slurm]``), and its absence is a one-line error naming the install, not a traceback.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from rmcore.errors import ConfigError


def submitit_executor(kind: str, folder: str | os.PathLike, *, cluster: str | None = None, **params: Any) -> Any:
    """A submitit executor writing its logs and pickles under ``folder``: ``slurm`` (AutoExecutor on
    ``cluster``: None picks SLURM where there is one and local processes elsewhere; "slurm" or
    "local" force it), ``local`` (LocalExecutor) or ``debug`` (DebugExecutor, in this process).
    ``params`` go to ``update_parameters`` (timeout_min, gpus_per_node, slurm_partition...)."""
    try:
        import submitit
    except ImportError:
        raise ConfigError(f"--executor {kind} needs submitit: pip install 'matchrm[slurm]'") from None
    if kind == "slurm":
        try:
            ex = submitit.AutoExecutor(folder=folder, cluster=cluster)
        except RuntimeError as e:  # e.g. no srun: not on a SLURM cluster
            raise ConfigError(f"--executor slurm: {e}") from None
    elif kind == "local":
        ex = submitit.LocalExecutor(folder=folder)
    elif kind == "debug":
        ex = submitit.DebugExecutor(folder=folder)
    else:
        raise ValueError(f"unknown executor '{kind}' (slurm, local or debug)")
    if params:
        ex.update_parameters(**params)
    return ex


def launch_command(num_processes: int, module_args: list[str]) -> tuple[list[str], dict[str, str]]:
    """(command, environment additions) running ``python -m <module_args>`` as ``num_processes``
    processes of one machine under ``accelerate launch``: one per GPU where torch sees GPUs, else
    CPU processes (``--multi_gpu`` with ACCELERATE_USE_CPU=1; ``--cpu --num_processes N`` would
    silently start one). Each process reads its RANK and WORLD_SIZE from the launcher."""
    import torch

    if num_processes < 1:
        raise ConfigError(f"--num-processes must be >= 1, got {num_processes}")
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "--num_processes", str(num_processes)]
    if num_processes > 1:
        cmd.append("--multi_gpu")
    env = {} if torch.cuda.is_available() else {"ACCELERATE_USE_CPU": "1"}
    return [*cmd, "-m", *module_args], env


def is_main_process() -> bool:
    """Whether this process is the launcher's rank 0 (``RANK``; one process without a launcher):
    the one that prints a command's result, once, however many processes run it."""
    return int(os.environ.get("RANK", "0") or 0) == 0


def wait_for_health(url: str, alive: Callable[[], bool], wait_s: float, what: str = "server") -> None:
    """Poll ``url`` (a server's health endpoint) until it answers 200, every second for at most
    ``wait_s`` seconds; ``alive()`` false (the server's process ended) or the deadline is a one-line
    ConfigError naming ``what``. Used by the PPO launch (the reward server) and by a reproduction
    task that serves its judge (``rmeval.reproduce.serve``)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:  # refused, reset, or an HTTP error (503 while the engine loads)
            pass
        if not alive():
            raise ConfigError(f"{what} exited before {url} answered")
        if time.monotonic() > deadline:
            raise ConfigError(f"{what} did not come up at {url} within {wait_s:g} s")
        time.sleep(1)
