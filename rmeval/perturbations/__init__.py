"""Perturbation suite for the suitability audit (Reward Auditor): controlled prompt perturbations
and stylized response rewrites, each with a short code used in files, JSON and plots."""

from rmeval.perturbations.controlled import (
    CONTROLLED_CODES,
    PROMPT_PERTURBATIONS,
    RESPONSE_PERTURBATIONS,
    STYLE_INSTRUCTIONS,
    STYLIZED_CODES,
    ResponsePerturbation,
    item_seed,
    perturb_prompt,
    register_perturbation,
    register_response_perturbation,
)

__all__ = ["CONTROLLED_CODES", "PROMPT_PERTURBATIONS", "RESPONSE_PERTURBATIONS", "STYLIZED_CODES",
           "STYLE_INSTRUCTIONS", "ResponsePerturbation", "item_seed", "perturb_prompt", "register_perturbation",
           "register_response_perturbation"]
