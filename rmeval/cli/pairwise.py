"""``rmeval pairwise``: accuracy of checkpoints on a preference set (rmeval.audit.pairwise)."""

from __future__ import annotations

import argparse

from rmeval.audit.pairwise import PairwiseSettings
from rmeval.cli.flags import (
    add_common,
    add_model,
    add_num_processes,
    dest,
    relaunch,
    scorer_settings,
    wandb_target,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    pw = sub.add_parser("pairwise", help="accuracy on a preference set (RM-Bench matrix, HH-RLHF)")
    add_model(pw)
    add_common(pw, audit=False)
    pw.add_argument("--ties", default="half", choices=["half", "wrong"],
                    help="a tied pair counts 0.5 (half) or 0 (wrong: RM-Bench's and RewardBench's rule)")
    add_num_processes(pw)
    pw.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmcore.checkpoints import display_name, find_checkpoints
    from rmcore.data.registry import load_data
    from rmeval.audit.pairwise import pairwise_checkpoint, pairwise_line, write_pairwise_summary
    from rmeval.scoring.loaders import known_hub_ids
    from rmeval.scoring.run import Shard

    checkpoints = find_checkpoints(args.checkpoint, known=known_hub_ids())
    if (rc := relaunch(args)) is not None:  # --num-processes: this command again, under accelerate launch
        return rc
    shard = Shard.from_env()
    rating_set = load_data(args.data, args.max_prompts, args.seed)
    settings = PairwiseSettings(n_boot=args.n_boot, seed=args.seed, ties=args.ties, cache=args.cache,
                                progress=not args.no_progress)
    scorer = scorer_settings(args)
    results = {}
    for name, ckpt in checkpoints:
        out = dest(args.out, name, len(checkpoints) == 1)
        result = pairwise_checkpoint(ckpt, rating_set, scorer, settings, out, name=name, data=args.data, shard=shard,
                                     **wandb_target(args))
        if result is None:  # another process's share of the scoring; the main process reports
            continue
        results[name] = result
        print(pairwise_line(display_name(name, ckpt), result, len(rating_set.preferences), out))
    if len(checkpoints) > 1 and shard.main:
        write_pairwise_summary(results, args.out)
    return 0
