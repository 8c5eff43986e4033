"""Weights & Biases logging, kept apart from training and statistics logic.

Offline mode is used when no API key is configured, so every run is still recorded locally
(``wandb sync`` uploads it later); ``mode="disabled"`` switches logging off.

The W&B settings are declared here once: the modes (:data:`WANDB_MODES`), the project a run goes
to that names none (:data:`DEFAULT_PROJECT`), and the flags of every command (:class:`WandbFlags`:
``--wandb-mode``, ``--wandb-project``, ``--wandb-group``), which each command holds as it takes them
(``rmcore.settings.fields.nested``: ``only`` some, their ``defaults`` and ``options`` there). A recipe's
``wandb`` block (``rmtrain.config.WandbSettings``) names its keys by the same declarations.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmcore.settings.fields import option

DEFAULT_PROJECT = "matchrm"  # where a run goes that names no project
WANDB_MODES = ("online", "offline", "disabled")  # a mode of None: online with an API key, else offline


@dataclass
class WandbFlags:
    """Where a command logs its figures: the W&B flags of every command."""

    wandb_mode: str | None = option(None, choices=WANDB_MODES, help="default: online with an API key, else offline")
    wandb_project: str | None = option(DEFAULT_PROJECT, help="W&B project")
    wandb_group: str | None = option(None, help="W&B group (default: the training run's, for a checkpoint trained "
                                                "by rmtrain; else none)")

    def target(self) -> dict[str, Any]:
        """The keywords the library's logging functions take (``wandb_group`` where one is named:
        the commands without ``--wandb-group`` log to no group)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "wandb_group" or v is not None}


def resolve_mode(mode: str | None) -> str:
    """'online' | 'offline' | 'disabled'; None means online with an API key, offline without."""
    if mode:
        return mode
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    if os.environ.get("WANDB_API_KEY") or (Path.home() / ".netrc").exists():
        return "online"
    return "offline"


def flatten(d: Mapping[str, Any], prefix: str = "", sep: str = "/") -> dict[str, Any]:
    """Nested dict -> flat dict of scalars ('share/original/estimate': 0.31); lists of two
    numbers (intervals) become '.../lo' and '.../hi'."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{sep}{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten(v, key, sep))
        elif isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
            out[f"{key}{sep}lo"], out[f"{key}{sep}hi"] = float(v[0]), float(v[1])
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[key] = v
    return out


class Tracker:
    """Thin wrapper around one W&B run; a no-op when disabled. ``run_id``: go on in that run (W&B's
    ``resume="allow"``: the run of an interrupted process, resumed), else a new one."""

    def __init__(self, *, project: str | None = DEFAULT_PROJECT, name: str | None = None, group: str | None = None,
                 tags: list[str] | None = None, config: Mapping[str, Any] | None = None,
                 mode: str | None = None, dir: str | os.PathLike | None = None,
                 job_type: str | None = None, entity: str | None = None, run_id: str | None = None) -> None:
        self.mode = resolve_mode(mode)
        self.run = None
        if self.mode == "disabled":
            return
        import wandb

        if dir is not None:
            Path(dir).mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=project or DEFAULT_PROJECT, entity=entity, name=name, group=group,
                              tags=tags or [], config=dict(config or {}), mode=self.mode,
                              dir=str(dir) if dir else None, job_type=job_type, reinit="finish_previous",
                              id=run_id, resume="allow" if run_id else None)

    @property
    def enabled(self) -> bool:
        return self.run is not None

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        if self.run is not None:
            self.run.log(dict(metrics), step=step)

    def log_table(self, key: str, columns: list[str], rows: list[list[Any]], step: int | None = None) -> None:
        if self.run is not None:
            import wandb

            self.run.log({key: wandb.Table(columns=columns, data=rows)}, step=step)

    def log_image(self, key: str, path: str | os.PathLike, step: int | None = None) -> None:
        if self.run is not None:
            import wandb

            self.run.log({key: wandb.Image(str(path))}, step=step)

    def summary(self, values: Mapping[str, Any]) -> None:
        if self.run is not None:
            for k, v in values.items():
                self.run.summary[k] = v

    def finish(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None

    @property
    def run_id(self) -> str | None:
        """The W&B run's id (None when disabled): what a resumed process passes back as ``run_id``."""
        return self.run.id if self.run is not None else None

    @property
    def run_dir(self) -> Path | None:
        return Path(self.run.dir).parent if self.run is not None else None
