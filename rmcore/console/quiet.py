"""The libraries' own console output tamed, without importing them: a command calls
``quiet_libraries`` first thing, and its ``--help`` or a bad argument still loads no model library.

- ``results_on_stdout``: stdout carries a command's results only (JSON a script can parse):
  DeepSpeed's logger, which writes its own stream handler to stdout ("Setting accelerator to CPU"
  at import), is sent to stderr.
- ``quiet_libraries``: transformers' and datasets' progress bars and their chatter below WARNING
  off, set when each library is imported (at once if it is already): a hook on the import system
  (``after_import``) runs the settings right after the library's own ``__init__``, which is where
  the eager ``import transformers`` of a command's start used to set them. What a module prints
  while it is imported goes to stderr where it is known to print (``prints_to_stderr``:
  transformers' W&B integration prints "[INFO] Running in WANDB offline mode" on stdout at import
  under ``WANDB_MODE=offline``; trl's trainers and our reward trainer import it).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import logging
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

# DeepSpeed's logger (deepspeed.utils.logging): its LoggerFactory gives it a StreamHandler on stdout
# and propagate=False, and it logs at import ("Setting accelerator to CPU"), before any caller of
# ours could touch the handler.
_DEEPSPEED_LOGGER = "DeepSpeed"
# modules that print on stdout while they are imported
_PRINT_AT_IMPORT = ("transformers.integrations.integration_utils",)


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


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a module with hooks, it takes the spec the other finders give and
    has the loader run the hooks once the module has executed (and, for a module in ``to_stderr``,
    execute it with stdout sent to stderr)."""

    def __init__(self) -> None:
        self.hooks: dict[str, list[Callable[[ModuleType], None]]] = {}
        self.to_stderr: set[str] = set()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        hooks = self.hooks.pop(fullname, None) or []
        quiet = fullname in self.to_stderr
        self.to_stderr.discard(fullname)
        if not hooks and not quiet:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if finder is not self and find is not None else None
            if spec is not None:
                break
        else:
            return None
        exec_module = spec.loader.exec_module

        def run(module: ModuleType) -> None:
            with contextlib.redirect_stdout(sys.stderr) if quiet else contextlib.nullcontext():
                exec_module(module)
            for hook in hooks:
                hook(module)

        spec.loader.exec_module = run
        return spec


_AFTER_IMPORT = _AfterImport()


def after_import(name: str, hook: Callable[[ModuleType], None]) -> None:
    """``hook(module)`` once the top-level module ``name`` is imported: now if it is already."""
    if name in sys.modules:
        hook(sys.modules[name])
        return
    _AFTER_IMPORT.hooks.setdefault(name, []).append(hook)
    _install()


def prints_to_stderr(name: str) -> None:
    """What module ``name`` (a submodule too) prints while it is first imported goes to stderr;
    nothing to do once it is imported."""
    if name not in sys.modules:
        _AFTER_IMPORT.to_stderr.add(name)
        _install()


def _install() -> None:
    if _AFTER_IMPORT not in sys.meta_path:
        sys.meta_path.insert(0, _AFTER_IMPORT)


def _quiet_transformers(transformers: ModuleType) -> None:
    transformers.utils.logging.set_verbosity_warning()
    transformers.utils.logging.disable_progress_bar()


def _quiet_datasets(datasets: ModuleType) -> None:
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_warning()


def quiet_libraries() -> None:
    """A console a person reads: the libraries' own progress bars (weights loading, shard writing,
    dataset maps) and their chatter below WARNING are off; our run bars and warnings stay. In a
    single process no layer is tensor-parallel, so transformers' 'layers were not sharded' notice
    (logged whenever a model class carries a TP plan) says nothing there. Library log lines that
    would go to stdout go to stderr (``results_on_stdout``), and so does what a module known to
    print at import prints then (``prints_to_stderr``). transformers and datasets are set as they
    load (``after_import``), so this imports neither."""
    results_on_stdout()  # first: deepspeed, imported by the libraries when they load, logs at import
    for name in _PRINT_AT_IMPORT:
        prints_to_stderr(name)
    after_import("datasets", _quiet_datasets)
    after_import("transformers", _quiet_transformers)
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        logging.getLogger("transformers.distributed.tensor_parallel").setLevel(logging.ERROR)
    for noisy in ("httpx", "urllib3", "filelock", "wandb"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
