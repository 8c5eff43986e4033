"""Flags several ``rmeval`` commands share, and turning them into settings."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

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
    p.add_argument("--drop-special-tokens", default=None, metavar="bos,eos",
                   help="score without the begin- and/or end-of-sequence markers (seq_classifier)")
    p.add_argument("--cache", default=None, help="score cache file (default OUT/score_cache.sqlite)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (they go to stderr, "
                   "and only when it is a terminal)")


def scorer_settings(args: argparse.Namespace) -> ScorerSettings:
    """``--scorer`` and the batching flags (``add_model``) as the scorer's settings."""
    return ScorerSettings(kind=args.scorer, reference=args.reference, beta=args.beta, batch_size=args.batch_size,
                          max_length=args.max_length, max_tokens=args.max_tokens,
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


def dest(out: str, name: str, single: bool) -> Path:
    """Where one of several checkpoints goes: OUT itself for one, OUT/<name>/ for several."""
    return Path(out) if single else Path(out) / name
