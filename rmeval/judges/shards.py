"""Run shard callables locally or as a SLURM job array through a submitit executor
(``submitit_executor``: the one factory in ``rmcore.runtime.jobs``, shared with ``rmtrain sweep``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rmcore.runtime.jobs import submitit_executor

__all__ = ["submitit_executor", "run_shards"]


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
