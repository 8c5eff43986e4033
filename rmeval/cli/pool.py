"""``rmeval pool``: generate and score an independent reference pool (rmeval.experiments.pool) from a recipe."""

from __future__ import annotations

import argparse

from rmcore.console.quiet import quiet_libraries
from rmcore.settings.commands import add_command, recipe_overrides
from rmeval.cli.experiments import ExperimentCommand
from rmeval.experiments.settings import TOY_NOTICE, load_pool_config


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "pool", ExperimentCommand, run,
                help="generate k responses per prompt from policies and score them (reference pool)")


def run(s: ExperimentCommand) -> int:
    # the experiment (pandas, scipy): --help loads no tables
    from rmeval.experiments.pool import build_pool

    quiet_libraries()
    cfg = load_pool_config(s.config, recipe_overrides(s))
    out = s.out or cfg.output_dir
    res = build_pool(cfg, out=out, **s.wandb.target())
    if cfg.toy:
        print(TOY_NOTICE)
    capped = sum(v["n_capped"] for v in res["by_policy"].values())
    print(f"pool: {res['n_responses']} responses to {res['n_prompts']} prompts ({len(res['by_policy'])} policies x "
          f"{cfg.sampling.n}; {capped} stopped at the cap), {len(res['reward_models'])} reward models "
          f"({res['meta']['seconds']} s) -> {out}/pool.md")
    return 0
