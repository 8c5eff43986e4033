"""``rmeval stats``: the audit's statistics recomputed from tables already written (rmeval.audit.pipeline)."""

from __future__ import annotations

import argparse

from rmeval.audit.pipeline import AuditSettings
from rmeval.cli.flags import add_common, reliabilities, wandb_target


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("stats", help="audit an existing scores table")
    s.add_argument("--scores", required=True)
    s.add_argument("--ratings", required=True)
    s.add_argument("--preferences", default=None)
    s.add_argument("--reference-scores", default=None,
                   help="table (prompt_id, score) of independent reference responses, for pool centring")
    s.add_argument("--human-reliability", nargs="+", default=None,
                   help="rater reliabilities NAME=R for the reliability-corrected human share")
    s.add_argument("--features", default=None,
                   help="folder of prompts.parquet and the feature tables (rmeval features); default: beside --scores")
    s.add_argument("--probe-learners", default=None, help="response probes' learners, comma-separated "
                   "(ridge,kernel_ridge,boosted_trees,mlp; default all)")
    s.add_argument("--compare-scores", nargs="+", default=None, metavar="NAME=FILE",
                   help="scores of the same texts scored another way (e.g. no_eos=DIR/scores.parquet)")
    add_common(s)
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmeval.audit.features import FeatureSettings
    from rmeval.audit.pipeline import audit_tables
    from rmeval.cli.flags import csv, named_paths

    features = FeatureSettings(learners=csv(args.probe_learners)) if args.probe_learners else None
    if features is not None:
        features.validate()
    from rmeval.stats.settings import StatsSettings

    settings = AuditSettings(stats=StatsSettings(n_boot=args.n_boot, n_boot_regression=args.n_boot_regression,
                                                 seed=args.seed, human_reliability=reliabilities(args.human_reliability)),
                             attribute=args.attribute, features=features)
    _, paths = audit_tables(args.scores, args.ratings, settings, args.out, preferences=args.preferences,
                            reference_scores=args.reference_scores, features=args.features,
                            compare=named_paths(args.compare_scores, "--compare-scores"), **wandb_target(args))
    print(f"audit -> {paths['markdown']}")
    return 0
