"""Recipe -> run matrix: arms x models x seeds, with the search stage's grid.

Equal budgets: every (model, arm) gets the same grid of settings, each tried at `search_seed`; the
setting chosen by the same rule on the selection split is then trained at every seed, and the
search run whose seed and setting match is reused, not retrained."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from rmcore.io.markdown import table
from rmtrain.config import Sweep, TrainConfig, short_model_name
from rmtrain.rundir import comparable, config_dict

SEARCH, SEED = "search", "seed"


@dataclasses.dataclass
class RunSpec:
    run_id: str
    stage: str  # search | seed
    model: str
    arm: str
    seed: int
    setting: dict[str, Any] | None  # None: a seed run whose setting the search stage chooses
    output_dir: str | None  # None: not known until the search stage chose (a reused search run)
    reuses: str | None = None  # seed run at the search seed: id of the search run it reuses

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Matrix:
    search: list[RunSpec]
    seeds: list[RunSpec]

    @property
    def runs(self) -> list[RunSpec]:
        return self.search + self.seeds

    def by_id(self) -> dict[str, RunSpec]:
        return {r.run_id: r for r in self.runs}


def search_seed(sweep: Sweep) -> int:
    s = sweep.settings
    return s.search_seed if s.search_seed is not None else s.seeds[0]


def setting_tag(setting: dict[str, Any]) -> str:
    return "_".join(f"{k.split('.')[-1]}={v}" for k, v in setting.items()) or "default"


def search_id(model: str, arm: str, setting: dict[str, Any]) -> str:
    return f"{short_model_name(model)}/{arm}/search/{setting_tag(setting)}"


def expand(sweep: Sweep) -> Matrix:
    s = sweep.settings
    search: list[RunSpec] = []
    seeds: list[RunSpec] = []
    s0 = search_seed(sweep)
    for model in sweep.models:
        for arm in s.arms:
            if s.search:
                for combo in s.grid():
                    search.append(RunSpec(search_id(model, arm, combo), SEARCH, model, arm, s0, combo,
                                          sweep.search_dir(model, arm, combo)))
            for seed in s.seeds:
                rid = f"{short_model_name(model)}/{arm}/seed{seed}"
                if s.search:
                    reuse = seed == s0
                    seeds.append(RunSpec(rid, SEED, model, arm, seed, None,
                                         None if reuse else sweep.seed_dir(model, arm, seed),
                                         reuses="selected search run" if reuse else None))
                else:
                    seeds.append(RunSpec(rid, SEED, model, arm, seed, {}, sweep.seed_dir(model, arm, seed)))
    return Matrix(search, seeds)


def run_config(sweep: Sweep, spec: RunSpec) -> TrainConfig:
    assert spec.setting is not None and spec.output_dir is not None, spec.run_id
    tags = list((sweep.base.get("wandb") or {}).get("tags") or [])
    tags += [f"size:{short_model_name(spec.model)}", f"stage:{spec.stage}"]  # W&B filters by model size and stage
    return sweep.run_config(spec.model, spec.arm, spec.seed, {**spec.setting, "wandb.tags": tags}, spec.output_dir)


def fingerprint(cfg: TrainConfig) -> str:
    """What decides the run's result (not W&B, audit or paths), hashed."""
    return hashlib.sha256(comparable(config_dict(cfg)).encode()).hexdigest()[:16]


def select_setting(results: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """The selection rule shared by all arms: highest pair accuracy on the selection split (the
    held-out split when the config has none), first setting on ties."""
    def acc(r: dict[str, Any]) -> float:
        v = r.get("selection_pair_accuracy")
        return r["heldout_pair_accuracy"] if v is None else v

    best = max(range(len(results)), key=lambda i: (acc(results[i][1]), -i))
    return results[best][0]


def render_matrix(sweep: Sweep, matrix: Matrix) -> str:
    """The matrix as a Markdown table, with its counts."""
    s = sweep.settings
    n_reused = sum(r.reuses is not None for r in matrix.seeds)
    lines = [f"# Run matrix: {len(s.arms)} arms x {len(sweep.models)} models x {len(s.seeds)} seeds", ""]
    if s.search:
        lines += [f"Search stage: {len(s.grid())} settings per (model, arm) at seed {search_seed(sweep)} "
                  f"({', '.join(f'{k} in {v}' for k, v in s.search.items())}); the setting with the highest "
                  "selection-split pair accuracy is trained at every seed.", ""]
    lines += [f"{len(matrix.search)} search runs + {len(matrix.seeds)} seed runs "
              f"({n_reused} reuse their search run) = {len(matrix.search) + len(matrix.seeds) - n_reused} trainings.",
              ""]
    lines += [f"Run directories under {sweep.root}.", ""]
    rows = []
    for i, r in enumerate(matrix.runs, 1):
        setting = "selected by search" if r.setting is None else (setting_tag(r.setting) if r.setting else "recipe")
        where = Path(r.output_dir).relative_to(sweep.root).as_posix() if r.output_dir else f"(reuses the {r.reuses})"
        rows.append([i, r.stage, r.model, r.arm, r.seed, setting, where])
    lines += table(["#", "stage", "model", "arm", "seed", "setting", "output"], rows)
    return "\n".join(lines) + "\n"
