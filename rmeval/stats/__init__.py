"""Statistics on scores tables: numpy/scipy only (no torch), every effect with a prompt bootstrap."""

from __future__ import annotations

from .bootstrap import mean_of_prompt_values, percentile_ci, prompt_bootstrap, resample_weights
from .pairwise import accuracy_matrix, hard_normal_easy, pair_outcomes, pairwise_accuracy
from .regression import sibling_regression
from .selection import loo_centered, top_selection
from .share import icc1, residual_share, share
from .transplant import prompt_only, shift, transplant

__all__ = [
    "accuracy_matrix", "hard_normal_easy", "icc1", "loo_centered", "mean_of_prompt_values",
    "pair_outcomes", "pairwise_accuracy", "percentile_ci", "prompt_bootstrap", "prompt_only",
    "resample_weights", "residual_share", "share", "shift", "sibling_regression", "top_selection",
    "transplant",
]
