"""The W&B run of one evaluation (an audit, pairwise accuracy, suitability, judge profiling).

A checkpoint trained by ``rmtrain`` carries its arm, seed, model and the W&B project, entity and
group of its training run (``provenance``); its evaluation runs go to that project and group with
``arm:`` and ``seed:`` tags, so on W&B an audit sits beside the training run it audits. A project
or group the user names (``--wandb-project``, ``--wandb-group``) wins; without either, the project
is ``matchrm`` and the run has no group.
``rmeval stats`` has no checkpoint: it passes its tables' provenance (``prov``; read where they lie,
``rmeval.audit.pipeline.tables_provenance``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from rmcore.runtime.checkpoints import provenance
from rmcore.runtime.wandb_log import DEFAULT_PROJECT, Tracker


def evaluation_tracker(name: str, out: str | os.PathLike, config: Mapping[str, Any], *,
                       checkpoint: str | os.PathLike | None = None, prov: Mapping[str, Any] | None = None,
                       project: str | None = None, group: str | None = None, mode: str | None = None,
                       job_type: str = "audit") -> Tracker:
    """A W&B run named ``name`` in ``out``; ``config`` plus the run's provenance (``prov``, else the
    checkpoint's) as its config. ``project`` None: the training run's project and entity, else
    ``matchrm``; ``group`` None: the training run's group."""
    prov = dict(prov if prov is not None else provenance(checkpoint) if checkpoint is not None else {})
    tags = [f"{k}:{prov[k]}" for k in ("arm", "seed") if k in prov]
    entity = prov.get("entity") if project is None else None  # the training run's entity goes with its project
    where = {"project": project or prov.get("project") or DEFAULT_PROJECT, "entity": entity}
    return Tracker(name=name, config={**config, **prov}, mode=mode, dir=out, job_type=job_type,
                   group=group or prov.get("group"), tags=tags, **where)
