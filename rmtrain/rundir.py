"""A run's directory as the trainer keeps it: whether it may be resumed or reused, and atomic saving.

OUT/ holds (file names in ``rmcore.runtime.checkpoints``) `matchrm_config.json` (the run's config,
written before training),
`matchrm_wandb_run.json` (the id of its W&B run, which a resumed run goes on in), `checkpoint-*`
(resumable Trainer state), and when the run finished: a plain transformers checkpoint,
`train_summary.json` and `heldout_scores.parquet`."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from rmcore.errors import ConfigError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.io.tables import atomic_write_table
from rmcore.models.modeling import unwrap_for_saving
from rmcore.runtime.checkpoints import (
    CONFIG_FILE,
    HELDOUT_SCORES_FILE,
    PROGRESS_FILE,
    SUMMARY_FILE,
    TRAINER_STATE,
    WANDB_RUN_FILE,
)
from rmtrain.config import TrainConfig

log = logging.getLogger(__name__)

# Keys that may differ between a run and its resumption without changing what is trained.
_RESUME_FREE = ("wandb", "audit", "output_dir", "on_bad")
# training keys that judge the outcome (its status, the exit code), not what is trained
_JUDGING = ("on_divergence", "collapse_sd")


def comparable(cfg_dict: dict[str, Any]) -> str:
    """The part of a config that decides what is trained, as canonical text."""
    d = {k: v for k, v in cfg_dict.items() if k not in _RESUME_FREE}
    if isinstance(d.get("training"), dict):
        d["training"] = {k: v for k, v in d["training"].items() if k not in _JUDGING}
    return json.dumps(d, sort_keys=True, default=str)


def config_dict(cfg: TrainConfig) -> dict[str, Any]:
    """The config as JSON would give it back (tuples become lists), so saved and live configs compare."""
    return json.loads(json.dumps(cfg.to_dict(), default=str))


def open_run(cfg: TrainConfig, out: Path, force: bool) -> dict[str, Any] | None:
    """Make `out` ready for this run. Returns the stored summary when the run already finished
    (and force is off); raises when the directory holds another run."""
    if force:
        clear_run(out)  # never resume or reuse another run's checkpoints
        return None
    check_same_run(cfg, out)
    if (out / SUMMARY_FILE).exists():
        log.info("%s exists: run already finished, not retraining (force=True retrains)", out / SUMMARY_FILE)
        return json.loads((out / SUMMARY_FILE).read_text())
    return None


def check_same_run(cfg: TrainConfig, out: Path) -> None:
    """Resuming (or returning a finished summary) is only right for the same arm, seed, model,
    data and budget; anything else in the directory is another run's."""
    saved = out / CONFIG_FILE
    if saved.exists():
        if comparable(json.loads(saved.read_text())) != comparable(config_dict(cfg)):
            raise ConfigError(f"{out} holds a run with another config ({saved}); choose another output_dir "
                              "or pass --force to replace it")
    elif any(out.glob("checkpoint-*")) or (out / SUMMARY_FILE).exists():
        raise ConfigError(f"{out} holds checkpoints of an unknown run (no {CONFIG_FILE}); "
                          "choose another output_dir or pass --force")


def clear_run(out: Path) -> None:
    for p in list(out.glob("checkpoint-*")) if out.exists() else []:
        shutil.rmtree(p)
    for name in (SUMMARY_FILE, CONFIG_FILE, HELDOUT_SCORES_FILE, WANDB_RUN_FILE):
        (out / name).unlink(missing_ok=True)


def stored_wandb_run(out: Path) -> str | None:
    """The id of the W&B run this directory's run logged to (None: none yet): a resumed run goes on
    in it rather than starting a second run of the same name beside one that never finished."""
    f = out / WANDB_RUN_FILE
    if not f.is_file():
        return None
    try:
        run_id = json.loads(f.read_text()).get("id")
    except (json.JSONDecodeError, AttributeError):
        log.warning("%s is not a W&B run record; the run logs to a new W&B run", f)
        return None
    return str(run_id) if run_id else None


def store_wandb_run(out: Path, run_id: str | None) -> None:
    if run_id:
        atomic_write_json(out / WANDB_RUN_FILE, {"id": run_id})


def write_config(cfg: TrainConfig, out: Path) -> None:
    atomic_write_text(out / CONFIG_FILE, json.dumps(cfg.to_dict(), indent=2, default=str))


def resume_checkpoint(out: Path, remove_incomplete: bool = True) -> str | None:
    """The newest *complete* checkpoint to resume from. A process killed while saving leaves a
    checkpoint without trainer_state.json; transformers would pick it (highest step) and resume from
    half-written weights, so the one before is used and the incomplete one removed (by one process
    only: `remove_incomplete` is for the main process)."""
    if not out.exists():
        return None
    steps = []
    for d in out.glob("checkpoint-*"):
        tail = d.name.split("-", 1)[1]
        if d.is_dir() and tail.isdigit():
            steps.append((int(tail), d))
    for _, d in sorted(steps, reverse=True):
        if (d / TRAINER_STATE).is_file():
            return str(d)
        log.warning("%s is incomplete (no %s; interrupted while saving): resuming from an earlier one",
                    d, TRAINER_STATE)
        if remove_incomplete:
            shutil.rmtree(d, ignore_errors=True)
    return None


def read_progress(checkpoint: str | Path | None, rank: int) -> dict[str, float]:
    """Pairs and seconds this rank had done when `checkpoint` was saved (zeros without one), so a
    resumed run's summary counts the whole run."""
    before = {"pairs_seen": 0, "train_seconds": 0.0}
    if checkpoint is None:
        return before
    f = Path(checkpoint) / PROGRESS_FILE.format(rank=rank)
    if not f.is_file():
        log.warning("%s has no %s (saved by an older matchrm): counts start at this resumption", checkpoint, f.name)
        return before
    d = json.loads(f.read_text())
    return {"pairs_seen": int(d["pairs_seen"]), "train_seconds": float(d["train_seconds"])}


def progress_callback(trainer: Any, t0: float, before: dict[str, float]) -> Any:
    """Writes this rank's counters into every checkpoint it saves (see read_progress)."""
    import time

    from transformers import TrainerCallback

    class ProgressCallback(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if ckpt.is_dir():
                rank = int(os.environ.get("RANK", "0"))
                atomic_write_json(ckpt / PROGRESS_FILE.format(rank=rank), {
                    "pairs_seen": int(before["pairs_seen"]) + trainer.pairs_seen,
                    "train_seconds": float(before["train_seconds"]) + time.time() - t0})

    return ProgressCallback()


def write_results(out: Path, summary: dict[str, Any], heldout_scores: pd.DataFrame | None) -> None:
    """Scores first (none for a diverged run), summary last: the summary's presence is what marks
    the run finished."""
    if heldout_scores is not None:
        atomic_write_table(out / HELDOUT_SCORES_FILE, heldout_scores)
    atomic_write_json(out / SUMMARY_FILE, summary)


def save_checkpoint(model: Any, tokenizer: Any, out: Path) -> None:
    """A plain transformers checkpoint: LoRA merged, head included, pad token recorded."""
    plain = unwrap_for_saving(model)
    plain.config.pad_token_id = tokenizer.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    # Written beside, then moved in file by file: a crash never leaves a half-written weights file.
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=".saving-"))
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        for f in tmp.iterdir():
            os.replace(f, out / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
