"""``rmeval pairwise``: accuracy of checkpoints on a preference set (rmeval.pairwise)."""

from __future__ import annotations

import argparse

from rmeval.cli.flags import add_common, add_model, dest, scorer_settings, wandb_target
from rmeval.pairwise import PairwiseSettings


def add_parser(sub: argparse._SubParsersAction) -> None:
    pw = sub.add_parser("pairwise", help="accuracy on a preference set (RM-Bench matrix, HH-RLHF)")
    add_model(pw)
    add_common(pw, audit=False)
    pw.add_argument("--ties", default="half", choices=["half", "wrong"],
                    help="a tied pair counts 0.5 (half) or 0 (wrong: RM-Bench's and RewardBench's rule)")
    pw.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmcore.checkpoints import display_name, find_checkpoints
    from rmcore.data.registry import load_data
    from rmeval.pairwise import pairwise_checkpoint, pairwise_line, write_pairwise_summary

    checkpoints = find_checkpoints(args.checkpoint)
    rating_set = load_data(args.data, args.max_prompts, args.seed)
    settings = PairwiseSettings(n_boot=args.n_boot, seed=args.seed, ties=args.ties, cache=args.cache,
                                progress=not args.no_progress)
    scorer = scorer_settings(args)
    results = {}
    for name, ckpt in checkpoints:
        out = dest(args.out, name, len(checkpoints) == 1)
        results[name] = pairwise_checkpoint(ckpt, rating_set, scorer, settings, out, name=name, data=args.data,
                                            **wandb_target(args))
        print(pairwise_line(display_name(name, ckpt), results[name], len(rating_set.preferences), out))
    if len(checkpoints) > 1:
        write_pairwise_summary(results, args.out)
    return 0
