"""Scorer backends (sequence classifier, generative judge, DPO implicit reward) and a score cache.

``ScorerSettings`` says which backend scores a checkpoint and how it batches (``--scorer`` offers
the names of the ``SCORERS`` registry, a plugin's included); ``load_scorer`` builds it. Every
backend gets every batching setting, so a flag means the same for each."""

from __future__ import annotations

from dataclasses import dataclass

from rmcore.errors import ConfigError
from rmcore.models.device import PLACEMENT_GROUP, Placement
from rmcore.settings.fields import comma_list, nested, option
from rmeval.scoring.base import SCORERS, ScoreItem, Scorer, make_scorer, register_scorer, scorer_factory

__all__ = ["SCORERS", "ScoreItem", "Scorer", "ScorerSettings", "load_scorer", "make_scorer", "register_scorer"]


def _markers(text: str) -> tuple[str, ...]:
    return tuple(comma_list(text))


@dataclass
class ScorerSettings:
    """How a saved model is scored: backend, model, and batching (the flags of every command that
    scores a checkpoint)."""

    model: str = ""  # checkpoint directory or Hub id (the DPO policy for dpo_implicit): the command's --checkpoint
    kind: str = option("seq_classifier", flag="--scorer", choices=SCORERS.names,
                       help="a sequence classifier's reward, a generative judge's verdict, or a DPO policy's implicit "
                            "reward")
    reference: str | None = option(None, help="DPO reference model (dpo_implicit)", needs=("--scorer", "dpo_implicit"))
    beta: float = option(0.1, gt=0, help="DPO beta (dpo_implicit)", needs=("--scorer", "dpo_implicit"))
    batch_size: int = option(32, ge=1, help="texts per forward")
    # None: the length the checkpoint was trained with (rmtrain's run config), else the model's own
    # limit (which is also the ceiling)
    max_length: int | None = option(None, ge=1, help="tokens per text (default: the length the checkpoint was "
                                    "trained with, else the model's own limit, which is also the ceiling)")
    max_tokens: int | None = option(None, ge=1, help="cap on padded tokens per batch")
    # device, dtype, kernel, remote code, device map
    placement: Placement = nested(Placement, group=PLACEMENT_GROUP)
    # which output of a multi-output reward model (seq_classifier only)
    reward_head: str | None = option(
        None, metavar="HEAD", help="which output of a multi-output reward model is the reward: an index or label name "
        "of a classifier's outputs, or an attribute of a multi-head model (default: its one output, or its own gated "
        "score)")
    # reward-model loader; None: chosen from the checkpoint (seq_classifier only)
    loader: str | None = option(None, metavar="NAME", help="reward-model loader (default: chosen by the checkpoint's "
                                "architecture or name; see docs/audit.md, 'Released reward models')")
    # markers left out of every input: bos and/or eos (seq_classifier only)
    drop_special: tuple[str, ...] = option((), flag="--drop-special-tokens", metavar="bos,eos", parse=_markers,
                                           help="score without the begin- and/or end-of-sequence markers "
                                                "(seq_classifier)")


def load_scorer(settings: ScorerSettings) -> Scorer:
    """The scorer ``settings`` describe, its model loaded and placed: the registered scorer
    ``settings.kind`` (``SCORERS``) built from them (``Scorer.from_settings``; a plain callable gets
    the model and the batching settings), after refusing the settings it does not read."""
    settings.placement.validate()
    # rmcore.runtime.checkpoints: the training length by default; a requested one that differs is said once
    from rmcore.runtime.checkpoints import scoring_max_length

    common = {"max_length": scoring_max_length(settings.model, settings.max_length), "batch_size": settings.batch_size,
              "max_tokens": settings.max_tokens, "placement": settings.placement}
    factory = scorer_factory(settings.kind)
    reads = getattr(factory, "reads", frozenset())
    if (settings.reward_head is not None or settings.loader) and not {"reward_head", "loader"} <= reads:
        raise ConfigError(f"--reward-head and --loader choose a reward model's output; --scorer {settings.kind} "
                          "reads a causal LM")
    if settings.drop_special:
        # torch: --help stays cheap
        from rmcore.models.formatting import MARKERS

        bad = sorted(set(settings.drop_special) - set(MARKERS))
        if bad:
            raise ConfigError(f"--drop-special-tokens: unknown marker(s) {bad}; known: {', '.join(MARKERS)}")
        if "drop_special" not in reads:
            readers = [k for k in SCORERS if "drop_special" in getattr(scorer_factory(k), "reads", ())]
            raise ConfigError(f"--drop-special-tokens applies to --scorer {' or '.join(readers)}, not {settings.kind}")
    build = getattr(factory, "from_settings", None)
    return build(settings, **common) if build is not None else factory(model=settings.model, **common)
