"""Where a recipe's local data comes from. ``data_sources`` names each folder or file that is not a
Hub dataset (RM-Bench's files, Reward Auditor's perturbed files, the HH-RLHF test file), with the
path it is read from and the commands that put it there; a data spec names it as ``{NAME}``
(``rm_bench:{rm_bench}/chat_filtered.json``, ``{name: reward_auditor, path: "{reward_auditor}"}``).
``--data-source NAME=PATH`` reads it from elsewhere (the tests: the copies in ``../shared/data``).

Before a run writes anything, every local path its data specs read is checked (``check_data``): a
missing one is one line naming the data set, the path, and what to fetch from where."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from rmcore.data.loading import parse_data_spec
from rmcore.errors import ConfigError
from rmcore.io.files import is_hub_id

PLACEHOLDER = re.compile(r"\{([A-Za-z_][\w-]*)\}")


def placeholders(spec: Any) -> set[str]:
    """The ``{NAME}`` a spec names (in any string of it)."""
    if isinstance(spec, str):
        return set(PLACEHOLDER.findall(spec))
    if isinstance(spec, dict):
        return {n for v in spec.values() for n in placeholders(v)}
    if isinstance(spec, list):
        return {n for v in spec for n in placeholders(v)}
    return set()


def substitute(spec: Any, sources: dict[str, Any]) -> Any:
    """``spec`` with each ``{NAME}`` of a data source replaced by its path (other braces kept)."""
    if isinstance(spec, str):
        return PLACEHOLDER.sub(lambda mt: str(sources[mt.group(1)].path) if mt.group(1) in sources
                               else mt.group(0), spec)
    if isinstance(spec, dict):
        return {k: substitute(v, sources) for k, v in spec.items()}
    if isinstance(spec, list):
        return [substitute(v, sources) for v in spec]
    return spec


def local_paths(spec: Any) -> list[str]:
    """The local paths a (substituted) data spec reads: its ``path`` and ``preference_path`` unless
    they are Hub ids; a stand-in's ``{synthetic: ...}`` reads none it needs (it simulates what is missing)."""
    if isinstance(spec, dict) and "synthetic" in spec:
        return []
    s = parse_data_spec(spec) if isinstance(spec, str) else dict(spec)
    out = []
    for key in ("path", "preference_path"):
        v = s.get(key)
        if isinstance(v, str) and v != "hub" and not is_hub_id(v):
            out.append(v)
    return out


def missing(recipe: Any, spec: Any, raw: Any) -> str | None:
    """One line on the first local path of ``spec`` (substituted; ``raw``: as the recipe writes it)
    that does not exist: the path, what to fetch and how; None when every one exists."""
    for path in local_paths(spec):
        if Path(os.path.expanduser(path)).exists():
            continue
        names = sorted(placeholders(raw))
        name = next((n for n in names if n in recipe.data_sources), None)
        src = recipe.data_sources.get(name) if name else None
        how = (f"; fetch it: {src.fetch} (or --data-source {name}=PATH where it is)" if src and src.fetch
               else "; see docs/reproduce.md, 'Data'")
        return f"{path} not found{how}"
    return None


def check_data(ctx: Any, keys: list[str]) -> None:
    """Every local path the data sets ``keys`` read exists: else a one-line ConfigError."""
    for key in keys:
        raw = ctx.raw_spec(key)
        why = missing(ctx.recipe, substitute(raw, ctx.recipe.data_sources), raw)
        if why:
            raise ConfigError(f"{ctx.recipe.path}: data.{key}: {why}")


def check_sources(recipe: Any) -> None:
    """``rmtrain check``: every ``{NAME}`` of a data spec (real, stand-in, the PPO policies') is a data source."""
    specs = {f"data.{k}": e.spec for k, e in recipe.data.items()}
    specs.update({f"stand_in.data.{k}": v for k, v in recipe.stand_in.data.items()})
    if recipe.policy is not None and recipe.policy.data is not None:
        specs["policy.data"] = recipe.policy.data
    for where, spec in specs.items():
        unknown = sorted(placeholders(spec) - set(recipe.data_sources))
        if unknown:
            raise ConfigError(f"{recipe.path}: {where} names {{{unknown[0]}}}, which is not in data_sources "
                              f"({', '.join(recipe.data_sources) or 'none'})")
