"""``rmtrain filter-experiment``: raw against centred filtering of a training pool, DPO on each kept
set, the policies judged head to head and against the base (rmtrain.filtering), from a recipe. Its
settings are rmeval's experiment commands' (``rmeval pool``, ``rmeval leaderboard``):
``rmeval.cli.experiments.ExperimentCommand``."""

from __future__ import annotations

import argparse

from rmcore.settings.commands import add_command, recipe_overrides
from rmeval.cli.experiments import ExperimentCommand
from rmeval.experiments.settings import TOY_NOTICE


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "filter-experiment", ExperimentCommand, run,
                help="filter a training pool by raw and by centred reward, train DPO on each kept set and judge the "
                     "policies")


def run(s: ExperimentCommand) -> int:
    # torch: --help stays cheap
    from rmtrain.filtering import load_filtering_config, run_filter_experiment

    cfg = load_filtering_config(s.config, recipe_overrides(s))
    out = s.out or cfg.output_dir
    res = run_filter_experiment(cfg, out=out, **s.wandb.target())
    if cfg.toy:
        print(TOY_NOTICE)
    f = res["filter"]
    print(f"filters: {f['n_kept']} of {f['n_pairs']} pairs kept; Jaccard raw vs centred {f['jaccard_raw_centred']:.2f}")
    for name, v in res["variants"].items():
        c = v["comparisons"]
        parts = [f"{k.replace('_vs_', ' vs ')} {c[k]['win_rate']['estimate']:.2f}" for k in
                 ("raw_vs_centred", "raw_vs_base", "centred_vs_base") if "win_rate" in c[k]]
        print(f"{name}: learning rate {v['learning_rate']:g}; " + ", ".join(parts) + f" (judge {v['judge']})")
    print(f"filter-experiment ({res['meta']['seconds']} s) -> {out}/filtering.md")
    return 0
