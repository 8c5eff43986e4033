"""Time of ``rmeval stats`` (the audit's statistics from tables, ``rmeval.audit.pipeline.audit_tables``) and of
its ``variance_explained`` section, part by part, on an audit directory and on larger audits
synthesised from it.

A larger audit: the directory's prompts tiled into copies (new prompt and response ids, donors and
first-turn groups kept within a copy) with small noise on the scores and features, so the learners
see no exact duplicates; its ratings, prompts and feature tables are the directory's. Nothing is
scored, so it takes seconds to build. Resamples: the audit's own (``meta.n_boot``) unless given.
Times are wall and CPU (user + system, all threads, this process and its worker processes); the
machine's load moves them.

    .venv/bin/python scripts/bench_stats.py --audit AUDIT_DIR --prompts 400,2000
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

TABLES = ("scores", "ratings", "preferences", "prompts", "features", "prompt_features")


def scaled_audit(src: Path, n_prompts: int, out: Path, seed: int = 0) -> Path:
    """The tables of ``src`` tiled to ``n_prompts`` prompts (module doc), written to ``out``."""
    t = {n: pd.read_parquet(src / f"{n}.parquet") for n in TABLES if (src / f"{n}.parquet").is_file()}
    base = list(pd.unique(t["scores"]["prompt_id"].astype(str)))
    if n_prompts < len(base):
        raise SystemExit(f"--prompts {n_prompts}: the audit already has {len(base)} prompts")
    rng = np.random.default_rng(seed)
    n_copies = -(-n_prompts // len(base))
    last = {p for p in base[: n_prompts - (n_copies - 1) * len(base)]}  # the prompts of the last copy
    sd = float(t["scores"]["score"].std())
    out.mkdir(parents=True, exist_ok=True)
    for name, table in t.items():
        parts = []
        for c in range(n_copies):
            part = table[table["prompt_id"].astype(str).isin(last if c == n_copies - 1 else base)].copy()
            tag = f"c{c}:"
            for col in ("prompt_id", "response_id", "chosen_id", "rejected_id"):
                if col in part.columns:
                    part[col] = tag + part[col].astype(str)
            if "donor_prompt_id" in part.columns:
                d = part["donor_prompt_id"]
                # a donor outside the last (partial) copy is taken from the first copy
                own = d.astype(str).isin(last) | (c < n_copies - 1)
                part["donor_prompt_id"] = np.where(d.isna(), None,
                                                   np.where(own, tag, "c0:") + d.astype(str))
            if name == "scores" and c:
                part["score"] += rng.normal(0.0, 0.05 * sd, len(part))
            if name == "prompts" and "first_turn_group" in part.columns:
                part["first_turn_group"] += c * (int(table["first_turn_group"].max()) + 1)
            if name in ("features", "prompt_features") and c:
                num = [k for k in part.columns if k not in ("prompt_id", "response_id")]
                x = part[num].to_numpy(float)
                part[num] = (x + rng.normal(0.0, 0.05, x.shape) * x.std(axis=0)).astype(part[num].dtypes.iloc[0])
            parts.append(part)
        pd.concat(parts, ignore_index=True).to_parquet(out / f"{name}.parquet")
    return out


def cpu_seconds() -> float:
    """CPU (user + system) of this process and its children: live ones (the probes' worker
    processes, through psutil where installed) and those already waited for."""
    t = os.times()
    total = time.process_time() + t.children_user + t.children_system
    try:
        import psutil
    except ImportError:
        return total
    for child in psutil.Process().children(recursive=True):
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.Error:
            pass
    return total


class Timer:
    """Wall and CPU seconds of named calls, nested calls counted in their own row as well."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.order: list[str] = []

    def wrap(self, fn: Callable[..., Any], name: Callable[..., str] | str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            label = name(*args, **kwargs) if callable(name) else name
            if label not in self.order:
                self.order.append(label)
            t0, c0 = time.perf_counter(), cpu_seconds()
            try:
                return fn(*args, **kwargs)
            finally:
                self.wall[label] += time.perf_counter() - t0
                self.cpu[label] += cpu_seconds() - c0
        return timed


def default_jobs() -> int:
    """The probes' worker processes the installed code would use (1: code without workers)."""
    from rmeval.stats import probes

    return probes.default_jobs() if hasattr(probes, "default_jobs") else 1


@contextmanager
def patched(timer: Timer, jobs: int) -> Iterator[None]:
    """Time the parts of ``variance_explained`` through their names in ``rmeval.stats.explain`` and
    ``rmeval.stats.probes`` (those the installed code has), so the same script times the code before
    and after a change; the fits of one learner are timed one by one where they run in this process
    (``jobs`` 1), else together. Sets the probes' worker processes to ``jobs``."""
    from rmeval.stats import explain, probes

    def learner(name: str, *a: Any, **k: Any) -> str:
        return f"    crossfit {name}"

    targets: list[tuple[Any, str, Callable[..., str] | str]] = [
        (explain, "variance_explained", "variance_explained"), (explain, "calibrated", "  calibrated"),
        (explain, "rating_residuals", "  rating_residuals"), (explain, "response_probes", "  response_probes"),
        (explain, "prompt_probe", "  prompt_probe"), (explain, "crossed_decomposition", "  crossed"),
        (explain, "in_sample_predict", lambda name, *a, **k: f"    in-sample {name}")]
    if not hasattr(probes, "_fold_predict"):  # code before the worker processes: one call per learner
        targets.append((explain, "crossfit_predict", learner))
    elif jobs == 1:  # every cross-fitted fit goes through _fold_predict
        targets.append((probes, "_fold_predict", learner))
    else:
        targets.append((explain, "crossfit_predictions",
                        lambda names, *a, **k: f"    crossfit {'+'.join(names)} ({jobs} workers)"))
    saved = [(mod, attr, getattr(mod, attr)) for mod, attr, _ in targets if hasattr(mod, attr)]
    try:
        for mod, attr, label in targets:
            if hasattr(mod, attr):
                setattr(mod, attr, timer.wrap(getattr(mod, attr), label))
        if hasattr(probes, "default_jobs"):
            saved.append((probes, "default_jobs", probes.default_jobs))
            probes.default_jobs = lambda: jobs
        yield
    finally:
        for mod, attr, fn in saved:
            setattr(mod, attr, fn)


def run_stats(folder: Path, n_boot: int, n_boot_regression: int, learners: list[str] | None, jobs: int
              ) -> tuple[Timer, dict[str, Any]]:
    """``rmeval stats`` on ``folder`` (W&B off), timed as a whole and by part."""
    from rmeval.audit.pipeline import audit_tables
    from rmeval.audit.settings import AuditSettings, FeatureSettings
    from rmeval.stats.settings import StatsSettings

    timer = Timer()
    settings = AuditSettings(stats=StatsSettings(n_boot=n_boot, n_boot_regression=n_boot_regression, seed=0),
                             features=FeatureSettings(learners=learners) if learners else None)
    with tempfile.TemporaryDirectory() as out, patched(timer, jobs):
        t0, c0 = time.perf_counter(), cpu_seconds()
        result, _ = audit_tables(folder / "scores.parquet", folder / "ratings.parquet", settings, out,
                                 wandb_mode="disabled")
        timer.wall["rmeval stats (whole)"] = time.perf_counter() - t0
        timer.cpu["rmeval stats (whole)"] = cpu_seconds() - c0
    return timer, result


def report(label: str, timer: Timer, result: dict[str, Any]) -> None:
    meta = result["meta"]
    print(f"\n{label}: {meta['n_prompts']} prompts, {meta['n_responses']} responses, n_boot {meta['n_boot']}")
    whole = timer.wall["rmeval stats (whole)"]
    print(f"  {'part':34s} {'wall s':>8s} {'cpu s':>8s} {'of whole':>9s}")
    for name in ["rmeval stats (whole)", *timer.order]:
        print(f"  {name:34s} {timer.wall[name]:8.2f} {timer.cpu[name]:8.2f} {timer.wall[name] / whole:8.0%}")


def keep(folder: Path | None, name: str, result: dict[str, Any]) -> None:
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--audit", required=True, type=Path, help="an audit directory (scores, ratings, feature tables)")
    ap.add_argument("--prompts", default="", help="sizes of synthesised audits, comma-separated (e.g. 400,2000)")
    ap.add_argument("--n-boot", type=int, default=None, help="default: the audit's meta.n_boot, else 2000")
    ap.add_argument("--n-boot-regression", type=int, default=None)
    ap.add_argument("--learners", default=None, help="response probes' learners, comma-separated (default all)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="the probes' worker processes (default: the code's own choice, the process's CPUs)")
    ap.add_argument("--keep", type=Path, default=None, help="write each audit.json here (NAME.json)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    meta = {}
    if (args.audit / "audit.json").is_file():
        meta = json.loads((args.audit / "audit.json").read_text()).get("meta", {})
    n_boot = args.n_boot or int(meta.get("n_boot", 2000))
    n_reg = args.n_boot_regression or int(meta.get("n_boot_regression", 5000))
    threads = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS") if os.environ.get(k)}
    jobs = args.jobs or default_jobs()
    print(f"CPUs: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}; thread settings {threads or 'none'}; "
          f"probe workers {jobs}")
    learners = args.learners.split(",") if args.learners else None
    figures = {}
    timer, result = run_stats(args.audit, n_boot, n_reg, learners, jobs)
    report(str(args.audit), timer, result)
    keep(args.keep, "audit", result)
    figures[str(args.audit)] = {"wall": dict(timer.wall), "cpu": dict(timer.cpu)}
    for n in [int(x) for x in args.prompts.split(",") if x]:
        with tempfile.TemporaryDirectory() as tmp:
            folder = scaled_audit(args.audit, n, Path(tmp))
            timer, result = run_stats(folder, n_boot, n_reg, learners, jobs)
        report(f"synthesised, {n} prompts", timer, result)
        keep(args.keep, f"prompts{n}", result)
        figures[f"{n} prompts"] = {"wall": dict(timer.wall), "cpu": dict(timer.cpu)}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
