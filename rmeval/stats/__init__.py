"""Statistics on scores tables, every effect with a prompt bootstrap: numpy, pandas, scipy and
scikit-learn (the probes' learners), never a model library (torch, transformers ...) nor the scoring
code; ``tests/test_layering.py`` holds the package to that.

The functions named here load with their module on first use (``rmeval.stats.share_pair``), so a
light module of the package -- ``rmeval.stats.settings``, the statistics' settings that the audit's
recipe blocks hold -- loads no scipy. ``share`` and ``transplant`` name their modules; import those
functions from them (``from rmeval.stats.share import share``)."""

from __future__ import annotations

from rmcore.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
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
})
