"""Matched sweeps (the wiring layer): recipe -> run matrix -> search stage -> per-arm selection ->
seed stage -> full audit of every final checkpoint -> summary, report, plots and W&B table.

    rmtrain sweep --config RECIPE --out OUT [--dry-run] [--executor local|slurm] [--max-parallel N]

The names below load on first use (PEP 562), so ``python -m rmtrain.sweep.worker`` (each run's
process) does not import the worker module twice through the driver.
"""

from __future__ import annotations

from rmcore.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "driver": ("EXECUTORS", "run_sweep", "sweep_group"),
    "ledger": ("Ledger",),
    "matrix": ("Matrix", "RunSpec", "expand", "render_matrix", "select_setting"),
})
