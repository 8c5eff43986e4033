"""``rmeval leaderboard``: policies ranked by reward models under unequal prompt coverage, raw and
centred, against a judge's ranking (rmeval.experiments.leaderboard), from a recipe."""

from __future__ import annotations

import argparse

from rmcore.console.quiet import quiet_libraries
from rmcore.settings.commands import add_command, recipe_overrides
from rmeval.cli.experiments import ExperimentCommand
from rmeval.experiments.settings import TOY_NOTICE, load_leaderboard_config


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "leaderboard", ExperimentCommand, run,
                help="rank policies under unequal prompt coverage, raw and centred, against a judge")


def run(s: ExperimentCommand) -> int:
    # the experiment (pandas, scipy): --help loads no tables
    from rmeval.experiments.leaderboard import run_leaderboard

    quiet_libraries()
    cfg = load_leaderboard_config(s.config, recipe_overrides(s))
    out = s.out or cfg.output_dir
    res = run_leaderboard(cfg, out=out, **s.wandb.target())
    if cfg.toy:
        print(TOY_NOTICE)
    for rm, by_j in res["reward_models"].items():
        j, r = next(iter(by_j.items()))
        print(f"{rm} vs {j}: tau raw {r['raw']['mean_tau_vs_judge']['estimate']:.2f}, centred "
              f"{r['centred']['mean_tau_vs_judge']['estimate']:.2f} (difference "
              f"{r['centred_minus_raw_tau_vs_judge']['estimate']:+.2f}); raw ranking differs from full coverage in "
              f"{r['raw']['n_assignments_differing_from_full_coverage']} of {r['n_assignments']} assignments")
    print(f"leaderboard: {len(res['policies'])} policies, {res['meta']['n_prompts']} prompts "
          f"({res['meta']['seconds']} s) -> {out}/leaderboard.md")
    return 0
