"""The W&B run of one evaluation (an audit, pairwise accuracy, suitability, judge profiling).

A checkpoint trained by ``rmtrain`` carries its arm, seed and sweep group (``provenance``); its
evaluation runs join that group with ``arm:`` and ``seed:`` tags, so on W&B an audit sits beside
the training run it audits."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from rmcore.checkpoints import provenance
from rmcore.tracking import Tracker


def evaluation_tracker(name: str, out: str | os.PathLike, config: Mapping[str, Any], *,
                       checkpoint: str | os.PathLike | None = None, project: str = "matchrm",
                       mode: str | None = None, job_type: str = "audit") -> Tracker:
    """A W&B run named ``name`` in ``out``; ``config`` plus the checkpoint's provenance as its config."""
    prov = provenance(checkpoint) if checkpoint is not None else {}
    tags = [f"{k}:{prov[k]}" for k in ("arm", "seed") if k in prov]
    return Tracker(project=project, name=name, config={**config, **prov}, mode=mode, dir=out, job_type=job_type,
                   group=prov.get("group"), tags=tags)
