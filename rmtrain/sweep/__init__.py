"""Matched sweeps (the wiring layer): recipe -> run matrix -> search stage -> per-arm selection ->
seed stage -> full audit of every final checkpoint -> summary, report, plots and W&B table.

    rmtrain sweep --config RECIPE --output-dir OUT [--dry-run] [--executor local|slurm] [--max-parallel N]
"""

from rmtrain.sweep.driver import EXECUTORS, run_sweep, sweep_group
from rmtrain.sweep.ledger import Ledger
from rmtrain.sweep.matrix import Matrix, RunSpec, expand, render_matrix, select_setting

__all__ = ["EXECUTORS", "Ledger", "Matrix", "RunSpec", "expand", "render_matrix", "run_sweep", "select_setting",
           "sweep_group"]
