"""``rmtrain train``: train one arm (rmtrain.runs.train_run: the audit callback attached when the
recipe enables it)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rmcore.io.files import to_json
from rmcore.runtime.checkpoints import run_title
from rmcore.runtime.jobs import is_main_process
from rmcore.settings.commands import add_command, recipe_overrides
from rmcore.settings.fields import option, output_folder
from rmtrain.arms import ARMS
from rmtrain.cli.flags import RecipeCommand

SUMMARY_KEYS = ("arm", "seed", "model", "n_train_pairs", "heldout_pair_accuracy", "heldout_rmse", "score_sd",
                "status", "status_reason")


@dataclass(kw_only=True)
class TrainCommand(RecipeCommand):
    """``rmtrain train``'s settings: the recipe's flags and the recipe keys a run is named by."""

    arm: str | None = option(None, recipe_key="arm",
                             help=f"the arm to train: {', '.join(ARMS.names())} or one registered in code, see "
                                  "docs/extending.md (default: the recipe's arm)")
    seed: int | None = option(None, recipe_key="seed", ge=0, help="training seed (default: the recipe's seed)")
    model: str | None = option(None, recipe_key="model.name_or_path",
                               help="Hub id or local path of the base model")
    output_dir: str | None = option(None, flag="--out", deprecated=("--output-dir",), metavar="OUT",
                                    recipe_key="output_dir", parse=output_folder("--out"),
                                    help="run directory (default: the recipe's output_dir)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "train", TrainCommand, run, help="train one arm")


def run(s: TrainCommand) -> int:
    # torch, transformers: --help stays cheap
    from rmtrain.config import load_train_config
    from rmtrain.runs import train_run

    cfg = load_train_config(s.config, recipe_overrides(s))
    summary = train_run(cfg, force=s.force)
    # titled like the run's reports and the other commands' summary lines ("bt_margin seed 1")
    title = run_title(summary["arm"], summary["seed"])
    if is_main_process():  # under accelerate launch every process gets here: the result is printed once
        # a summary written before runs had a status was of a run that ended normally
        print(to_json({"title": title, **{k: summary.get(k, "ok" if k == "status" else None) for k in SUMMARY_KEYS}}))
    # a diverged or collapsed run is a result, never a silent success (training.on_divergence)
    return 1 if summary.get("status", "ok") != "ok" and cfg.training.on_divergence == "fail" else 0
