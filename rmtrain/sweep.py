"""Matched sweeps: the grid of (model, arm, seed) runs that share data, split, hyper-parameter
budget and selection rule, run one after another here or printed as launch commands."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from rmtrain.config import Sweep, TrainConfig
from rmtrain.io import atomic_write_json, atomic_write_text

SUMMARY_COLUMNS = ("model", "arm", "seed", "n_train_pairs", "heldout_pair_accuracy", "heldout_rmse", "score_sd")


def launch_command(cfg: TrainConfig, recipe: str, launcher: str = "rmtrain", extra: dict[str, Any] | None = None) -> str:
    """Shell command that trains one run; launcher may be e.g.
    'accelerate launch --config_file accelerate_configs/ddp.yaml -m rmtrain.cli'."""
    args = ["train", "--config", recipe, "--arm", cfg.arm, "--seed", str(cfg.seed),
            "--model", cfg.model.name_or_path, "--output-dir", cfg.output_dir]
    for k, v in (extra or {}).items():
        args += ["--set", f"{k}={json.dumps(v)}"]  # JSON is YAML: 5e-06 stays a number
    return f"{launcher} " + " ".join(shlex.quote(a) for a in args)


def plan_commands(sweep: Sweep, recipe: str, launcher: str = "rmtrain") -> list[str]:
    """Commands for a cluster. With a search grid only the search stage can be planned; the seeds
    follow once `rmtrain sweep` (or `select_setting`) has read the search results."""
    s = sweep.settings
    if s.search:
        seed = s.search_seed if s.search_seed is not None else s.seeds[0]
        return [launch_command(sweep.run_config(m, a, seed, c, sweep.search_dir(m, a, c)), recipe, launcher, c)
                for m in sweep.models for a in s.arms for c in s.grid()]
    return [launch_command(cfg, recipe, launcher) for cfg in sweep.runs()]


def select_setting(results: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """The selection rule shared by all arms: highest pair accuracy on the selection split (the
    held-out split when the config has none), first setting on ties."""
    def acc(r: dict[str, Any]) -> float:
        return r.get("selection_pair_accuracy", r["heldout_pair_accuracy"])

    best = max(range(len(results)), key=lambda i: (acc(results[i][1]), -i))
    return results[best][0]


def run_sweep(sweep: Sweep, *, force: bool = False) -> list[dict[str, Any]]:
    from rmtrain.train import train

    s = sweep.settings
    summaries: list[dict[str, Any]] = []
    chosen: dict[str, dict[str, Any]] = {}
    for model in sweep.models:
        for arm in s.arms:
            combo: dict[str, Any] = {}
            if s.search:
                seed0 = s.search_seed if s.search_seed is not None else s.seeds[0]
                results = []
                for c in s.grid():
                    print(f"[sweep] search arm={arm} model={model} {c}", flush=True)
                    results.append((c, train(sweep.run_config(model, arm, seed0, c, sweep.search_dir(model, arm, c)),
                                             force=force)))
                combo = select_setting(results)
                chosen[f"{model}/{arm}"] = combo
                print(f"[sweep] selected for arm={arm}: {combo}", flush=True)
            for seed in s.seeds:
                print(f"[sweep] run arm={arm} seed={seed} model={model}", flush=True)
                summ = train(sweep.run_config(model, arm, seed, combo), force=force)
                summ = {**summ, "selected_setting": combo}
                print(f"[sweep]   held-out pair accuracy {summ['heldout_pair_accuracy']:.3f}", flush=True)
                summaries.append(summ)
                write_sweep_summary(summaries, s.output_root, chosen)  # interrupted sweeps keep their table
    return summaries


def summary_markdown(summaries: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(SUMMARY_COLUMNS) + " |", "|" + "---|" * len(SUMMARY_COLUMNS)]
    for s in summaries:
        cells = []
        for c in SUMMARY_COLUMNS:
            v = s.get(c)
            cells.append(f"{v:.3f}" if isinstance(v, float) else ("—" if v is None else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_sweep_summary(summaries: list[dict[str, Any]], output_root: str | Path,
                        chosen: dict[str, dict[str, Any]] | None = None) -> None:
    root = Path(output_root)
    rows = [{c: s.get(c) for c in SUMMARY_COLUMNS} for s in summaries]
    atomic_write_json(root / "sweep_summary.json", {"runs": rows, "selected_settings": chosen or {}})
    text = "# Matched sweep\n\n" + summary_markdown(summaries)
    if chosen:
        text += "\n## Selected settings (search stage)\n\n" + "\n".join(f"- {k}: {v}" for k, v in chosen.items()) + "\n"
    atomic_write_text(root / "sweep_summary.md", text)
