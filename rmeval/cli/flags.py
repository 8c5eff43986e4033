"""Flags several ``rmeval`` commands share, and turning them into settings.

``add_placement``/``placement`` are the one set of device flags of every command that loads a
model (``--device --dtype --attn-implementation --trust-remote-code --device-map``, the keys of
``rmcore.device.Placement``); ``rmtrain``'s policy commands and ``serve-reward`` use them too."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rmcore.device import DTYPES, Placement
from rmcore.errors import ConfigError
from rmeval.scoring import ScorerSettings


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
    p.add_argument("--no-progress", action="store_true", help="no progress on stderr (a bar on a terminal, "
                   "else a line every 30 s)")
    add_placement(p)


def scorer_settings(args: argparse.Namespace) -> ScorerSettings:
    """``--scorer``, the loader, batching and device flags (``add_model``) as the scorer's settings."""
    return ScorerSettings(kind=args.scorer, reference=args.reference, beta=args.beta, batch_size=args.batch_size,
                          max_length=args.max_length, max_tokens=args.max_tokens, placement=placement(args),
                          reward_head=args.reward_head, loader=args.loader,
                          drop_special=tuple(csv(getattr(args, "drop_special_tokens", None))))


def wandb_target(args: argparse.Namespace) -> dict[str, Any]:
    """``--wandb-project`` and ``--wandb-mode`` as the keywords the library takes."""
    return {"wandb_project": args.wandb_project, "wandb_mode": args.wandb_mode}


def reliabilities(items: list[str] | None) -> dict[str, float]:
    """NAME=R (or a bare R) arguments -> {NAME: R}."""
    out: dict[str, float] = {}
    for item in items or []:
        label, _, value = item.rpartition("=")
        try:
            out[label or value] = float(value)
        except ValueError:
            raise ConfigError(f"a reliability must be NAME=R or R with R a number, got {item!r}") from None
    return out


def named_paths(items: list[str] | None, flag: str) -> dict[str, str]:
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


def relaunch(args: argparse.Namespace) -> int | None:
    """With ``--num-processes N > 1`` outside a launcher: the same command run as N processes under
    ``accelerate launch``, and its exit code; else None (carry on in this process)."""
    import os
    import subprocess

    n = getattr(args, "num_processes", 1)
    if n < 1:
        raise ConfigError(f"--num-processes must be >= 1, got {n}")
    if n == 1 or int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        return None
    from rmcore.jobs import launch_command

    argv = list(args.argv)
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
