"""``rmeval pairwise``: accuracy of checkpoints on a preference set (rmeval.audit.pairwise)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from rmcore.data.loading import load_data
from rmcore.runtime.checkpoints import display_name, find_checkpoints
from rmcore.settings.commands import add_command
from rmcore.settings.fields import nested, option
from rmeval.audit.settings import PairwiseSettings
from rmeval.cli.flags import NUM_PROCESSES_HELP, ScoringCommand, dest, relaunch
from rmeval.stats.bootstrap import check_memory


@dataclass
class PairwiseCommand(ScoringCommand):
    """``rmeval pairwise``'s settings: the checkpoints, data and scorer (``ScoringCommand``) and the
    accuracy's (``PairwiseSettings``)."""

    pairwise: PairwiseSettings = nested(PairwiseSettings)
    num_processes: int = option(1, metavar="N", ge=1, help=NUM_PROCESSES_HELP)
    argv: list[str] = field(default_factory=list)  # the command line, run again by --num-processes


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "pairwise", PairwiseCommand, run, help="accuracy on a preference set (RM-Bench matrix, HH-RLHF)")


def run(s: PairwiseCommand) -> int:
    # the pipeline (pandas) and the scorers' loaders (torch): --help loads no tables or models
    from rmeval.audit.pairwise import pairwise_checkpoint, pairwise_line, write_pairwise_summary
    from rmeval.scoring.loaders import known_hub_ids
    from rmeval.scoring.run import Shard

    checkpoints = find_checkpoints(s.checkpoint, known=known_hub_ids())
    if (rc := relaunch(s.num_processes, s.argv)) is not None:  # --num-processes: this command again, launched
        return rc
    shard = Shard.from_env()
    rating_set = load_data(s.data, s.max_prompts, s.pairwise.seed)
    k = len({q.prompt_id for q in rating_set.preferences})  # before any scoring: one (n_boot, k) resample matrix
    check_memory(8 * s.pairwise.n_boot * k, f"--n-boot {s.pairwise.n_boot} over {k} prompts")
    s.scorer.placement.validate()
    results = {}
    for name, ckpt in checkpoints:
        out = dest(s.out, name, len(checkpoints) == 1)
        result = pairwise_checkpoint(ckpt, rating_set, s.scorer, s.pairwise, out, name=name, data=s.data,
                                     shard=shard, **s.wandb.target())
        if result is None:  # another process's share of the scoring; the main process reports
            continue
        results[name] = result
        print(pairwise_line(display_name(name, ckpt), result, len(rating_set.preferences), out))
    if len(checkpoints) > 1 and shard.main:
        write_pairwise_summary(results, s.out)
    return 0
