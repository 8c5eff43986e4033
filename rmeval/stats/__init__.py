"""Statistics on scores tables: numpy/scipy only (no torch), every effect with a prompt bootstrap.

The functions named here load with their module on first use (``rmeval.stats.share_pair``), so a
light module of the package -- ``rmeval.stats.settings``, the statistics' settings that the audit's
recipe blocks hold -- loads no scipy. ``share`` and ``transplant`` name their modules; import those
functions from them (``from rmeval.stats.share import share``)."""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "bootstrap": ("PromptSetResamples", "mean_of_prompt_values", "percentile_ci", "prompt_bootstrap",
                  "resample_weights"),
    "centering": ("centering_variants", "weighted_spearman"),
    "pairwise": ("accuracy_matrix", "hard_normal_easy", "pair_outcomes", "pairwise_accuracy"),
    "prompt_means": ("disjoint_half_correlation", "loo_correlation", "prompt_mean_correlation",
                     "prompt_split_difference"),
    "regression": ("sibling_regression",),
    "reliability": ("corrected_share", "rater_reliability", "spearman_brown"),
    "selection": ("loo_centered", "top_selection"),
    "share": ("icc1", "residual_share", "share_pair"),
    "transplant": ("prompt_only", "shift"),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value
