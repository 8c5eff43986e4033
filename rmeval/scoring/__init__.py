"""Scorer backends (sequence classifier, generative judge, DPO implicit reward) and a score cache.

``ScorerSettings`` says which backend scores a checkpoint and how it batches; ``load_scorer``
builds it. Every backend gets every batching setting, so a flag means the same for each."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmcore.device import Placement
from rmcore.errors import ConfigError
from rmeval.scoring.base import SCORERS, ScoreItem, Scorer, make_scorer, register_scorer

__all__ = ["SCORERS", "ScoreItem", "Scorer", "ScorerSettings", "load_scorer", "make_scorer", "register_scorer"]


@dataclass
class ScorerSettings:
    """How a saved model is scored: backend, model, and batching."""

    model: str = ""  # checkpoint directory or Hub id (the DPO policy for dpo_implicit)
    kind: str = "seq_classifier"  # seq_classifier | generative_judge | dpo_implicit
    reference: str | None = None  # the DPO reference model (dpo_implicit only)
    beta: float = 0.1  # DPO beta (dpo_implicit only)
    batch_size: int = 32
    max_length: int | None = None  # None: the model's own limit (also the ceiling)
    max_tokens: int | None = None  # cap on padded tokens per batch
    placement: Placement = field(default_factory=Placement)  # device, dtype, kernel, remote code, device map
    reward_head: str | None = None  # which output of a multi-output reward model (seq_classifier only)
    loader: str | None = None  # reward-model loader; None: chosen from the checkpoint (seq_classifier only)
    drop_special: tuple[str, ...] = ()  # markers left out of every input: bos and/or eos (seq_classifier only)


def load_scorer(settings: ScorerSettings) -> Scorer:
    """The scorer ``settings`` describe, its model loaded and placed."""
    settings.placement.validate()
    common = {"max_length": settings.max_length, "batch_size": settings.batch_size,
              "max_tokens": settings.max_tokens, "placement": settings.placement}
    if settings.kind != "seq_classifier" and (settings.reward_head is not None or settings.loader):
        raise ConfigError(f"--reward-head and --loader choose a reward model's output; --scorer {settings.kind} "
                          "reads a causal LM")
    if settings.drop_special:
        from rmcore.formatting import MARKERS

        bad = sorted(set(settings.drop_special) - set(MARKERS))
        if bad:
            raise ConfigError(f"--drop-special-tokens: unknown marker(s) {bad}; known: {', '.join(MARKERS)}")
        if settings.kind != "seq_classifier":
            raise ConfigError(f"--drop-special-tokens applies to --scorer seq_classifier, not {settings.kind}")
    if settings.kind == "seq_classifier":
        return make_scorer(settings.kind, model=settings.model, reward_head=settings.reward_head,
                           loader=settings.loader, drop_special=tuple(settings.drop_special), **common)
    if settings.kind == "generative_judge":
        return make_scorer(settings.kind, model=settings.model, **common)
    if settings.kind == "dpo_implicit":
        if not settings.reference:
            raise ConfigError("--scorer dpo_implicit needs --reference (the DPO reference model, or 'none' for "
                              "pi_ref = 1)")
        from rmcore.io import check_path

        if settings.reference.lower() != "none":
            check_path(settings.reference, "--reference", kind="dir", hub_ok=True)
        return make_scorer("dpo_implicit", policy=settings.model, reference=settings.reference, beta=settings.beta,
                           **common)
    raise ConfigError(f"unknown --scorer {settings.kind}")
