"""Matched sweeps end to end on a tiny causal LM: the run matrix (equal budgets, the matching search
run reused), the per-arm selection, the ledger (failures recorded, kill + rerun), the final audit in
summary.csv, and submitit's local executor running the Qwen3 recipe's two stages as job arrays."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rmtrain.cli import main as rmtrain_main
from rmtrain.config import load_sweep
from rmtrain.data.registry import load_rating_set
from rmtrain.sweep import Ledger, expand, run_sweep
from rmtrain.sweep.report import FIGURES
from tests.tiny_models import tiny_causal_lm

ROOT = Path(__file__).resolve().parents[1]
DATA = {"name": "simulated", "n_prompts": 30, "responses_per_prompt": 3, "seed": 0}
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rs = load_rating_set(DATA)
    texts = [m["content"] for p in rs.prompts for m in p.messages] + [r.text for p in rs.prompts for r in p.responses]
    return tiny_causal_lm(tmp_path_factory.mktemp("tiny_qwen3"), texts, "qwen3")


def recipe(tmp_path: Path, model: Path, *, arms: list[str], seeds: list[int], search: dict | None = None,
           audit: bool = True, max_steps: int = 2, **training) -> Path:
    raw = {"arm": arms[0], "model": {"name_or_path": str(model)}, "data": DATA, "heldout_fraction": 0.25,
           "training": {"learning_rate": 1e-3, "max_steps": max_steps, "per_device_batch_size": 4, "max_length": 96,
                        "warmup_ratio": 0.0, "logging_steps": 1, "use_cpu": True, "eval_batch_size": 32, **training},
           "wandb": {"mode": "disabled", "project": "t"},
           "sweep": {"arms": arms, "seeds": seeds, "output_root": str(tmp_path / "out"), "search": search or {},
                     "audit": {"enabled": audit, "n_boot": 50, "max_prompts": 7}}}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_matrix_equal_budgets_and_reuse(tmp_path, capsys):
    path = recipe(tmp_path, tmp_path / "m", arms=["regression", "bradley_terry"], seeds=[3, 1, 2],
                  search={"training.learning_rate": [1e-4, 1e-3]})
    raw = yaml.safe_load(path.read_text())
    raw["sweep"].update(models=["a/m1", "b/m2"], search_seed=1)
    path.write_text(yaml.safe_dump(raw))
    m = expand(load_sweep(path))
    # every (model, arm) gets the same grid at the search seed: 2 models x 2 arms x 2 settings
    assert len(m.search) == 8 and {r.seed for r in m.search} == {1}
    per_arm = {}
    for r in m.search:
        per_arm.setdefault((r.model, r.arm), []).append(r.setting)
    assert all(v == [{"training.learning_rate": 1e-4}, {"training.learning_rate": 1e-3}] for v in per_arm.values())
    # seed stage: every seed of every (model, arm); the search seed's run reuses the search run
    assert len(m.seeds) == 12 and sum(r.reuses is not None for r in m.seeds) == 4
    assert all((r.seed == 1) == (r.output_dir is None) for r in m.seeds)
    assert len({r.run_id for r in m.runs}) == 20
    # the dry run prints and saves the matrix and launches nothing
    assert rmtrain_main(["sweep", "--config", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "8 search runs + 12 seed runs (4 reuse their search run) = 16 trainings" in out
    assert (tmp_path / "out" / "matrix.md").is_file() and not (tmp_path / "out" / "ledger").exists()


def test_search_select_reuse_and_summary(tmp_path, tiny_qwen3):
    path = recipe(tmp_path, tiny_qwen3, arms=["bradley_terry"], seeds=[1, 2],
                  search={"training.learning_rate": [1e-9, 3e-3]})
    res = run_sweep(load_sweep(path))
    out = tmp_path / "out"
    ledger = Ledger(out / "ledger")
    search = {r["setting"]["training.learning_rate"]: r for r in ledger.rows() if r["stage"] == "search"}
    acc = {lr: r["figures"]["selection_pair_accuracy"] for lr, r in search.items()}
    chosen = 1e-9 if acc[1e-9] >= acc[3e-3] else 3e-3  # the rule: best, the earlier grid point on ties
    seed1, seed2 = ledger.get("tiny_qwen3*/bradley_terry/seed1".replace("tiny_qwen3*", Path(tiny_qwen3).name)), None
    seed2 = ledger.get(f"{Path(tiny_qwen3).name}/bradley_terry/seed2")
    # seed 1 IS the chosen search run (reused, not retrained); seed 2 trained with the chosen setting
    assert seed1["reused_from"] == search[chosen]["run_id"] and seed1["output_dir"] == search[chosen]["output_dir"]
    assert not (out / Path(tiny_qwen3).name / "bradley_terry" / "seed1").exists()
    cfg2 = json.loads((Path(seed2["output_dir"]) / "matchrm_config.json").read_text())
    assert cfg2["training"]["learning_rate"] == pytest.approx(chosen) and cfg2["seed"] == 2
    assert json.loads((out / "selection.json").read_text())[f"{tiny_qwen3}/bradley_terry"]["setting"] == {
        "training.learning_rate": chosen}
    # summary.csv: the final runs with training and audit figures side by side
    csv = pd.read_csv(out / "summary.csv")
    assert list(csv["seed"]) == [1, 2] and csv[list(FIGURES)].notna().all().all()
    audit = json.loads((Path(seed2["audit_dir"]) / "audit.json").read_text())
    assert csv.loc[1, "share_original"] == pytest.approx(audit["share"]["original"]["estimate"])
    assert csv.loc[1, "transplant_random_margin_sd"] == pytest.approx(audit["transplant"]["random"]["margin_sd"]["estimate"])
    # the audit read only held-out prompts, which no run trained on
    held = set(json.loads((Path(seed2["output_dir"]) / "train_summary.json").read_text())["data"] and
               pd.read_parquet(Path(seed2["output_dir"]) / "heldout_scores.parquet")["prompt_id"])
    assert set(pd.read_parquet(Path(seed2["audit_dir"]) / "ratings.parquet")["prompt_id"]) <= held
    for name in ("report.md", "share_vs_margin.png", "arm_bars.png", "ledger.csv", "matrix.json"):
        assert (out / name).is_file()
    assert len(res["rows"]) == 4
    # a rerun trains nothing
    mtime = (Path(seed2["output_dir"]) / "model.safetensors").stat().st_mtime_ns
    run_sweep(load_sweep(path))
    assert (Path(seed2["output_dir"]) / "model.safetensors").stat().st_mtime_ns == mtime
    assert Ledger(out / "ledger").get(seed2["run_id"])["attempts"] == 1


def test_failed_run_is_recorded_and_the_others_go_on(tmp_path, tiny_qwen3, monkeypatch):
    import rmtrain.runs

    real = rmtrain.runs.train_run

    def flaky(cfg, **kw):
        if cfg.seed == 1:
            raise RuntimeError("CUDA out of memory (planted)")
        return real(cfg, **kw)

    path = recipe(tmp_path, tiny_qwen3, arms=["regression"], seeds=[1, 2], audit=False)
    monkeypatch.setattr(rmtrain.runs, "train_run", flaky)
    run_sweep(load_sweep(path))
    ledger = Ledger(tmp_path / "out" / "ledger")
    rid = f"{Path(tiny_qwen3).name}/regression/seed"
    assert ledger.get(rid + "1")["state"] == "failed"
    assert ledger.get(rid + "1")["error"] == "RuntimeError: CUDA out of memory (planted)"
    assert "Traceback" in Path(ledger.get(rid + "1")["error_file"]).read_text()
    assert ledger.get(rid + "2")["state"] == "done"
    assert "failed | RuntimeError: CUDA out of memory (planted)" in (tmp_path / "out" / "report.md").read_text()
    # the same command again retries the failed run only
    monkeypatch.setattr(rmtrain.runs, "train_run", real)
    run_sweep(load_sweep(path))
    assert ledger.get(rid + "1")["state"] == "done" and ledger.get(rid + "1")["attempts"] == 2
    assert ledger.get(rid + "2")["attempts"] == 1


def test_killed_sweep_resumes_without_duplicates(tmp_path, tiny_qwen3):
    """SIGKILL to a real `rmtrain sweep` process after its first finished run, then the same command."""
    path = recipe(tmp_path, tiny_qwen3, arms=["gap_only"], seeds=[1, 2, 3], max_steps=24, save_steps=2,
                  save_total_limit=2)
    out = tmp_path / "out"
    ledger = Ledger(out / "ledger")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "rmtrain.cli", "sweep", "--config", str(path)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 600
        while time.time() < deadline and proc.poll() is None:
            rows = ledger.rows()
            # after the first finished run, while the next one trains past a checkpoint
            if any(r["state"] == "done" for r in rows) and any(
                    r["state"] == "running" and list(Path(r["output_dir"]).glob("checkpoint-*"))
                    and not (Path(r["output_dir"]) / "train_summary.json").exists() for r in rows):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    before = {r["run_id"]: r for r in ledger.rows()}
    done_before = [k for k, r in before.items() if r["state"] == "done"]
    assert len(done_before) == 1 and len(before) == 3
    first_summary = Path(before[done_before[0]]["output_dir"]) / "train_summary.json"
    mtime = first_summary.stat().st_mtime_ns
    interrupted = [k for k, r in before.items() if r["state"] == "running"]  # killed mid-run, no clean-up
    assert len(interrupted) == 1

    assert rmtrain_main(["sweep", "--config", str(path)]) == 0
    after = {r["run_id"]: r for r in ledger.rows()}
    assert sorted(after) == sorted(before) and all(r["state"] == "done" for r in after.values())
    assert after[done_before[0]]["attempts"] == 1 and first_summary.stat().st_mtime_ns == mtime  # not retrained
    s = json.loads((Path(after[interrupted[0]]["output_dir"]) / "train_summary.json").read_text())
    assert after[interrupted[0]]["attempts"] == 2 and s["global_step"] == 24
    # resumed from its last checkpoint: this process trained fewer than all 24 steps of 4 pairs
    assert 0 < s["pairs_per_rank"][0] < 24 * 4
    csv = pd.read_csv(out / "summary.csv")
    assert sorted(csv["seed"]) == [1, 2, 3] and csv[list(FIGURES)].notna().all().all()
