"""``rmtrain train``: train one arm (rmtrain.runs.train_run: the audit callback attached when the
recipe enables it)."""

from __future__ import annotations

import argparse
import json

from rmtrain.cli.flags import add_common, overrides

SUMMARY_KEYS = ("arm", "seed", "model", "n_train_pairs", "heldout_pair_accuracy", "heldout_rmse", "score_sd")


def add_parser(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("train", help="train one arm")
    add_common(t)
    t.add_argument("--arm")
    t.add_argument("--seed", type=int)
    t.add_argument("--model", help="Hub id or local path of the base model")
    t.add_argument("--output-dir")
    t.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmtrain.config import load_train_config
    from rmtrain.runs import train_run

    summary = train_run(load_train_config(args.config, overrides(args)), force=args.force)
    print(json.dumps({k: summary[k] for k in SUMMARY_KEYS}, indent=2))
    return 0
