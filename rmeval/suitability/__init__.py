"""Suitability audit (Reward Auditor): confidence of a reward model on original vs perturbed pairs,
the inference of ``rmeval.stats.suitability`` per perturbation, and the risk report; one module per
job: ``scoring`` (confidences), ``tables`` (the pairs table), ``run`` (inference and orchestration),
``report`` (Markdown, plot, W&B).

Confidence M per (prompt, chosen, rejected) item:
- sequence classifier and DPO implicit reward: M = σ(r_chosen − r_rejected);
- generative judge: the probability of the correct verdict averaged over both presentation orders,
  M = ½·[p_A(chosen, rejected) + 1 − p_A(rejected, chosen)] (``rmeval.scoring.pairwise_judge``).
Every text goes through the score cache, so an original pair shared by several perturbations (and
by a rerun) is scored once.

Pairs table (what ``rmeval suitability`` writes and ``rmeval suitability-stats`` reads): one row per
(item, perturbation): ``item_id, perturbation, m_original, m_perturbed`` and optionally ``model`` (a
panel of models) and ``changed`` (rows with ``changed`` false are counted, not tested: a twin
identical to its original is no observation of the perturbation). Pairwise accuracy is
1{M > ½} (½ for M = ½), on the original and on the perturbed items.
"""

from rmeval.suitability.report import log_suitability, plot_effects, render_markdown, write_suitability
from rmeval.suitability.run import (
    RECORD_KEYS,
    SuitabilitySettings,
    finalize,
    infer,
    model_json,
    ordered_record,
    run_suitability,
    settings_dict,
)
from rmeval.suitability.scoring import confidence_scorer, confidences, score_suite, suite_counts
from rmeval.suitability.tables import PAIR_COLUMNS, parse_groups, read_pairs, validate_pairs

__all__ = ["PAIR_COLUMNS", "RECORD_KEYS", "SuitabilitySettings", "confidence_scorer", "confidences", "finalize",
           "infer", "log_suitability", "model_json", "ordered_record", "parse_groups", "plot_effects", "read_pairs",
           "render_markdown", "run_suitability", "score_suite", "settings_dict", "suite_counts", "validate_pairs",
           "write_suitability"]
