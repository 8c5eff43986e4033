"""Matched sweeps (the wiring layer): recipe -> run matrix -> search stage -> per-arm selection ->
seed stage -> full audit of every final checkpoint -> summary, report, plots and W&B table.

    rmtrain sweep --config RECIPE --out OUT [--dry-run] [--executor local|slurm] [--max-parallel N]

The names below load on first use (PEP 562), so ``python -m rmtrain.sweep.worker`` (each run's
process) does not import the worker module twice through the driver.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {"EXECUTORS": "driver", "run_sweep": "driver", "sweep_group": "driver", "Ledger": "ledger",
         "Matrix": "matrix", "RunSpec": "matrix", "expand": "matrix", "render_matrix": "matrix",
         "select_setting": "matrix"}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
