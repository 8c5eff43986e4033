"""Independent tasks (one judge's logistic fits) over worker processes, with their progress on
stderr (``rmcore.console.progress``: a bar on a terminal, a line every half minute elsewhere).

Every task is seeded and runs its fits on one BLAS thread, so its result does not depend on the
process it runs in, nor on how many there are: ``jobs`` changes the wall time only. The tasks go
to joblib's loky workers (reused across calls; a large array argument is memory-mapped, not
copied through a pipe); results come back in task order. With ``jobs`` 1 or a single task they
run in this process (a worker's start-up, importing scikit-learn, costs seconds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rmcore.console.progress import Progress
from rmeval.stats.probes import default_jobs  # this process's CPUs, or fewer where OMP_NUM_THREADS says so

__all__ = ["default_jobs", "run_tasks"]


def run_tasks(fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], *, jobs: int | None = None,
              desc: str = "", progress: bool = False) -> list[Any]:
    """``[fn(*t) for t in tasks]``, over up to ``jobs`` worker processes (default
    ``default_jobs()``), with their progress on stderr when ``progress``."""
    jobs = default_jobs() if jobs is None else max(1, int(jobs))
    with Progress(desc, len(tasks), unit="task", enabled=progress) as bar:
        if jobs == 1 or len(tasks) <= 1:
            out = []
            for t in tasks:
                out.append(fn(*t))
                bar.update(1)
            return out
        from joblib import Parallel, delayed

        out = []
        for r in Parallel(n_jobs=min(jobs, len(tasks)), backend="loky", return_as="generator")(
                delayed(fn)(*t) for t in tasks):
            out.append(r)
            bar.update(1)
        return out
