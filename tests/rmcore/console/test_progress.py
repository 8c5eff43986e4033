"""Progress on a stderr that is not a terminal (a log file, a pipe): periodic lines that say how far
a step is, and one when it ends; a tqdm bar on a terminal; nothing when turned off. A fake clock
makes the lines exact."""

from __future__ import annotations

import io
import time

from rmcore.console.progress import Progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_counted_step_writes_lines_with_count_share_and_seconds():
    stream, clock = io.StringIO(), FakeClock()
    p = Progress("scoring bt seed 1", 9320, unit="text", stream=stream, clock=clock, every=0)
    assert p.mode == "lines"
    p.update(2100)
    p.set_postfix(condition="random")
    clock.now += 41
    p.emit()  # what the timer thread writes every `every` seconds
    p.update(7220)
    clock.now += 60
    p.close()
    p.close()  # once only
    assert stream.getvalue().splitlines() == [
        "scoring bt seed 1: 2,100 of 9,320 texts (23%), 41 s, condition=random",
        "scoring bt seed 1: 9,320 of 9,320 texts (100%), 101 s, condition=random"]


def test_uncounted_step_says_it_is_running_and_when_it_is_done():
    stream, clock = io.StringIO(), FakeClock()
    with Progress("statistics", stream=stream, clock=clock, every=0) as p:
        clock.now += 30
        p.emit()
        clock.now += 45
    assert stream.getvalue().splitlines() == ["statistics: 30 s", "statistics: done in 75 s"]


def test_timer_thread_writes_while_nothing_is_counted():
    # a single long chunk (a big model scoring 512 texts) updates nothing: the timer still writes
    stream = io.StringIO()
    p = Progress("scoring", 10, unit="text", stream=stream, every=0.01)
    deadline = time.monotonic() + 30
    while "0 of 10 texts (0%)" not in stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    p.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("scoring: 0 of 10 texts (0%), ") and lines[-1].startswith("scoring: 0 of 10 texts")


def test_terminal_gets_a_bar_and_disabled_shows_nothing():
    term = Terminal()
    with Progress("scoring", 4, unit="text", stream=term, leave=True) as p:
        assert p.mode == "bar"
        p.update(4)
    assert "scoring" in term.getvalue() and "4/4" in term.getvalue()
    # a step without a count gets lines on a terminal too (tqdm cannot animate it)
    assert Progress("statistics", stream=Terminal(), every=0).mode == "lines"
    quiet = io.StringIO()
    with Progress("scoring", 4, stream=quiet, enabled=False) as p:
        p.update(4)
    assert p.mode == "off" and quiet.getvalue() == ""


def test_timer_ends_when_its_stream_is_gone():
    # a step that raised without closing (a trainer interrupted mid-run) leaves no writer behind
    stream = io.StringIO()
    p = Progress("scoring", 10, unit="text", stream=stream, every=0.01)
    stream.close()
    p._thread.join(timeout=30)
    assert not p._thread.is_alive()
    p.close()  # and closing after is harmless
