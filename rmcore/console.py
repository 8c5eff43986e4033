"""What a person sees while runs train: one progress bar per run, the expected library messages
silenced, unexpected ones kept, and stdout left to the commands' results.

- `RunProgress`: a progress bar per run (description: the run's name; postfix: the latest loss;
  ``rmcore.progress``: tqdm on a terminal, periodic lines elsewhere), in place of transformers'
  PrinterCallback, which prints every raw log dictionary to stdout.
- `results_on_stdout`: stdout carries a command's results only (JSON a script can parse): DeepSpeed's
  logger, which writes its own stream handler to stdout ("Setting accelerator to CPU" at import),
  is sent to stderr.
- `load_quietly`: ``from_pretrained`` without transformers' load report when the only weights it
  initialised are the fresh score head a reward model always starts with ("MISSING ... Consider
  training on your downstream task" is then expected); any other missing, unexpected or mismatched
  weight is still reported, as a warning naming the keys.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

from transformers import TrainerCallback

from rmcore.progress import Progress

log = logging.getLogger(__name__)

# the loggers transformers writes its load report and training chatter to
_LOAD_REPORT_LOGGERS = ("transformers.modeling_utils", "transformers.utils.loading_report")


class RunProgress(TrainerCallback):
    """One progress bar per training run (rank 0 only), the latest loss as its postfix."""

    def __init__(self, name: str, leave: bool = True) -> None:
        self.name, self.leave = name, leave
        self.bar: Progress | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is not None:  # an earlier train() of this trainer that raised: its bar ends here
            self.bar.close()
        if state.is_world_process_zero:
            self.bar = Progress(self.name, state.max_steps, unit="step", leave=self.leave, initial=state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.bar is not None and logs and "loss" in logs:
            self.bar.set_postfix(loss=f"{float(logs['loss']):.4g}")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def use_progress_bar(trainer: Any, name: str) -> None:
    """Replace the trainer's log printer by one progress bar for the run."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(RunProgress(name))


@contextlib.contextmanager
def _quiet(names: tuple[str, ...], level: int = logging.ERROR) -> Iterator[None]:
    loggers = [logging.getLogger(n) for n in names]
    old = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, lv in zip(loggers, old):
            lg.setLevel(lv)


def load_quietly(from_pretrained: Callable[..., Any], path: str, *, fresh_head: Callable[[Any], list[str]],
                 on_fresh: Callable[[list[str]], None] | None = None, **kwargs: Any) -> Any:
    """``from_pretrained(path, **kwargs)`` with the load report shown only when it says something
    unexpected: keys missing outside the fresh head (``fresh_head(model)`` names its modules),
    unexpected keys in the checkpoint, or shape mismatches. ``on_fresh(keys)`` is called when the
    head was newly initialised (evaluation refuses such a model there)."""
    with _quiet(_LOAD_REPORT_LOGGERS):
        model, info = from_pretrained(path, output_loading_info=True, **kwargs)
    # the head's modules may sit under the base model's prefix (BERT: bert.pooler.*)
    heads = set(fresh_head(model))

    def in_head(key: str) -> bool:
        return bool(heads & set(key.split(".")))

    missing = sorted(k for k in info.get("missing_keys", ()) if not in_head(k))
    unexpected = sorted(info.get("unexpected_keys", ()))
    mismatched = sorted(str(k[0]) if isinstance(k, tuple) else str(k) for k in info.get("mismatched_keys", ()))
    if missing or mismatched:
        log.warning("%s: weights newly initialised outside the score head: %s", path, ", ".join(missing + mismatched))
    if unexpected:
        # a base model's own heads (e.g. a pretraining head) are dropped on purpose; say so once, quietly
        log.info("%s: checkpoint weights not used by the reward model: %s", path, ", ".join(unexpected))
    fresh = sorted(k for k in info.get("missing_keys", ()) if in_head(k))
    if fresh:
        if on_fresh is not None:
            on_fresh(fresh)
        log.debug("%s: fresh score head %s", path, ", ".join(fresh))
    return model


# DeepSpeed's logger (deepspeed.utils.logging): its LoggerFactory gives it a StreamHandler on stdout
# and propagate=False, and it logs at import ("Setting accelerator to CPU"), before any caller of
# ours could touch the handler.
_DEEPSPEED_LOGGER = "DeepSpeed"


class _CurrentStderr:
    """``sys.stderr`` as it is at each write: a handler keeps the stream it was given, and stderr may
    be swapped after (pytest's capture; a caller's redirect), so the handler holds this instead."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _to_stderr(logger: logging.Logger) -> None:
    """Point the logger's stream handlers (its files aside) at stderr: DeepSpeed's logger has only
    the one its LoggerFactory made on stdout."""
    for h in logger.handlers:
        if type(h) is logging.StreamHandler and not isinstance(h.stream, _CurrentStderr):
            h.setStream(_CurrentStderr())  # type: ignore[arg-type]


class _StdoutToStderr(logging.Filter):
    """A logger filter that moves the logger's stdout handlers to stderr before each record is
    handled: a filter is kept when a library adds its handlers later, and runs before them."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.logger = logger

    def filter(self, record: logging.LogRecord) -> bool:
        _to_stderr(self.logger)
        return True


def results_on_stdout() -> None:
    """Keep stdout for results: DeepSpeed's log lines go to stderr, whether deepspeed is imported
    already or later (the filter is in place before its import logs anything). Idempotent."""
    logger = logging.getLogger(_DEEPSPEED_LOGGER)
    _to_stderr(logger)
    if not any(isinstance(f, _StdoutToStderr) for f in logger.filters):
        logger.addFilter(_StdoutToStderr(logger))


def quiet_libraries() -> None:
    """A console a person reads: the libraries' own progress bars (weights loading, shard writing,
    dataset maps) and their chatter below WARNING are off; our run bars and warnings stay. In a
    single process no layer is tensor-parallel, so transformers' 'layers were not sharded' notice
    (logged whenever a model class carries a TP plan) says nothing there. Library log lines that
    would go to stdout go to stderr (``results_on_stdout``)."""
    import os

    results_on_stdout()  # first: the imports below may (in other versions) import deepspeed

    import datasets
    import transformers

    transformers.utils.logging.set_verbosity_warning()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_warning()
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        logging.getLogger("transformers.distributed.tensor_parallel").setLevel(logging.ERROR)
    for noisy in ("httpx", "urllib3", "filelock", "wandb"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
