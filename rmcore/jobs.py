"""The one submitit executor factory: a SLURM job array, or the same jobs as local processes.

Sharded judge elicitation (``rmeval.judges.shards``) and training sweeps
(``rmtrain.sweep.executors.SubmititExecutor``) both submit through it, so a cluster set-up that
works for one works for the other. submitit is imported here only: it is an optional dependency
(``matchrm[slurm]``), and its absence is a one-line error naming the install, not a traceback.
"""

from __future__ import annotations

import os
from typing import Any

from rmcore.errors import ConfigError


def make_executor(kind: str, folder: str | os.PathLike, *, cluster: str | None = None, **params: Any) -> Any:
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
