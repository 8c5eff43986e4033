"""Where a sweep's runs execute. Every executor takes run ids, blocks until they have ended, and
leaves each outcome in the ledger (a run that died without writing one is recorded as failed).

- `LocalExecutor`: this machine; one run at a time in this process, or N worker processes at once
  (each on its own GPU when there are enough).
- `SubmititExecutor`: a SLURM job array through submitit, one run per task, each task an
  `accelerate launch` with a config from accelerate_configs/; with cluster="local", submitit's local
  executor runs the same tasks as local processes (what the tests use).

Final audits (``audit``) are jobs of their own, after training: a process each on this machine (at
most ``max_parallel`` at once, each on its own GPU or GPUs), or one SLURM job array ("rmtrain-audit")
whose tasks take ``sweep.audit.num_processes`` GPUs each; a task of several processes is an
``accelerate launch`` whose processes share the checkpoint's scoring. Each writes the run's
final_audit/audit.json; the driver reads it back."""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.runtime.jobs import launch_command, submitit_executor
from rmtrain.config import SweepSlurmSettings
from rmtrain.sweep.ledger import TERMINAL, Ledger, now
from rmtrain.sweep.worker import run_one

log = logging.getLogger(__name__)


def audit_command(out: Path, run_id: str, num_processes: int = 1) -> tuple[list[str], dict[str, str]]:
    """(command, environment additions) of a run's final audit: one process, or ``num_processes``
    under accelerate launch sharing the scoring."""
    args = ["rmtrain.sweep.worker", str(out), run_id, "--audit"]
    if num_processes == 1:
        return [sys.executable, "-m", *args], {}
    return launch_command(num_processes, args)


def worker_command(out: Path, run_id: str, *, accelerate_config: str | None = None,
                   force: bool = False) -> list[str]:
    args = ["-m", "rmtrain.sweep.worker", str(out), run_id] + (["--force"] if force else [])
    if accelerate_config:
        cfg = Path(accelerate_config)
        if not cfg.is_file():
            raise ConfigError(f"accelerate config {accelerate_config} not found (paths are relative to the "
                              "directory rmtrain sweep runs from)")
        return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(cfg.resolve()), *args]
    return [sys.executable, *args]


def display_command(cmd: list[str]) -> str:
    text = shlex.join(cmd)
    return text.replace(f"{shlex.quote(sys.executable)} -m accelerate.commands.launch", "accelerate launch")


def _record_lost(ledger: Ledger, run_id: str, why: str) -> None:
    """A worker that ended without recording its outcome (killed, out of memory) is a failed run."""
    row = ledger.get(run_id)
    if row is not None and row["state"] not in TERMINAL:
        ledger.update(run_id, state="failed", error=why[:500], finished_at=now())


def _set_pdeathsig() -> None:
    # Linux: the worker gets SIGTERM when the driver dies, so a killed sweep leaves no orphan
    # training in a directory the next `rmtrain sweep` will resume.
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class LocalExecutor:
    def __init__(self, out: Path, *, max_parallel: int = 1, force: bool = False, audit_processes: int = 1) -> None:
        if max_parallel < 1:
            raise ConfigError(f"--max-parallel must be >= 1, got {max_parallel}")
        self.out, self.max_parallel, self.force = Path(out), max_parallel, force
        self.audit_processes = audit_processes
        self.ledger = Ledger(self.out / "ledger")

    def describe_audits(self, run_ids: list[str]) -> list[str]:
        return [display_command(audit_command(self.out, r, self.audit_processes)[0]) for r in run_ids]

    def audit(self, run_ids: list[str], on_end: Any = None) -> None:
        """Each run's final audit as a process of its own (``max_parallel`` at once)."""
        self._run_processes(run_ids, on_end, audit=True)

    def describe(self, run_ids: list[str]) -> list[str]:
        return [display_command(worker_command(self.out, r, force=self.force)) for r in run_ids]

    def run(self, run_ids: list[str], on_end: Any = None) -> None:
        if self.max_parallel == 1:
            for rid in run_ids:  # in this process: no second start-up of torch per run
                run_one(self.out, rid, force=self.force)
                if on_end:
                    on_end(rid)
            return
        self._run_processes(run_ids, on_end)

    def _devices(self, per_task: int = 1) -> list[str | None]:
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = visible.split(",") if visible else [str(i) for i in range(n)]
        # per_task GPUs per slot where there are enough; otherwise the slots share what there is
        if len(ids) >= self.max_parallel * per_task:
            return [",".join(ids[i * per_task:(i + 1) * per_task]) for i in range(self.max_parallel)]
        if per_task > 1 and len(ids) >= per_task:  # one multi-GPU task at a time
            return [",".join(ids[:per_task])]
        return [None] * self.max_parallel

    def _run_processes(self, run_ids: list[str], on_end: Any, audit: bool = False) -> None:
        logs = self.out / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        per_task = self.audit_processes if audit else 1
        queue, free = list(run_ids), self._devices(per_task)
        running: dict[str, tuple[subprocess.Popen, Any, str | None]] = {}
        try:
            while queue or running:
                while queue and free:
                    rid, dev = queue.pop(0), free.pop(0)
                    env = dict(os.environ)
                    # N workers on one machine: split the cores rather than each taking them all
                    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // self.max_parallel)))
                    if dev is not None:
                        env["CUDA_VISIBLE_DEVICES"] = dev
                    if audit:
                        cmd, extra = audit_command(self.out, rid, self.audit_processes)
                        env.update(extra)
                    else:
                        cmd = worker_command(self.out, rid, force=self.force)
                    fh = open(logs / (rid.replace("/", "__") + (".audit.log" if audit else ".log")), "a")
                    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                            preexec_fn=_set_pdeathsig)
                    running[rid] = (proc, fh, dev)
                time.sleep(0.5)
                for rid, (proc, fh, dev) in list(running.items()):
                    if proc.poll() is None:
                        continue
                    fh.close()
                    del running[rid]
                    free.append(dev)
                    if not audit:  # an audit that died leaves no audit.json: the driver records that
                        _record_lost(self.ledger, rid, f"worker exited with code {proc.returncode} without "
                                                       f"recording a result; log: {fh.name}")
                    if on_end:
                        on_end(rid)
        finally:
            for proc, _fh, _ in running.values():  # the driver was interrupted: stop its workers
                proc.terminate()
            for proc, fh, _ in running.values():
                proc.wait()
                fh.close()


class SubmititExecutor:
    def __init__(self, out: Path, settings: SweepSlurmSettings, *, cluster: str = "slurm", force: bool = False,
                 audit_processes: int = 1) -> None:
        self.out, self.settings, self.cluster, self.force = Path(out), settings, cluster, force
        self.audit_processes = audit_processes
        self.ledger = Ledger(self.out / "ledger")

    def describe_audits(self, run_ids: list[str]) -> list[str]:
        return [display_command(audit_command(self.out, r, self.audit_processes)[0]) for r in run_ids]

    def audit(self, run_ids: list[str], on_end: Any = None) -> None:
        """The final audits as one job array ("rmtrain-audit"), ``audit_processes`` GPUs per task
        (none where the training tasks take none)."""
        if not run_ids:
            return
        from submitit.helpers import CommandFunction

        gpus = self.audit_processes if self.settings.gpus_per_node else 0
        ex = self.executor("rmtrain-audit", gpus_per_node=gpus)
        fns = []
        for rid in run_ids:
            cmd, env = audit_command(self.out, rid, self.audit_processes)
            fns.append(CommandFunction(cmd, cwd=os.getcwd(), env={**os.environ, **env}, verbose=True))
        jobs = ex.submit_array(fns)
        log.info("submitted %d final audits as job array %s", len(jobs), jobs[0].job_id.split("_")[0])
        for rid, job in zip(run_ids, jobs):
            try:
                job.result()
            except Exception as e:  # the driver finds no audit.json and records the failure
                log.error("final audit of %s (job %s) failed: %s", rid, job.job_id, str(e).strip().splitlines()[-1:])
            if on_end:
                on_end(rid)

    def commands(self, run_ids: list[str]) -> list[list[str]]:
        return [worker_command(self.out, r, accelerate_config=self.settings.accelerate_config, force=self.force)
                for r in run_ids]

    def describe(self, run_ids: list[str]) -> list[str]:
        return [display_command(c) for c in self.commands(run_ids)]

    def array_summary(self, n: int) -> str:
        s = self.settings
        return (f"one job array of {n} tasks (partition {s.partition or 'default'}, {s.gpus_per_node} GPU, "
                f"{s.cpus_per_task} CPUs, {s.mem_gb:g} GB, {s.timeout_min} min per task, at most "
                f"{min(n, s.array_parallelism)} at once)")

    def executor(self, name: str, gpus_per_node: int | None = None) -> Any:
        s = self.settings
        gpus = s.gpus_per_node if gpus_per_node is None else gpus_per_node
        params: dict[str, Any] = {"name": name, "timeout_min": s.timeout_min, "gpus_per_node": gpus,
                                  "cpus_per_task": s.cpus_per_task, "mem_gb": s.mem_gb,
                                  "slurm_array_parallelism": s.array_parallelism}
        if s.partition:
            params["slurm_partition"] = s.partition
        if s.additional_parameters:
            params["slurm_additional_parameters"] = dict(s.additional_parameters)
        if s.setup:
            params["slurm_setup"] = list(s.setup)
            params["local_setup"] = list(s.setup)
        return submitit_executor("slurm", self.out / "submitit", cluster=self.cluster, **params)

    def run(self, run_ids: list[str], on_end: Any = None, name: str = "rmtrain-sweep") -> None:
        if not run_ids:
            return
        from submitit.helpers import CommandFunction

        ex = self.executor(name)
        fns = [CommandFunction(c, cwd=os.getcwd(), verbose=True) for c in self.commands(run_ids)]
        jobs = ex.submit_array(fns)  # one SLURM job array, one run per task
        for rid, job in zip(run_ids, jobs):
            row = self.ledger.get(rid) or {}
            if row.get("state") not in ("running", "done"):  # the task may already have started
                self.ledger.update(rid, job_id=str(job.job_id), state="submitted")
        log.info("submitted %d runs as job array %s", len(jobs), jobs[0].job_id.split("_")[0])
        for rid, job in zip(run_ids, jobs):
            try:
                job.result()
            except Exception as e:  # the task's own failure is in the ledger; this covers lost tasks
                _record_lost(self.ledger, rid, f"job {job.job_id} failed without recording a result: "
                                               f"{str(e).strip().splitlines()[-1] if str(e).strip() else e}")
            else:
                _record_lost(self.ledger, rid, f"job {job.job_id} ended without recording a result")
            if on_end:
                on_end(rid)
