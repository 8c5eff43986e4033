"""``rmtrain sweep``: the matched sweep of a recipe's ``sweep`` section (rmtrain.sweep.run_sweep)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from rmcore.settings.commands import add_command, recipe_overrides
from rmcore.settings.fields import option, output_folder
from rmtrain.cli.flags import RecipeCommand


@dataclass(kw_only=True)
class SweepCommand(RecipeCommand):
    """``rmtrain sweep``'s settings."""

    output_dir: str | None = option(None, flag="--out", deprecated=("--output-dir",), metavar="OUT",
                                    recipe_key="sweep.output_root", parse=output_folder("--out"),
                                    help="sweep directory (default: the recipe's sweep.output_root)")
    dry_run: bool = option(False, help="print the run matrix and launch commands, run nothing")
    executor: str = option("local", choices=["local", "slurm", "submitit-local"],
                           help="local: this machine; slurm: submitit job arrays (sweep.slurm in the recipe); "
                                "submitit-local: the same job arrays through submitit's local executor")
    max_parallel: int | None = option(None, ge=1, help="local executor: runs at once (default sweep.max_parallel)")
    force: bool = option(False, help="rerun every run of the sweep, finished ones too (default: resume)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "sweep", SweepCommand, run, help="the matched sweep of a recipe's 'sweep' section: search stage, "
                                                      "seed stage, audits, summary.csv and report.md (resumable)")


def run(s: SweepCommand) -> int:
    # torch: --help stays cheap
    from rmtrain.config import load_sweep
    from rmtrain.sweep import run_sweep

    sweep = load_sweep(s.config, recipe_overrides(s))
    res = run_sweep(sweep, executor=s.executor, max_parallel=s.max_parallel, dry_run=s.dry_run, force=s.force)
    lost = res.get("unusable_final", [])
    # a final run lost to divergence or collapse leaves the comparison short: a result, never a silent
    # success (training.on_divergence); a search run that diverges is what a grid is for and counts not
    if lost and sweep.run_config(sweep.models[0], sweep.settings.arms[0], sweep.settings.seeds[0]
                                 ).training.on_divergence == "fail":
        print(f"rmtrain: {len(lost)} final run(s) diverged or collapsed ({', '.join(lost)}): see report.md; "
              "training.on_divergence=record exits 0", file=sys.stderr)
        return 1
    return 0
