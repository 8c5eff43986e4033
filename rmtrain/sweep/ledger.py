"""The sweep's ledger: one JSON file per run under OUT/ledger/, each written atomically.

One file per run id means two workers (local processes, SLURM array tasks) never write the same
file, and a run can neither be duplicated nor lost: its row exists from the moment the matrix is
expanded. States: planned -> running -> done | failed | interrupted; `blocked` for seed runs whose
search stage did not finish (or left no usable setting). `done` counts only with the run's
train_summary.json on disk. A done run also has the outcome its summary records, ``status``
(ok | diverged | collapsed, ``rmtrain.train``) and ``status_reason``: only an ``ok`` run is
``usable``, i.e. selected, audited and counted in the summary's figures; a diverged one is a
result, not retried. OUT/ledger.csv is a read-only table view, rewritten by the driver."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pandas as pd

from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.runtime.checkpoints import SUMMARY_FILE

TERMINAL = ("done", "failed", "blocked")


def _file_name(run_id: str) -> str:
    return run_id.replace("/", "__") + ".json"


def usable(row: dict[str, Any] | None) -> bool:
    """A finished run whose model is usable: neither diverged nor collapsed (module doc; a row
    written before runs had a status was of a run that ended normally)."""
    return bool(row) and row.get("state") == "done" and row.get("status", "ok") == "ok"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class Ledger:
    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def path(self, run_id: str) -> Path:
        return self.root / _file_name(run_id)

    def get(self, run_id: str) -> dict[str, Any] | None:
        p = self.path(run_id)
        return json.loads(p.read_text()) if p.exists() else None

    def rows(self) -> list[dict[str, Any]]:
        if not self.root.exists():
            return []
        return [json.loads(p.read_text()) for p in sorted(self.root.glob("*.json"))]

    def put(self, row: dict[str, Any]) -> dict[str, Any]:
        atomic_write_json(self.path(row["run_id"]), row)
        return row

    def update(self, run_id: str, **changes: Any) -> dict[str, Any]:
        row = self.get(run_id)
        if row is None:
            raise KeyError(f"{self.root}: no ledger row for run {run_id}")
        row.update(changes)
        return self.put(row)

    def ensure(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The run's row, created as `planned` if the run is new."""
        row = self.get(spec["run_id"])
        if row is None:
            row = self.put({**spec, "state": "planned", "attempts": 0, "figures": {}, "error": None,
                            "audit_dir": None, "started_at": None, "finished_at": None, "seconds": None,
                            "host": None, "pid": None, "job_id": None, "reused_from": None, "fingerprint": None})
        return row

    def is_done(self, run_id: str) -> bool:
        row = self.get(run_id)
        return bool(row and row["state"] == "done" and row.get("output_dir")
                    and (Path(row["output_dir"]) / SUMMARY_FILE).exists())

    def start(self, run_id: str) -> dict[str, Any]:
        row = self.get(run_id) or {}
        job = os.environ.get("SLURM_ARRAY_JOB_ID")
        job = (f"{job}_{os.environ.get('SLURM_ARRAY_TASK_ID')}" if job
               else os.environ.get("SLURM_JOB_ID", row.get("job_id")))
        return self.update(run_id, state="running", attempts=int(row.get("attempts", 0)) + 1, started_at=now(),
                           finished_at=None, error=None, host=socket.gethostname(), pid=os.getpid(), job_id=job)

    def write_table(self, path: str | os.PathLike) -> None:
        rows = []
        for r in self.rows():
            flat = {k: v for k, v in r.items() if k not in ("figures", "setting")}
            flat["setting"] = json.dumps(r.get("setting"))
            flat.update(r.get("figures") or {})
            rows.append(flat)
        atomic_write_text(path, pd.DataFrame(rows).to_csv(index=False))


def is_alive(row: dict[str, Any]) -> bool:
    """Whether the process or SLURM job recorded in a `running` (or `submitted`) row still exists."""
    if row.get("state") not in ("running", "submitted"):
        return False
    if row.get("state") == "running" and row.get("host") == socket.gethostname() and row.get("pid"):
        if int(row["pid"]) == os.getpid():
            return False
        try:
            os.kill(int(row["pid"]), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return _not_zombie(int(row["pid"]))
    job = row.get("job_id")
    if job and shutil.which("squeue"):
        out = subprocess.run(["squeue", "-h", "-j", str(job)], capture_output=True, text=True)
        return bool(out.stdout.strip())
    return False


def _not_zombie(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True
    return fields[0] != "Z"
