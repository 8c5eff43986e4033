"""Run shard callables locally or as a SLURM job array through a submitit executor.

Kept in one place on purpose: ``rmtrain.sweep`` is getting its own submitit executor for sweeps,
and this function is the seam where the two are unified (pass that executor here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def run_shards(shards: Sequence[Callable[[], Any]], executor: Any | None = None) -> list[Any]:
    """Results of ``shards`` in order. Without an executor they run one after another in this
    process; with a ``submitit`` executor (``AutoExecutor`` on SLURM, ``LocalExecutor``,
    ``DebugExecutor``) they are submitted in one batch -- a job array on SLURM -- and awaited. A
    failed shard raises after all others finished; rerunning resumes it from its cache."""
    if executor is None:
        return [fn() for fn in shards]
    with executor.batch():
        jobs = [executor.submit(fn) for fn in shards]
    results, errors = [], []
    for i, job in enumerate(jobs):
        try:
            results.append(job.result())
        except Exception as e:  # collect: one failed shard must not hide the others' state
            results.append(None)
            errors.append(f"shard {i}: {e}")
    if errors:
        raise RuntimeError("; ".join(errors))
    return results


def make_executor(kind: str, folder: str, **params: Any) -> Any:
    """A submitit executor: ``slurm`` (AutoExecutor, falls back to local without SLURM), ``local``
    or ``debug``; ``params`` go to ``update_parameters`` (timeout_min, slurm_partition, gpus_per_node...)."""
    import submitit

    if kind == "slurm":
        ex = submitit.AutoExecutor(folder=folder)
    elif kind == "local":
        ex = submitit.LocalExecutor(folder=folder)
    elif kind == "debug":
        ex = submitit.DebugExecutor(folder=folder)
    else:
        raise ValueError(f"unknown executor '{kind}' (slurm, local or debug)")
    if params:
        ex.update_parameters(**params)
    return ex
