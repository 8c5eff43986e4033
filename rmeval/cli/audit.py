"""``rmeval audit``: score checkpoints under prompt conditions and audit them (rmeval.audit.pipeline).

Under ``accelerate launch`` (or torchrun) the processes share the scoring (rmeval.scoring.run): the
main process merges their parts, computes the statistics and writes the report; ``--num-processes N``
starts that launch itself (N processes of this machine, one per GPU; CPU processes without GPUs)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rmcore.data.loading import load_data
from rmcore.io.files import check_path
from rmcore.runtime.checkpoints import find_checkpoints
from rmcore.settings.commands import add_command
from rmcore.settings.fields import nested, option
from rmeval.audit.settings import AuditSettings, check_audit_memory, rating_set_size
from rmeval.cli.flags import NUM_PROCESSES_HELP, ScoringCommand, dest, relaunch


@dataclass
class AuditCommand(ScoringCommand):
    """``rmeval audit``'s settings: the checkpoints, data and scorer (``ScoringCommand``) and the
    audit (``AuditSettings``: conditions, statistics, probes, judge profile, suitability step)."""

    audit: AuditSettings = nested(AuditSettings)
    num_processes: int = option(1, metavar="N", ge=1, help=NUM_PROCESSES_HELP)
    argv: list[str] = field(default_factory=list)  # the command line, run again by --num-processes

    def __post_init__(self) -> None:
        # flags two settings share: the scorer's batching is the judge profile's and the probes'
        # too, and --max-prompts samples the suitability step's own --suitability-data
        a = self.audit
        if a.judge is not None:
            a.judge.max_length, a.judge.batch_size = self.scorer.max_length, self.scorer.batch_size
        if a.features is not None:
            a.features.batch_size = self.scorer.batch_size
        if a.suitability is not None:
            a.suitability.max_prompts = self.max_prompts


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "audit", AuditCommand, run, help="score a checkpoint under prompt conditions and audit it")


def run(s: AuditCommand) -> int:
    # the pipeline (pandas, scipy) and the scorers' loaders (torch): --help loads no tables or models
    from rmeval.audit.pipeline import audit_checkpoint, audit_line, write_summary
    from rmeval.scoring.loaders import known_hub_ids
    from rmeval.scoring.run import Shard
    from rmeval.suitability.checkpoints import suitability_line

    checkpoints = find_checkpoints(s.checkpoint, known=known_hub_ids())
    if (rc := relaunch(s.num_processes, s.argv)) is not None:  # --num-processes: this command again, launched
        return rc
    shard = Shard.from_env()
    settings = s.audit
    for flag in ("related_file", "paraphrase_file", "reference_pool"):
        if getattr(settings, flag):
            check_path(getattr(settings, flag), "--" + flag.replace("_", "-"))
    settings.validate()  # --conditions against the registry, the suitability and probe settings
    rating_set = load_data(s.data, s.max_prompts, settings.stats.seed)
    check_audit_memory(settings.stats, *rating_set_size(rating_set))  # before any scoring
    if not rating_set.attributes and settings.attribute is None:
        print(f"--data {s.data}: no rated attribute (a preference set carries labels, not ratings): the "
              "human-referenced figures are left out, the model-side ones and pairwise accuracy remain",
              file=sys.stderr)
    s.scorer.placement.validate()
    single = len(checkpoints) == 1
    audits = {}
    for name, ckpt in checkpoints:
        out = dest(s.out, name, single)
        result = audit_checkpoint(ckpt, rating_set, s.scorer, settings, out, name=name, data=s.data, shard=shard,
                                  **s.wandb.target())
        if result is None:  # another process's share of the scoring; the main process reports
            continue
        audits[name] = result
        if "suitability" in audits[name]:
            print(suitability_line(Path(str(ckpt)).name, audits[name]["suitability"], out))
        print(audit_line(name, audits[name], out))
    if not single and shard.main:
        paths = write_summary(audits, s.out)
        print(f"comparison of {len(audits)} checkpoints -> {paths['markdown']}")
    return 0
