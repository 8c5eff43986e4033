"""What a person sees while runs train: one progress bar per run, the expected library messages
silenced, unexpected ones kept, and stdout left to the commands' results.

- `RunProgress`: a progress bar per run (description: the run's name; postfix: the latest loss;
  ``rmcore.console.progress``: tqdm on a terminal, periodic lines elsewhere), in place of transformers'
  PrinterCallback, which prints every raw log dictionary to stdout.
- the libraries' own chatter and stdout: ``rmcore.console.quiet`` (light: the commands call it before any
  library loads).
- `load_quietly`: ``from_pretrained`` without transformers' load report when the only weights it
  initialised are the fresh score head a reward model always starts with ("MISSING ... Consider
  training on your downstream task" is then expected); any other missing, unexpected or mismatched
  weight is still reported, as a warning naming the keys.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from transformers import TrainerCallback

from rmcore.console.progress import Progress

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
