"""Cost of ``rmeval judges analyze`` and ``reweight`` at scale, up to JudgeProfile's published panel
(50,013 items x 21 judges x 87 attributes + the verdict x 2 orders = 185 million judgments).

For each size: a simulated panel (``rmeval.judges.simulate.simulate_benchmark``: planted priorities,
17 sources, reference labels) written as a judgment store and an items table, then the analysis
(every section of ``analysis.json``, default settings: 20 split-half splits, 20 null repeats) and
the reweighting (default budgets 32-256, 10 repeats, top-k 6 and 12), each through the same
pipeline call as the CLI (``rmeval.judges.pipeline``; W&B disabled). Each step runs in its own
process; for each: wall time, CPU time (user + system of the step's process and its workers) and
peak RSS (sampled every 0.2 s, summed over the step's process and its workers: shared pages
counted once per process, so an upper bound). The growth exponent b of wall time ~ size^b is the
least-squares slope of log time on log items (at fixed judges) and on log judges (at fixed
items), where three or more sizes share the other dimension.

    python scripts/bench_judges_scale.py --items 50013 --judges 21 --attributes 87
    python scripts/bench_judges_scale.py --sizes 2000x21,10000x21,50013x21,10000x5,10000x10
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("simulate", "analyze", "reweight")


def run_step(step: str, d: Path, n_items: int, n_judges: int, n_attributes: int, jobs: int | None) -> None:
    """One step, in this process (the child of ``measure``)."""
    if step == "simulate":
        from rmeval.judges.simulate import simulate_benchmark
        from rmeval.judges.store import write_store

        items, store = simulate_benchmark(n_items, n_judges, n_attributes, seed=0)
        write_store(d / "judgments", store)
        items.to_parquet(d / "items.parquet", index=False)
    elif step == "analyze":
        from rmeval.judges.pipeline import analyze_judgments
        from rmeval.judges.settings import AnalysisSettings

        analyze_judgments(d / "judgments", d / "analysis", items=d / "items.parquet",
                          settings=AnalysisSettings(jobs=jobs), wandb_mode="disabled")
    elif step == "reweight":
        from rmeval.judges.pipeline import reweight_judgments

        reweight_judgments(d / "judgments", d / "items.parquet", d / "reweight", jobs=jobs, wandb_mode="disabled")
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)  # the workers' CPU time is counted once they are waited for


def measure(cmd: list[str], timeout: float | None = None) -> dict[str, float]:
    """Wall time, CPU time and peak summed RSS of ``cmd`` and its descendants; past ``timeout``
    seconds the process tree is stopped and ``timed_out`` set (the figures then say "at least")."""
    import psutil

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"})
    peak, cpu_live = 0, {}
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        p = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                tree = [p, *p.children(recursive=True)]
                rss = 0
                for q in tree:
                    try:
                        rss += q.memory_info().rss
                        t = q.cpu_times()
                        cpu_live[q.pid] = t.user + t.system
                    except psutil.Error:
                        pass
                peak = max(peak, rss)
            except psutil.Error:
                pass
            done.wait(0.2)

    before = os.times()
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    timed_out = False
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        for q in [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]:
            try:
                t = q.cpu_times()
                cpu_live[q.pid] = t.user + t.system
                q.kill()
            except psutil.Error:
                pass
        rc = proc.wait()
    done.set()
    th.join()
    after = os.times()
    if rc and not timed_out:
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {rc}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if timed_out:  # killed processes were not waited for normally: their last sampled CPU
        cpu = max(cpu, sum(cpu_live.values()))
    return {"wall": time.perf_counter() - t0, "cpu": cpu, "rss_gb": peak / 2**30, "timed_out": timed_out}


def fit_exponent(sizes: list[float], times: list[float]) -> float:
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])


def growth_exponents(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per step (and analyze + reweight), the exponents of wall and CPU time in items at fixed
    judges and in judges at fixed items, where three or more sizes share the other dimension."""
    steps = {}
    for r in rows:
        steps.setdefault((r["step"], r["items"], r["judges"]), r)
        if r["step"] in ("analyze", "reweight"):
            both = steps.setdefault(("analyze + reweight", r["items"], r["judges"]),
                                    {"step": "analyze + reweight", "items": r["items"], "judges": r["judges"],
                                     "wall": 0.0, "cpu": 0.0})
            both["wall"] += r["wall"]
            both["cpu"] += r["cpu"]
    exps: dict[str, dict[str, float]] = {}
    for step in ("analyze", "reweight", "analyze + reweight"):
        r = [x for (s, _, _), x in steps.items() if s == step]
        for dim, other in (("items", "judges"), ("judges", "items")):
            for fixed in sorted({x[other] for x in r}):
                grp = sorted((x[dim], x["wall"], x["cpu"]) for x in r if x[other] == fixed)
                if len(grp) >= 3:
                    size, wall, cpu = zip(*grp)
                    exps[f"{step}, {dim} ({other} {fixed})"] = {"wall": fit_exponent(size, wall),
                                                                "cpu": fit_exponent(size, cpu)}
    return exps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", default="2000", help="items per size (comma-separated: one size each)")
    ap.add_argument("--judges", default="21", help="judges (comma-separated; every items x judges pair is a size)")
    ap.add_argument("--sizes", default=None, help="explicit sizes ITEMSxJUDGES, comma-separated (replaces the above)")
    ap.add_argument("--attributes", type=int, default=87)
    ap.add_argument("--jobs", type=int, default=None, help="worker processes for the fits (default: the CPUs)")
    ap.add_argument("--keep", default=None, help="keep the panels and outputs under this directory")
    ap.add_argument("--json", default=None, help="write the figures here as well")
    ap.add_argument("--step", default=None, help=argparse.SUPPRESS)  # internal: run one step in this process
    ap.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sizes:
        sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    else:
        sizes = [(int(i), int(j)) for i in args.items.split(",") for j in args.judges.split(",")]
    if args.step:
        n_i, n_j = sizes[0]
        run_step(args.step, Path(args.dir), n_i, n_j, args.attributes, args.jobs)
        return

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_judges_scale."))
    rows: list[dict[str, Any]] = []
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs", flush=True)
    for n_i, n_j in sizes:
        d = base / f"{n_i}x{n_j}x{args.attributes}"
        d.mkdir(parents=True, exist_ok=True)
        n_judgments = n_i * n_j * (args.attributes + 1) * 2
        for step in STEPS:
            cmd = [sys.executable, __file__, "--step", step, "--dir", str(d), "--sizes", f"{n_i}x{n_j}",
                   "--attributes", str(args.attributes)] + (["--jobs", str(args.jobs)] if args.jobs else [])
            m = measure(cmd)
            rows.append({"items": n_i, "judges": n_j, "attributes": args.attributes, "judgments": n_judgments,
                         "step": step, **m, "load": os.getloadavg()[0]})
            print(f"{n_i:>6} items x {n_j:>2} judges x {args.attributes} attributes "
                  f"({n_judgments / 1e6:6.1f}M judgments) "
                  f"{step:<9} wall {m['wall']:7.1f} s  CPU {m['cpu']:7.1f} s  peak RSS {m['rss_gb']:5.2f} GB  "
                  f"(load {rows[-1]['load']:.2f})", flush=True)
        both = [r for r in rows[-2:]]
        print(f"{'':>51} analyze + reweight: wall {sum(r['wall'] for r in both):7.1f} s  CPU "
              f"{sum(r['cpu'] for r in both):7.1f} s  peak RSS {max(r['rss_gb'] for r in both):5.2f} GB", flush=True)
    exps = growth_exponents(rows)
    for k, v in exps.items():
        print(f"growth exponent in {k}: wall {v['wall']:.2f}, CPU {v['cpu']:.2f}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "exponents": exps}, indent=1))
    if not args.keep:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
