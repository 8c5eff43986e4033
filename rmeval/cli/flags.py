"""What several ``rmeval`` commands share: each command's settings are one dataclass whose fields
declare its flags (``rmcore.settings``), registered by ``add_command``; the pieces held by several
commands are declared here once.

``ScoringCommand`` is the part of every command that scores checkpoints (``audit``, ``pairwise``,
``suitability``): the checkpoints, the prompts, the output, the scorer (``rmeval.scoring.ScorerSettings``,
with the device flags of ``rmcore.device.Placement`` under "where the model runs") and where it
logs (``WandbFlags``)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rmcore.device import DTYPES, Placement
from rmcore.errors import ConfigError
from rmcore.settings import add_options, from_args, nested, option
from rmeval.scoring import ScorerSettings
from rmeval.stats.settings import parse_reliabilities

T = TypeVar("T")

DATA_HELP = "data SPEC (file, JSON, or name[:k=v,...])"


def add_command(sub: argparse._SubParsersAction, name: str, settings: type[T], run: Callable[[T], int | None],
                **parser: Any) -> argparse.ArgumentParser:
    """Subcommand ``name``: its flags are the fields of ``settings``, and ``run`` takes them back as
    a ``settings`` object (``settings`` is the parser's default too, for the flag test)."""
    p = sub.add_parser(name, **parser)
    add_options(p, settings)
    p.set_defaults(func=lambda args: run(read_settings(settings, args)), settings=settings)
    return p


def read_settings(cls: type[T], args: argparse.Namespace) -> T:
    """``cls`` from the parsed flags; a command that runs itself again (``--num-processes``) gets
    its command line as ``argv``."""
    given = {"argv": args.argv} if "argv" in {f.name for f in dataclasses.fields(cls)} else {}  # type: ignore[arg-type]
    return from_args(cls, args, **given)


@dataclass
class WandbFlags:
    """Where a command logs its figures (``rmcore.tracking``)."""

    wandb_mode: str | None = option(None, choices=["online", "offline", "disabled"],
                                    help="default: online with an API key, else offline")
    wandb_project: str = option("matchrm", help="W&B project")

    def target(self) -> dict[str, Any]:
        """The keywords the library's logging functions take."""
        return dataclasses.asdict(self)


@dataclass
class ScoringCommand:
    """The settings of every command that scores checkpoints on a data set."""

    checkpoint: str = option("", required=True, help="checkpoint dir, dir of checkpoints, or Hub id")
    data: str = option("", required=True, help=DATA_HELP)
    out: str = option("", required=True, help="output directory")
    max_prompts: int | None = option(None, help="seeded sample of this many prompts")
    scorer: ScorerSettings = nested(ScorerSettings)
    wandb: WandbFlags = nested(WandbFlags)


def wandb_target(settings: Any) -> dict[str, Any]:
    """``--wandb-project`` and ``--wandb-mode`` as the keywords the library takes: of a command's
    settings (its ``wandb``), or of a namespace parsed with ``rmeval.cli.experiments.add_experiment_flags``
    (``rmtrain filter-experiment``)."""
    if isinstance(settings, argparse.Namespace) and hasattr(settings, "wandb_project"):  # hand-written flags
        return {"wandb_project": settings.wandb_project, "wandb_mode": settings.wandb_mode}
    if isinstance(settings, argparse.Namespace):
        settings = from_args(WandbFlags, settings, prefix="wandb.")
    return (settings if isinstance(settings, WandbFlags) else settings.wandb).target()


def named_paths(items: list[str] | None, flag: str = "--compare-scores") -> dict[str, str]:
    """NAME=PATH arguments -> {NAME: PATH}, each path checked."""
    from rmcore.io import check_path

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


def relaunch(num_processes: int | argparse.Namespace, argv: list[str] | None = None) -> int | None:
    """With ``--num-processes N > 1`` outside a launcher: the command line ``argv`` run as N
    processes under ``accelerate launch``, and its exit code; else None (carry on in this process)."""
    import os
    import subprocess

    if isinstance(num_processes, argparse.Namespace):  # a command whose flags are hand-written
        num_processes, argv = getattr(num_processes, "num_processes", 1), num_processes.argv
    n = num_processes
    if n < 1:
        raise ConfigError(f"--num-processes must be >= 1, got {n}")
    if n == 1 or int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        return None
    from rmcore.jobs import launch_command

    argv = list(argv or [])
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


# -- the hand-written flags of the commands whose settings do not declare them yet (each goes once
# no command uses it) --------------------------------------------------------------------------

def add_common(p: argparse.ArgumentParser, audit: bool = True) -> None:
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples over prompts")
    if audit:  # pairwise accuracy reads no rating and fits no regression
        p.add_argument("--n-boot-regression", type=int, default=5000, help="resamples for the sibling regression")
        p.add_argument("--attribute", default=None, help="rated attribute (default helpfulness, else the first)")
    p.add_argument("--seed", type=int, default=0)
    add_wandb(p)


def add_wandb(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wandb-mode", default=None, choices=["online", "offline", "disabled"],
                   help="default: online with an API key, else offline")
    p.add_argument("--wandb-project", default="matchrm")


def add_placement(p: argparse.ArgumentParser, *, device: str = "auto", dtype: str = "auto") -> None:
    """The device flags (``rmcore.device``); ``placement(args)`` reads them back."""
    g = p.add_argument_group("where the model runs")
    g.add_argument("--device", default=device, metavar="auto|cpu|cuda|cuda:N",
                   help=f"default {device}: this process's GPU where there is one, else the CPU; a device that is "
                        "not there is an error")
    g.add_argument("--dtype", default=dtype, choices=DTYPES,
                   help=f"default {dtype}: bfloat16 on a GPU that computes in it, float16 on an older one, float32 "
                        "on the CPU")
    g.add_argument("--attn-implementation", default=None, metavar="KERNEL",
                   help="attention kernel: eager, sdpa, flash_attention_2 ... (default: transformers' choice)")
    g.add_argument("--trust-remote-code", action="store_true",
                   help="run the modelling code a checkpoint ships (models whose config has auto_map)")
    g.add_argument("--device-map", default=None, choices=["auto"],
                   help="auto: spread one model over every visible GPU (a model larger than one GPU)")


def placement(args: argparse.Namespace) -> Placement:
    """The ``add_placement`` flags as a validated ``Placement``."""
    p = Placement(device=args.device, dtype=args.dtype, attn_implementation=args.attn_implementation,
                  trust_remote_code=args.trust_remote_code, device_map=args.device_map)
    p.validate()
    return p


def add_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="checkpoint dir, dir of checkpoints, or Hub id")
    p.add_argument("--data", required=True, help="data SPEC (file, JSON, or name[:k=v,...])")
    p.add_argument("--scorer", default="seq_classifier", choices=["seq_classifier", "generative_judge", "dpo_implicit"])
    p.add_argument("--reference", default=None, help="DPO reference model (dpo_implicit)")
    p.add_argument("--beta", type=float, default=0.1, help="DPO beta (dpo_implicit)")
    p.add_argument("--max-prompts", type=int, default=None, help="seeded sample of this many prompts")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=None,
                   help="tokens per text (default and ceiling: the model's own limit)")
    p.add_argument("--max-tokens", type=int, default=None, help="cap on padded tokens per batch")
    p.add_argument("--reward-head", default=None, metavar="HEAD",
                   help="which output of a multi-output reward model is the reward: an index or label name of a "
                        "classifier's outputs, or an attribute of a multi-head model (default: its one output, or "
                        "its own gated score)")
    p.add_argument("--loader", default=None, metavar="NAME",
                   help="reward-model loader (default: chosen by the checkpoint's architecture or name; see "
                        "docs/audit.md, 'Released reward models')")
    p.add_argument("--drop-special-tokens", default=None, metavar="bos,eos",
                   help="score without the begin- and/or end-of-sequence markers (seq_classifier)")
    p.add_argument("--cache", default=None, help="score cache file (default OUT/score_cache.sqlite)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (they go to stderr, "
                   "and only when it is a terminal)")
    add_placement(p)


def scorer_settings(args: argparse.Namespace) -> ScorerSettings:
    """``--scorer``, the loader, batching and device flags (``add_model``) as the scorer's settings."""
    return ScorerSettings(kind=args.scorer, reference=args.reference, beta=args.beta, batch_size=args.batch_size,
                          max_length=args.max_length, max_tokens=args.max_tokens, placement=placement(args),
                          reward_head=args.reward_head, loader=args.loader,
                          drop_special=tuple(csv(getattr(args, "drop_special_tokens", None))))


def csv(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(t) for t in csv(text))
    except ValueError:
        raise ConfigError(f"expected comma-separated integers, got '{text}'") from None


def add_num_processes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--num-processes", type=int, default=1, metavar="N",
                   help="share the scoring among N processes of this machine (one per GPU; CPU processes without "
                        "GPUs): the command starts itself under accelerate launch")


def reliabilities(items: list[str] | None) -> dict[str, float]:
    """NAME=R (or a bare R) arguments -> {NAME: R}."""
    return parse_reliabilities(items)
