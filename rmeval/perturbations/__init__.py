"""Perturbation suite for the suitability audit (Reward Auditor): controlled prompt perturbations
and stylized response rewrites, each with a short code used in files, JSON and plots."""

from rmeval.perturbations.controlled import (
    CONTROLLED_CODES,
    PROMPT_PERTURBATIONS,
    STYLE_INSTRUCTIONS,
    STYLIZED_CODES,
    item_seed,
    perturb_prompt,
    register_perturbation,
)

__all__ = ["CONTROLLED_CODES", "PROMPT_PERTURBATIONS", "STYLIZED_CODES", "STYLE_INSTRUCTIONS", "item_seed",
           "perturb_prompt", "register_perturbation"]
