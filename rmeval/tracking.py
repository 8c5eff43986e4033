"""The W&B run of one evaluation (an audit, pairwise accuracy, suitability, judge profiling).

A checkpoint trained by ``rmtrain`` carries its arm, seed, model and the W&B project, entity and
group of its training run (``provenance``); its evaluation runs go to that project and group with
``arm:`` and ``seed:`` tags, so on W&B an audit sits beside the training run it audits. A project
the user names (``--wandb-project``) wins; without either, the project is ``matchrm``.
``rmeval stats`` has no checkpoint: its tables' provenance is read where they lie
(``tables_provenance``)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rmcore.checkpoints import CONFIG_FILE, SUMMARY_FILE, provenance
from rmcore.tracking import DEFAULT_PROJECT, Tracker

# what an audit's meta keeps of the audited run (seed as run_seed: meta's seed is the audit's own)
_AUDIT_PROVENANCE = {"arm": "arm", "run_seed": "seed", "model": "model", "project": "project", "entity": "entity",
                     "group": "group"}


def evaluation_tracker(name: str, out: str | os.PathLike, config: Mapping[str, Any], *,
                       checkpoint: str | os.PathLike | None = None, prov: Mapping[str, Any] | None = None,
                       project: str | None = None, mode: str | None = None, job_type: str = "audit") -> Tracker:
    """A W&B run named ``name`` in ``out``; ``config`` plus the run's provenance (``prov``, else the
    checkpoint's) as its config. ``project`` None: the training run's project and entity, else
    ``matchrm``."""
    prov = dict(prov if prov is not None else provenance(checkpoint) if checkpoint is not None else {})
    tags = [f"{k}:{prov[k]}" for k in ("arm", "seed") if k in prov]
    entity = prov.get("entity") if project is None else None  # the training run's entity goes with its project
    where = {"project": project or prov.get("project") or DEFAULT_PROJECT, "entity": entity}
    return Tracker(name=name, config={**config, **prov}, mode=mode, dir=out, job_type=job_type,
                   group=prov.get("group"), tags=tags, **where)


def tables_provenance(scores: str | os.PathLike) -> dict[str, Any]:
    """The provenance of a scores table, from where it lies: a training run's directory
    (``heldout_scores.parquet`` beside ``matchrm_config.json``), else the ``audit.json`` an audit
    wrote beside it (its meta's arm, run seed, model and W&B project and group); empty otherwise."""
    folder = Path(scores).parent
    if (folder / CONFIG_FILE).is_file() or (folder / SUMMARY_FILE).is_file():
        return provenance(folder)
    record = folder / "audit.json"
    if not record.is_file():
        return {}
    try:
        meta = json.loads(record.read_text()).get("meta") or {}
    except (json.JSONDecodeError, AttributeError):
        return {}  # not an audit record: no provenance rather than a failed recomputation
    return {key: meta[k] for k, key in _AUDIT_PROVENANCE.items() if meta.get(k) is not None}
