"""Suitability audit (Reward Auditor): confidence of a reward model on original vs perturbed pairs,
the inference of ``rmeval.stats.confidence_drop`` per perturbation, and the risk report; one module per
job: ``scoring`` (confidences, and whether the scorer sees a perturbation), ``tables`` (the pairs
table), ``run`` (inference and orchestration), ``report`` (Markdown, figures, W&B).

Metric M per (prompt, chosen, rejected) item (``SuitabilitySettings.metric``):
- ``log_confidence`` (default; Reward Auditor's released code): log σ(r_chosen − r_rejected) for a
  sequence classifier and a DPO model (implicit rewards), the log of the judge's averaged verdict
  probability for a generative judge;
- ``confidence``: σ(r_chosen − r_rejected), and for a judge the probability of the correct verdict
  averaged over both presentation orders, M = ½·[σ(s(chosen, rejected)) + σ(−s(rejected, chosen))]
  with s the verdict log-odds (``rmeval.scoring.pairwise_judge``).
Every text goes through the score cache, so an original pair shared by several perturbations (and
by a rerun) is scored once.

Pairs table (what ``rmeval suitability`` writes and ``rmeval suitability-stats`` reads): one row per
(item, perturbation): ``item_id, perturbation, m_original, m_perturbed``, the log confidences
``log_m_original, log_m_perturbed``, ``changed`` (the scorer's input changed; an unchanged twin is a
ΔM of 0), ``text_changed``, and ``subset`` when the items come from named subsets (RM-Bench files,
Reward Auditor tasks); a panel's table adds ``model``. Pairwise accuracy is 1{σ > ½} (½ at σ = ½),
on the original items and on the perturbed set (an unchanged twin keeps its original's).

The names below load with their module on first use, so the settings (``settings``: what the
recipes' audit blocks hold) load without the inference and its scipy.
"""

from __future__ import annotations

from rmcore.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "report": ("log_suitability", "plot_effects", "plot_structure", "plot_subsets", "render_markdown",
               "write_suitability"),
    "run": ("METRICS", "RECORD_KEYS", "SuitabilitySettings", "finalize", "infer", "model_json", "ordered_record",
            "run_suitability", "settings_dict"),
    "scoring": ("confidence_scorer", "confidences", "input_changed", "pair_metrics", "score_suite", "suite_counts"),
    "settings": ("parse_groups",),
    "tables": ("LOG_COLUMNS", "PAIR_COLUMNS", "read_pairs", "validate_pairs"),
})
