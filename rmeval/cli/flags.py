"""What several ``rmeval`` commands share: each command's settings are one dataclass whose fields
declare its flags (``rmcore.settings.fields``), registered by ``rmcore.settings.commands.add_command``; the pieces
held by several commands are declared here once.

``ScoringCommand`` is the part of every command that scores checkpoints (``audit``, ``pairwise``,
``suitability``): the checkpoints, the prompts, the output, the scorer (``rmeval.scoring.ScorerSettings``,
with the device flags of ``rmcore.models.device.Placement`` under "where the model runs") and where it
logs (``rmcore.runtime.wandb_log.WandbFlags``, as :func:`run_wandb` holds them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io.files import check_path
from rmcore.runtime.jobs import launch_command
from rmcore.runtime.wandb_log import DEFAULT_PROJECT, WandbFlags
from rmcore.settings.fields import nested, option, output_folder
from rmeval.scoring import ScorerSettings

DATA_HELP = "data SPEC (file, JSON, or name[:k=v,...])"


def wandb_flags() -> Any:
    """The W&B flags of a command that logs a run of its own: ``--wandb-mode`` and
    ``--wandb-project`` (default DEFAULT_PROJECT)."""
    return nested(WandbFlags, only=("wandb_mode", "wandb_project"))


def run_wandb() -> Any:
    """The W&B flags of a command that evaluates checkpoints or their tables: it logs beside the
    training run by default (its W&B project and group, ``rmeval.tracking``); either can be named."""
    return nested(WandbFlags, defaults={"wandb_project": None}, options={"wandb_project": {
        "help": f"W&B project (default: the training run's, for a checkpoint trained by rmtrain; else "
                f"{DEFAULT_PROJECT})"}})


@dataclass
class ScoringCommand:
    """The settings of every command that scores checkpoints on a data set."""

    checkpoint: str = option("", required=True, help="checkpoint dir, dir of checkpoints, or Hub id")
    data: str = option("", required=True, help=DATA_HELP)
    out: str = option("", required=True, parse=output_folder("--out"), help="output directory")
    max_prompts: int | None = option(None, ge=1, help="seeded sample of this many prompts")
    scorer: ScorerSettings = nested(ScorerSettings)
    wandb: WandbFlags = run_wandb()


def named_paths(items: list[str] | None, flag: str = "--compare-scores") -> dict[str, str]:
    """NAME=PATH arguments -> {NAME: PATH}, each path checked."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(f"{flag} takes NAME=FILE, got {item!r}")
        check_path(path, flag)
        out[name] = path
    return out


NUM_PROCESSES_HELP = ("share the scoring among N processes of this machine (one per GPU; CPU processes without "
                      "GPUs): the command starts itself under accelerate launch")


def relaunch(num_processes: int, argv: list[str]) -> int | None:
    """With ``--num-processes N > 1`` outside a launcher: the command line ``argv`` run as N
    processes under ``accelerate launch``, and its exit code; else None (carry on in this process)."""
    import os
    import subprocess

    n = num_processes
    if n < 1:
        raise ConfigError(f"--num-processes must be >= 1, got {n}")
    if n == 1 or int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        return None

    argv = list(argv)
    for i, a in enumerate(argv):  # the launched processes must not launch again
        if a == "--num-processes":
            del argv[i:i + 2]
            break
        if a.startswith("--num-processes="):
            del argv[i]
            break
    cmd, env = launch_command(n, ["rmeval.cli", *argv])
    return subprocess.call(cmd, env={**os.environ, **env})


def dest(out: str, name: str, single: bool) -> Path:
    """Where one of several checkpoints goes: OUT itself for one, OUT/<name>/ for several."""
    return Path(out) if single else Path(out) / name
