"""``rmeval suitability`` (checkpoints under perturbations: inference and risk report) and
``rmeval suitability-stats`` (the inference alone on precomputed confidences); the library is
rmeval.suitability.checkpoints, the settings ``rmeval.suitability.settings.SuitabilityAuditSettings``
(``rmeval audit --suitability`` holds the same, through ``AuditSettings``)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from rmcore.data.loading import load_data
from rmcore.errors import ConfigError
from rmcore.io.files import check_path
from rmcore.runtime.checkpoints import find_checkpoints
from rmcore.runtime.wandb_log import WandbFlags
from rmcore.settings.commands import add_command
from rmcore.settings.fields import nested, option, output_folder
from rmeval.audit.settings import AuditSettings
from rmeval.cli.flags import ScoringCommand, dest, wandb_flags
from rmeval.suitability.settings import INFERENCE, SuitabilityAuditSettings

# The flags rmeval suitability shares with rmeval audit (its AuditSettings'): the seed, the rated
# attribute, the score cache and --no-progress; not the resamples (no bootstrap here: a flag that
# changed nothing would mislead). suitability-stats takes the seed alone (its pairs need no rated
# attribute).
SHARED_WITH_AUDIT = ("attribute", "stats.seed")
MODEL_FLAGS = tuple(f.name for f in dataclasses.fields(SuitabilityAuditSettings) if f.name not in ("data", "groups"))


@dataclass
class SuitabilityCommand(ScoringCommand):
    """``rmeval suitability``'s settings: the checkpoints, data and scorer (``ScoringCommand``), the
    suitability audit's perturbations, rewriting and inference, and the flags shared with rmeval audit."""

    max_prompts: int | None = option(None, ge=1, help="seeded sample of this many prompts, drawn before the preference "
                                                "items are built (--max-items then keeps the first N items)")
    suitability: SuitabilityAuditSettings = nested(SuitabilityAuditSettings, only=MODEL_FLAGS)
    common: AuditSettings = nested(AuditSettings, only=(*SHARED_WITH_AUDIT, "cache", "progress"))

    def __post_init__(self) -> None:
        self.suitability.max_prompts = self.max_prompts  # --max-prompts samples the perturbed prompts


@dataclass
class SuitabilityStatsCommand:
    """``rmeval suitability-stats``'s settings: the pairs table and the inference's settings."""

    pairs: str = option("", required=True, help="jsonl/csv/parquet rows item_id, perturbation, m_original, "
                                                "m_perturbed [, model, changed]")
    out: str = option("", required=True, parse=output_folder("--out"), help="output directory")
    suitability: SuitabilityAuditSettings = nested(SuitabilityAuditSettings, only=(*INFERENCE, "groups"))
    common: AuditSettings = nested(AuditSettings, only=("stats.seed",))
    wandb: WandbFlags = wandb_flags()


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "suitability", SuitabilityCommand, run,
                help="confidence drop under perturbations: inference and risk report")
    add_command(sub, "suitability-stats", SuitabilityStatsCommand, run_stats,
                help="suitability inference on precomputed confidences")


def run(s: SuitabilityCommand) -> int:
    # the pipeline (pandas, scipy) and the scorers' loaders (torch): --help loads no tables or models
    from rmeval.scoring.loaders import known_hub_ids
    from rmeval.suitability.checkpoints import audit_checkpoints, suitability_line

    seed = s.common.stats.seed  # the numeric flags were checked against their ranges as they were read
    s.suitability.inference(seed)  # validates every setting now: bad flags fail before anything loads
    checkpoints = find_checkpoints(s.checkpoint, known=known_hub_ids())
    if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        raise ConfigError("rmeval suitability scores in one process; run it without accelerate launch (rmeval audit "
                          "and rmeval pairwise share their scoring among processes)")
    rating_set = load_data(s.data, s.max_prompts, seed)
    s.scorer.placement.validate()
    results, joint = audit_checkpoints(checkpoints, rating_set, s.scorer, s.suitability, s.out, seed=seed,
                                       attribute=s.common.attribute, data=s.data, cache=s.common.cache,
                                       progress=s.common.progress, **s.wandb.target())
    for name, res in results.items():
        print(suitability_line(name, res, dest(s.out, name, joint is None)))
    if joint is not None:
        print(f"suitability of {len(results)} checkpoints -> {joint['markdown']}")
    return 0


def run_stats(s: SuitabilityStatsCommand) -> int:
    check_path(s.pairs, "--pairs")  # first: a missing table is named before the settings' check loads torch
    # the pipeline (pandas, scipy): --help loads no tables
    from rmeval.suitability.checkpoints import suitability_from_pairs

    settings = s.suitability.inference(s.common.stats.seed)
    results, paths = suitability_from_pairs(s.pairs, settings, Path(s.out), groups=s.suitability.groups,
                                            **s.wandb.target())
    n_codes = len({code for r in results.values() for code in r["perturbations"]})
    print(f"suitability of {len(results)} model(s), {n_codes} perturbations -> {paths['markdown']}")
    return 0
