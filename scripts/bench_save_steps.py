"""What periodic checkpoints cost a demo run, and that they change nothing it trains.

Runs ``rmtrain train --config RECIPE --arm ARM --seed SEED`` as a user runs it (a process of its
own, ``WANDB_MODE=offline``), without checkpoints and with ``--set training.save_steps=N`` for each
N given, alternating them ``--repeats`` times (a shared machine's load then falls on both alike).
Prints per run: wall seconds, the process's CPU seconds (user + system: steadier than wall time
when other jobs share the machine), the checkpoints' count and size on disk; then whether each run
with checkpoints ended with byte-identical weights (``model.safetensors``), held-out scores
(``heldout_scores.parquet``'s score column, exactly) and summary figures (``train_summary.json``
without its timing and ``resumed_from``) to the run without.

Run: .venv/bin/python scripts/bench_save_steps.py [--recipe recipes/demo.yaml] [--arm bradley_terry]
     [--seed 1] [--save-steps 5 10] [--repeats 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TIMING = ("train_seconds", "resumed_from")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default=str(ROOT / "recipes" / "demo.yaml"))
    ap.add_argument("--arm", default="bradley_terry")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--save-steps", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=None, help="where the runs go (default: a temporary folder, removed)")
    return ap.parse_args()


def run_once(args: argparse.Namespace, out: Path, save_steps: int | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "rmtrain.cli", "train", "--config", args.recipe, "--arm", args.arm, "--seed",
           str(args.seed), "--out", str(out)]
    if save_steps:
        cmd += ["--set", f"training.save_steps={save_steps}"]
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "TOKENIZERS_PARALLELISM": "false"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    ckpts = sorted(out.glob("checkpoint-*"))
    size = sum(f.stat().st_size for c in ckpts for f in c.rglob("*") if f.is_file())
    return {"save_steps": save_steps, "wall_s": wall,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "checkpoints": [c.name for c in ckpts], "checkpoint_mb": size / 2**20}


def fingerprint(out: Path) -> dict[str, Any]:
    """What the run trained: the weights' bytes, the held-out scores, the summary's figures."""
    import pandas as pd

    summary = json.loads((out / "train_summary.json").read_text())
    return {"weights": hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest(),
            "scores": pd.read_parquet(out / "heldout_scores.parquet")["score"].tolist(),
            "summary": {k: v for k, v in summary.items() if k not in TIMING}}


def main() -> None:
    args = parse_args()
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_save_steps-"))
    plan = [None, *args.save_steps]
    rows, prints = [], {}
    try:
        for rep in range(args.repeats):
            for n in plan:
                out = root / f"save{n or 0}-rep{rep}"
                shutil.rmtree(out, ignore_errors=True)
                row = run_once(args, out, n)
                rows.append(row)
                prints.setdefault(n, fingerprint(out))
                print(f"save_steps={n or 'none':>4} rep {rep}: wall {row['wall_s']:.1f} s, cpu {row['cpu_s']:.1f} s, "
                      f"checkpoints {row['checkpoints'] or '-'} ({row['checkpoint_mb']:.0f} MiB)", flush=True)
        print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
              f"{args.recipe} --arm {args.arm} --seed {args.seed}, {args.repeats} runs each:")
        base = prints[None]
        for n in plan:
            mine = [r for r in rows if r["save_steps"] == n]
            wall = sum(r["wall_s"] for r in mine) / len(mine)
            cpu = sum(r["cpu_s"] for r in mine) / len(mine)
            same = ("" if n is None else "; weights, held-out scores and summary figures identical to no checkpoints: "
                    + ", ".join(f"{k} {'yes' if prints[n][k] == base[k] else 'NO'}" for k in base))
            print(f"  save_steps={n or 'none'}: mean wall {wall:.1f} s, mean cpu {cpu:.1f} s, "
                  f"{mine[0]['checkpoint_mb']:.0f} MiB of checkpoints kept{same}")
    finally:
        if not args.out:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
