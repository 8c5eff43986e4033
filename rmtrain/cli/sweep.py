"""``rmtrain sweep``: the matched sweep of a recipe's ``sweep`` section (rmtrain.sweep.run_sweep)."""

from __future__ import annotations

import argparse

from rmtrain.cli.flags import add_common, overrides


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("sweep", help="the matched sweep of a recipe's 'sweep' section: search stage, seed "
                                     "stage, audits, summary.csv and report.md (resumable)")
    add_common(s)
    s.add_argument("--output-dir", help="sweep directory (default: the recipe's sweep.output_root)")
    s.add_argument("--dry-run", action="store_true", help="print the run matrix and launch commands, run nothing")
    s.add_argument("--executor", default="local", choices=["local", "slurm", "submitit-local"],
                   help="local: this machine; slurm: submitit job arrays (sweep.slurm in the recipe); "
                        "submitit-local: the same job arrays through submitit's local executor")
    s.add_argument("--max-parallel", type=int, help="local executor: runs at once (default sweep.max_parallel)")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmtrain.config import load_sweep
    from rmtrain.sweep import run_sweep

    sweep = load_sweep(args.config, overrides(args, output_key="sweep.output_root"))
    run_sweep(sweep, executor=args.executor, max_parallel=args.max_parallel, dry_run=args.dry_run, force=args.force)
    return 0
