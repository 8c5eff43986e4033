"""``rmeval stats``: the audit's statistics recomputed from tables already written (rmeval.audit.pipeline)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rmcore.io.files import check_path
from rmcore.runtime.wandb_log import WandbFlags
from rmcore.settings.commands import add_command
from rmcore.settings.fields import nested, option, output_folder
from rmeval.audit.settings import AuditSettings
from rmeval.cli.flags import named_paths, run_wandb


@dataclass
class StatsCommand:
    """``rmeval stats``' settings: the tables, the output, and the statistics (the part of
    ``AuditSettings`` that reads tables: the rated attribute, ``StatsSettings``, the probes' learners)."""

    scores: str = option("", required=True, help="scores table (rmeval audit's scores.parquet)")
    ratings: str = option("", required=True, help="ratings table (rmeval audit's ratings.parquet)")
    out: str = option("", required=True, parse=output_folder("--out"), help="output directory")
    preferences: str | None = option(None, help="preferences table (default: preferences.parquet beside --scores, "
                                                "when there)")
    reference_scores: str | None = option(None, help="table (prompt_id, score) of independent reference responses, "
                                                     "for pool centring")
    features: str | None = option(None, help="folder of prompts.parquet and the feature tables (rmeval features); "
                                             "default: beside --scores")
    # {name: scores file}, each file checked
    compare_scores: dict[str, str] = option(
        default_factory=dict, nargs="+", metavar="NAME=FILE", parse=named_paths,
        help="scores of the same texts scored another way (e.g. no_eos=DIR/scores.parquet)")
    audit: AuditSettings = nested(AuditSettings, only=("attribute", "stats", "features.learners"))
    wandb: WandbFlags = run_wandb()


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "stats", StatsCommand, run, help="audit an existing scores table")


def run(s: StatsCommand) -> int:
    if s.audit.features is not None:
        s.audit.features.validate()
    check_path(s.ratings, "ratings table")  # the table the pipeline reads first, named before it loads pandas
    # the pipeline (pandas, scipy): --help loads no tables
    from rmeval.audit.pipeline import audit_tables

    _, paths = audit_tables(s.scores, s.ratings, s.audit, s.out, preferences=s.preferences,
                            reference_scores=s.reference_scores, features=s.features, compare=s.compare_scores,
                            **s.wandb.target())
    print(f"audit -> {paths['markdown']}")
    return 0
