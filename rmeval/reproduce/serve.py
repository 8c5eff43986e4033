"""The two steps of a task script that serves its own judge (``rmeval.reproduce.cluster.task_script``)::

    python -m rmeval.reproduce.serve free-port
    python -m rmeval.reproduce.serve wait http://127.0.0.1:PORT --model NAME --pid PID --timeout-min M --log LOG

``free-port`` prints a loopback TCP port nobody listens on (two tasks on one node never share a
port). ``wait`` polls the server's ``GET /health`` every second until it answers 200
(``rmcore.jobs.wait_for_health``), then checks that ``GET /v1/models`` lists the served model, and
exits 0; if the server's process ends first, or the time runs out, it prints one line and the
last lines of the server's log, and exits 1 (the script's trap then stops the server)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import urllib.request
from pathlib import Path

from rmcore.errors import ConfigError
from rmcore.jobs import wait_for_health


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rmeval.reproduce.serve")
    sub = p.add_subparsers(dest="step", required=True)
    sub.add_parser("free-port")
    w = sub.add_parser("wait")
    w.add_argument("base", help="the server's address, http://127.0.0.1:PORT")
    w.add_argument("--model", required=True, help="the served model's name")
    w.add_argument("--pid", type=int, required=True, help="the server's process")
    w.add_argument("--timeout-min", type=float, required=True)
    w.add_argument("--log", default=None, help="the server's log (its tail is printed on failure)")
    a = p.parse_args(argv)
    if a.step == "free-port":
        print(free_port())
        return 0
    try:
        wait(a.base, a.model, a.pid, a.timeout_min, a.log)
    except ConfigError as e:
        print(f"rmeval.reproduce.serve: {e}", file=sys.stderr)
        return 1
    print(f"the judge server of {a.model} answers at {a.base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
