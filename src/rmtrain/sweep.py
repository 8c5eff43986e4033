"""Matched sweeps: the grid of (model, arm, seed) runs that share data, split, budget and
selection rule, run one after another (or printed as launch commands for a cluster)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from rmtrain.config import TrainConfig
from rmtrain.io import atomic_write_json, atomic_write_text

SUMMARY_COLUMNS = ("model", "arm", "seed", "n_train_pairs", "heldout_pair_accuracy", "heldout_rmse", "score_sd")


def launch_command(cfg: TrainConfig, recipe: str, launcher: str = "rmtrain") -> str:
    """Shell command that trains one run of the sweep; launcher may be e.g.
    'accelerate launch --config_file accelerate_configs/ddp.yaml -m rmtrain.cli'."""
    args = ["train", "--config", recipe, "--arm", cfg.arm, "--seed", str(cfg.seed),
            "--model", cfg.model.name_or_path, "--output-dir", cfg.output_dir]
    return f"{launcher} " + " ".join(shlex.quote(a) for a in args)


def run_sweep(runs: list[TrainConfig], output_root: str | Path, *, force: bool = False) -> list[dict[str, Any]]:
    from rmtrain.train import train

    summaries = []
    for i, cfg in enumerate(runs, 1):
        print(f"[sweep] run {i}/{len(runs)}: arm={cfg.arm} seed={cfg.seed} model={cfg.model.name_or_path}", flush=True)
        s = train(cfg, force=force)
        print(f"[sweep]   held-out pair accuracy {s['heldout_pair_accuracy']:.3f}", flush=True)
        summaries.append(s)
        write_sweep_summary(summaries, output_root)  # after every run: an interrupted sweep keeps its table
    return summaries


def collect_summaries(output_root: str | Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(Path(output_root).glob("**/train_summary.json"))]


def summary_markdown(summaries: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(SUMMARY_COLUMNS) + " |", "|" + "---|" * len(SUMMARY_COLUMNS)]
    for s in summaries:
        cells = []
        for c in SUMMARY_COLUMNS:
            v = s.get(c)
            cells.append(f"{v:.3f}" if isinstance(v, float) else ("—" if v is None else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_sweep_summary(summaries: list[dict[str, Any]], output_root: str | Path) -> None:
    root = Path(output_root)
    rows = [{c: s.get(c) for c in SUMMARY_COLUMNS} for s in summaries]
    atomic_write_json(root / "sweep_summary.json", rows)
    atomic_write_text(root / "sweep_summary.md", "# Matched sweep\n\n" + summary_markdown(summaries))
