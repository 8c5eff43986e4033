"""``rmtrain filter-experiment``: raw against centred filtering of a training pool, DPO on each kept
set, the policies judged head to head and against the base (rmtrain.filtering), from a recipe."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rmcore.settings import add_options, option


@dataclass(kw_only=True)
class FilterExperimentCommand:
    """``rmtrain filter-experiment``'s settings: the flags of rmeval's experiment commands (``rmeval
    pool``, ``rmeval leaderboard``; rmeval.cli.experiments), whose helpers read them back."""

    config: str = option(required=True, help="the experiment's recipe (YAML)")
    out: str | None = option(None, help="output directory (default: the recipe's output_dir)")
    data: str | None = option(None, help="data SPEC in place of the recipe's data")
    max_prompts: int | None = option(None, help="seeded sample of this many prompts")
    overrides: list[str] = option(default_factory=list, flag="--set", nargs="+", metavar="KEY=VALUE",
                                  help="override recipe values, e.g. sampling.n=2")
    wandb_mode: str | None = option(None, choices=["online", "offline", "disabled"],
                                    help="default: online with an API key, else offline")
    wandb_project: str = option("matchrm", help="W&B project")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("filter-experiment", help="filter a training pool by raw and by centred reward, train DPO "
                                                 "on each kept set and judge the policies")
    add_options(p, FilterExperimentCommand)
    p.set_defaults(func=run, settings=FilterExperimentCommand)


def run(s: FilterExperimentCommand) -> int:
    from rmeval.cli.experiments import recipe_overrides
    from rmeval.cli.flags import wandb_target
    from rmeval.experiments.recipe import TOY_NOTICE
    from rmtrain.filtering import load_filtering_config, run_filter_experiment

    # rmeval's helpers read the same attributes from these settings as from its parsed flags
    args = argparse.Namespace(**vars(s))
    cfg = load_filtering_config(s.config, recipe_overrides(args))
    out = s.out or cfg.output_dir
    res = run_filter_experiment(cfg, out=out, **wandb_target(args))
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
