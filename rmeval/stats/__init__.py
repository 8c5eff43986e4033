"""Statistics on scores tables: numpy/scipy only (no torch), every effect with a prompt bootstrap."""

from __future__ import annotations

from .bootstrap import (
    PromptSetResamples,
    mean_of_prompt_values,
    percentile_ci,
    prompt_bootstrap,
    resample_weights,
)
from .centering import centering_variants, weighted_spearman
from .pairwise import accuracy_matrix, hard_normal_easy, pair_outcomes, pairwise_accuracy
from .prompt_means import (
    disjoint_half_correlation,
    loo_correlation,
    prompt_mean_correlation,
    prompt_split_difference,
)
from .regression import sibling_regression
from .reliability import corrected_share, rater_reliability, spearman_brown
from .selection import loo_centered, top_selection
from .share import icc1, residual_share, share, share_pair
from .transplant import prompt_only, shift, transplant

__all__ = [
    "PromptSetResamples", "centering_variants", "corrected_share", "disjoint_half_correlation",
    "loo_correlation", "prompt_mean_correlation", "prompt_split_difference", "rater_reliability",
    "share_pair", "spearman_brown", "weighted_spearman",
    "accuracy_matrix", "hard_normal_easy", "icc1", "loo_centered", "mean_of_prompt_values",
    "pair_outcomes", "pairwise_accuracy", "percentile_ci", "prompt_bootstrap", "prompt_only",
    "resample_weights", "residual_share", "share", "shift", "sibling_regression", "top_selection",
    "transplant",
]
