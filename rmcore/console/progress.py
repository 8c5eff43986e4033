"""Progress of a long step, shown wherever stderr goes: a tqdm bar when stderr is a terminal, plain
lines when it is not (a log file, a pipe, a batch job), so a run that writes to a file still says
where it is.

- ``Progress(desc, total, unit=...)``: counted work (texts scored, training steps, judge calls).
  On a terminal a tqdm bar; elsewhere a line every ``every`` seconds and one at the end:
  ``scoring original: 2,100 of 9,320 texts (23%), 41 s``. The lines come from a timer thread, so a
  single long chunk (a big model scoring 512 texts) still shows that the run is alive.
- ``Progress(desc)`` without a total: work that cannot be counted (the statistics, the feature
  probes): ``statistics: 30 s`` every ``every`` seconds, ``statistics: done in 75 s`` at the end, on
  a terminal as well (tqdm cannot animate a step that reports nothing).

Everything goes to stderr: stdout carries only a command's results. No heavy imports (tqdm only),
so ``rmeval.stats`` and the CLIs can use it without loading torch.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

EVERY = 30.0  # seconds between two lines on a non-terminal stderr


def is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed, or a stream without isatty
        return False


class Progress:
    """One long step's progress (module doc). ``enabled=False`` shows nothing; ``leave``: keep the
    terminal bar when done; ``initial``: work already done (a resumed run); ``stream`` defaults to
    stderr; ``clock`` is for tests. Use it as a context manager, or call ``close``."""

    def __init__(self, desc: str, total: int | None = None, *, unit: str = "item", enabled: bool = True,
                 leave: bool = False, initial: int = 0, every: float = EVERY, stream: IO[str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.desc, self.total, self.unit, self.every = desc, total, unit, every
        self.n = initial
        self.postfix = ""
        self.stream = sys.stderr if stream is None else stream
        self.clock = clock
        self.start = clock()
        self._bar: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # 'bar' (tqdm on a terminal), 'lines' (periodic lines) or 'off'
        self.mode = "off" if not enabled else "bar" if total is not None and is_terminal(self.stream) else "lines"
        self._open = enabled
        if self.mode == "bar":
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, leave=leave, initial=initial, file=self.stream,
                             dynamic_ncols=True)
        elif self.mode == "lines" and every > 0:
            self._thread = threading.Thread(target=self._tick, name=f"progress: {desc}", daemon=True)
            self._thread.start()

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)

    def set_postfix(self, **values: Any) -> None:
        """Shown after the count (``loss=0.41``)."""
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())
        if self._bar is not None:  # redrawn now: a new condition shows before its first chunk is done
            self._bar.set_postfix(values)

    def line(self, done: bool = False) -> str:
        """The line shown on a non-terminal stderr now (``done``: the closing one)."""
        secs = f"{self.clock() - self.start:,.0f} s"
        if self.total is None:
            text = f"{self.desc}: done in {secs}" if done else f"{self.desc}: {secs}"
        else:
            unit = self.unit if self.total == 1 else self.unit + "s"
            pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
            text = f"{self.desc}: {self.n:,} of {self.total:,} {unit}{pct}, {secs}"
        return text + (f", {self.postfix}" if self.postfix else "")

    def emit(self, done: bool = False) -> bool:
        """Write ``line`` to the stream (what the timer thread does every ``every`` seconds); False
        when the stream is closed."""
        try:
            print(self.line(done), file=self.stream, flush=True)
        except (OSError, ValueError):  # stderr closed under us: progress is not worth a crash
            return False
        return True

    def _tick(self) -> None:
        # also ends when the stream is gone: a step that raised without closing (a training run
        # interrupted inside the trainer, which calls no callback then) leaves no writer behind
        while not self._stop.wait(self.every) and self.emit():
            pass

    def close(self) -> None:
        """End the bar, or stop the timer and write the closing line (once)."""
        if not self._open:
            return
        self._open = False
        if self._bar is not None:
            self._bar.close()
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.emit(done=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
