"""The two steps of a task script that serves its own judge (``rmeval.reproduce.cluster.task_script``)::

    python -m rmeval.reproduce.serve free-port
    python -m rmeval.reproduce.serve wait http://127.0.0.1:PORT --model NAME --pid PID --timeout-min M --log LOG

``free-port`` prints a loopback TCP port nobody listens on (two tasks on one node never share a
port). ``wait`` polls the server's ``GET /health`` every second until it answers 200
(``rmcore.runtime.jobs.wait_for_health``), then checks that ``GET /v1/models`` lists the served model, and
exits 0; if the server's process ends first, or the time runs out, it prints one line and the
last lines of the server's log, and exits 1 (the script's trap then stops the server). Each step's
flags are the fields of its settings (:class:`FreePortCommand`, :class:`WaitCommand`), as every
command's are."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from rmcore.errors import ConfigError
from rmcore.runtime.jobs import wait_for_health
from rmcore.settings.commands import add_command, read_settings
from rmcore.settings.fields import Parser, option

PROG = "rmeval.reproduce.serve"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped by its shell, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def served_models(base: str) -> list[str]:
    with urllib.request.urlopen(base.rstrip("/") + "/v1/models", timeout=30) as r:
        return [m.get("id") for m in json.loads(r.read()).get("data", [])]


def wait(base: str, model: str, pid: int, timeout_min: float, log: str | None = None) -> None:
    """Wait for the server at ``base`` (module docstring); a ConfigError says why it is not there."""
    try:
        wait_for_health(base.rstrip("/") + "/health", lambda: process_alive(pid), timeout_min * 60,
                        f"the judge server of {model} (pid {pid})")
        names = served_models(base)
    except (ConfigError, OSError, ValueError) as e:
        raise ConfigError(f"{e}{_tail(log)}") from None
    if model not in names:
        raise ConfigError(f"the judge server at {base} serves {names}, not {model}")


def _tail(log: str | None, n: int = 20) -> str:
    if not log or not Path(log).is_file():
        return ""
    lines = Path(log).read_text(errors="replace").splitlines()[-n:]
    return f"; the last lines of {log}:\n" + "\n".join(lines) if lines else ""


@dataclass
class FreePortCommand:
    """``free-port`` takes no flags."""


@dataclass
class WaitCommand:
    """``wait``'s settings: the server and how long it may take to answer."""

    base: str = option(positional=True, help="the server's address, http://127.0.0.1:PORT")
    model: str = option(required=True, help="the served model's name")
    pid: int = option(required=True, ge=1, help="the server's process")
    timeout_min: float = option(required=True, gt=0, help="minutes the server may take to answer")
    log: str | None = option(None, help="the server's log (its tail is printed on failure)")


def _free_port(_: FreePortCommand) -> int:
    print(free_port())
    return 0


def _wait(a: WaitCommand) -> int:
    wait(a.base, a.model, a.pid, a.timeout_min, a.log)
    print(f"the judge server of {a.model} answers at {a.base}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG)
    sub = p.add_subparsers(dest="step", required=True)
    add_command(sub, "free-port", FreePortCommand, _free_port)
    add_command(sub, "wait", WaitCommand, _wait)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(read_settings(args.settings, args))
    except ConfigError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
