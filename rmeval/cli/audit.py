"""``rmeval audit``: score checkpoints under prompt conditions and audit them (rmeval.audit.pipeline).

Under ``accelerate launch`` (or torchrun) the processes share the scoring (rmeval.scoring.run): the
main process merges their parts, computes the statistics and writes the report; ``--num-processes N``
starts that launch itself (N processes of this machine, one per GPU; CPU processes without GPUs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rmeval.audit.pipeline import AuditSettings, JudgeProfileSettings, resolve_conditions
from rmeval.cli.features import add_probe_flags, probe_settings
from rmeval.cli.flags import (
    add_common,
    add_model,
    add_num_processes,
    dest,
    relaunch,
    reliabilities,
    scorer_settings,
    wandb_target,
)
from rmeval.cli.suitability import add_audit_suitability, suitability_settings
from rmeval.stats.settings import StatsSettings


def add_parser(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("audit", help="score a checkpoint under prompt conditions and audit it")
    add_model(a)
    add_common(a)
    a.add_argument("--conditions", nargs="+", default=None, help="default: all with their inputs at hand")
    a.add_argument("--related-file", default=None, help="jsonl {prompt_id, variant, text} of related tasks")
    a.add_argument("--paraphrase-file", default=None, help="jsonl {prompt_id, variant, text} of paraphrases")
    a.add_argument("--n-donors", type=int, default=4, help="donor prompts per transplant condition")
    a.add_argument("--embedder", default=None, help="sentence encoder for the embedding condition")
    a.add_argument("--judge-items", default=None,
                   help="items table: also profile the checkpoint as a pairwise judge (rmeval judges)")
    a.add_argument("--judge-attributes", default="core", help="attributes for --judge-items (comma-separated)")
    a.add_argument("--human-reliability", nargs="+", default=None,
                   help="rater reliabilities NAME=R for the reliability-corrected human share")
    a.add_argument("--reference-pool", default=None,
                   help="reference pool table (rmeval pool's pool.parquet), scored by the checkpoint for pool centring")
    add_probe_flags(a)
    add_audit_suitability(a)
    add_num_processes(a)
    a.set_defaults(func=run)


def audit_settings(args: argparse.Namespace) -> AuditSettings:
    """The audit the flags ask for; --conditions checked against the registry."""
    judge = None
    if args.judge_items:
        judge = JudgeProfileSettings(items=args.judge_items, attributes=args.judge_attributes.split(","),
                                     max_length=args.max_length, batch_size=args.batch_size)
    suit = None
    if args.suitability is not None:
        suit = suitability_settings(args, args.suitability)
        suit.inference(args.seed)  # bad inference settings fail now, not after the scoring
    return AuditSettings(
        conditions=resolve_conditions(args.conditions, related_file=args.related_file,
                                      paraphrase_file=args.paraphrase_file),
        stats=StatsSettings(n_boot=args.n_boot, n_boot_regression=args.n_boot_regression, seed=args.seed,
                            human_reliability=reliabilities(args.human_reliability)), attribute=args.attribute,
        n_donors=args.n_donors, related_file=args.related_file, paraphrase_file=args.paraphrase_file,
        embedder=args.embedder,
        features=probe_settings(args), judge=judge,
        suitability=suit, cache=args.cache, progress=not args.no_progress, reference_pool=args.reference_pool)


def run(args: argparse.Namespace) -> int:
    from rmcore.checkpoints import find_checkpoints
    from rmcore.data.registry import load_data
    from rmcore.io import check_path
    from rmeval.audit.pipeline import audit_checkpoint, audit_line, write_summary
    from rmeval.scoring.loaders import known_hub_ids
    from rmeval.scoring.run import Shard
    from rmeval.suitability.checkpoints import suitability_line

    checkpoints = find_checkpoints(args.checkpoint, known=known_hub_ids())
    if (rc := relaunch(args)) is not None:  # --num-processes: this command again, under accelerate launch
        return rc
    shard = Shard.from_env()
    for flag in ("related_file", "paraphrase_file", "reference_pool"):
        if getattr(args, flag):
            check_path(getattr(args, flag), "--" + flag.replace("_", "-"))
    settings = audit_settings(args)
    rating_set = load_data(args.data, args.max_prompts, args.seed)
    if not rating_set.attributes and args.attribute is None:
        print(f"--data {args.data}: no rated attribute (a preference set carries labels, not ratings): the "
              "human-referenced figures are left out, the model-side ones and pairwise accuracy remain",
              file=sys.stderr)
    scorer = scorer_settings(args)
    single = len(checkpoints) == 1
    audits = {}
    for name, ckpt in checkpoints:
        out = dest(args.out, name, single)
        result = audit_checkpoint(ckpt, rating_set, scorer, settings, out, name=name, data=args.data, shard=shard,
                                  **wandb_target(args))
        if result is None:  # another process's share of the scoring; the main process reports
            continue
        audits[name] = result
        if "suitability" in audits[name]:
            print(suitability_line(Path(str(ckpt)).name, audits[name]["suitability"], out))
        print(audit_line(name, audits[name], out))
    if not single and shard.main:
        paths = write_summary(audits, args.out)
        print(f"comparison of {len(audits)} checkpoints -> {paths['markdown']}")
    return 0
