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

from rmcore.data.loading import load_rating_set
from rmcore.models.tiny import tiny_causal_lm
from rmtrain.arms import ARMS
from rmtrain.cli import main as rmtrain_main
from rmtrain.config import load_sweep
from rmtrain.sweep import Ledger, expand, run_sweep
from rmtrain.sweep.report import arm_table, figure_columns
from tests.support import ROOT, planted_arms, set_texts, strict_json

DATA = {"name": "simulated", "n_prompts": 30, "responses_per_prompt": 3, "seed": 0}
FIGURES = figure_columns()  # summary.csv's figure columns
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_qwen3(built_once) -> Path:
    """Built once for the run (tests/conftest.py); the slow diverging-arm test is its first user."""
    return built_once("tiny_qwen3", lambda path: tiny_causal_lm(path, set_texts(DATA), "qwen3"))


def audit_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local executor's final audits run in this process, one after the other: each is
    ``rmtrain.sweep.worker.audit_one``, what its process (``python -m rmtrain.sweep.worker OUT RUN_ID
    --audit``) runs, without a start-up of torch per audit. For the tests where the process is not
    what is tested; test_sweep_with_a_diverging_arm_finishes_and_says_why runs it as a process and
    checks that both give the same figures."""
    from rmtrain.sweep import executors, worker

    def audit(self: executors.LocalExecutor, run_ids: list[str], on_end=None) -> None:
        for rid in run_ids:
            worker.audit_one(self.out, rid)
            if on_end:
                on_end(rid)

    monkeypatch.setattr(executors.LocalExecutor, "audit", audit)


def recipe(tmp_path: Path, model: Path, *, arms: list[str], seeds: list[int], search: dict | None = None,
           audit: bool = True, max_steps: int = 2, **training) -> Path:
    raw = {"arm": arms[0], "model": {"name_or_path": str(model)}, "data": DATA, "heldout_fraction": 0.25,
           "training": {"learning_rate": 1e-3, "max_steps": max_steps, "per_device_batch_size": 4, "max_length": 96,
                        "warmup_ratio": 0.0, "logging_steps": 1, "use_cpu": True, "eval_batch_size": 32, **training},
           "wandb": {"mode": "disabled", "project": "t"},
           "sweep": {"arms": arms, "seeds": seeds, "output_root": str(tmp_path / "out"), "search": search or {},
                     # the closed-form ridge probe alone: the iterative learners' fits (MLP, boosted
                     # trees) were most of each audit here, and the audit's tests cover them
                     "audit": {"enabled": audit, "n_boot": 50, "max_prompts": 7, "features": {"learners": ["ridge"]}}}}
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


def test_run_directories_are_absolute_under_a_relative_output_root(tmp_path, monkeypatch):
    """Search and seed runs alike (summary.csv and the policy recipes' reward_models_from read them
    from any folder)."""
    monkeypatch.chdir(tmp_path)
    path = recipe(tmp_path, tmp_path / "m", arms=["regression"], seeds=[1, 2],
                  search={"training.learning_rate": [1e-4]})
    raw = yaml.safe_load(path.read_text())
    raw["sweep"]["output_root"] = "rel/out"
    path.write_text(yaml.safe_dump(raw))
    m = expand(load_sweep(path))
    dirs = [Path(r.output_dir) for r in m.runs if r.output_dir]
    root = (tmp_path / "rel" / "out").resolve()
    assert len(dirs) == 2 and all(d.is_absolute() and d.is_relative_to(root) for d in dirs)


def test_search_select_reuse_and_summary(tmp_path, tiny_qwen3, monkeypatch):
    audit_in_process(monkeypatch)
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
    assert csv.loc[1, "transplant_random_margin_sd"] == pytest.approx(
        audit["transplant"]["random"]["margin_sd"]["estimate"])
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


@pytest.mark.heavy  # ~90 s: a sweep killed mid-run and resumed (bash scripts/test.sh -m heavy)
@pytest.mark.slow
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
    assert sorted(after) == sorted(before) and all(r["state"] == "done" for r in after.values()), after
    assert after[done_before[0]]["attempts"] == 1 and first_summary.stat().st_mtime_ns == mtime  # not retrained
    s = json.loads((Path(after[interrupted[0]]["output_dir"]) / "train_summary.json").read_text())
    assert after[interrupted[0]]["attempts"] == 2 and s["global_step"] == 24
    # resumed from its last checkpoint: this process trained fewer than all 24 steps of 4 pairs
    assert s["pairs_per_rank"][0] < 24 * 4
    csv = pd.read_csv(out / "summary.csv")
    assert sorted(csv["seed"]) == [1, 2, 3] and csv[list(FIGURES)].notna().all().all()


def _helpsteer2_files(tmp_path: Path) -> dict[str, Path]:
    """HelpSteer2-schema train/validation files and released-preference file, from simulated sets."""
    def rows(seed: int) -> tuple[list[dict], list[dict]]:
        rs = load_rating_set({"name": "simulated", "n_prompts": 24, "responses_per_prompt": 2, "seed": seed,
                              "multi_turn_fraction": 0.0})
        out, prefs = [], []
        for p in rs.prompts:
            prompt = p.messages[-1]["content"]
            h = []
            for r in p.responses:
                v = int(min(4, max(0, round(r.ratings["helpfulness"]))))
                h.append(v)
                out.append({"prompt": prompt, "response": r.text, "helpfulness": v, "correctness": v,
                            "coherence": 3, "complexity": 1, "verbosity": 2})
            prefs.append({"prompt": prompt, "response_1": p.responses[0].text, "response_2": p.responses[1].text,
                          "preference_strength": int(max(-3, min(3, h[1] - h[0])))})
        return out, prefs

    train, ptrain = rows(0)
    val, pval = rows(1)
    paths = {"train": tmp_path / "hs2_train.jsonl", "validation": tmp_path / "hs2_val.jsonl",
             "preference": tmp_path / "preference.jsonl"}
    for key, rs in (("train", train), ("validation", val)):
        paths[key].write_text("".join(json.dumps(r) + "\n" for r in rs))
    paths["preference"].write_text("".join(json.dumps({**r, "split": split}) + "\n"
                                           for split, rs in (("train", ptrain), ("validation", pval)) for r in rs))
    return paths


def test_qwen3_recipe_dry_run_and_sbatch_array(monkeypatch):
    """The published design expands to six arms x two sizes x five seeds with equal budgets, and
    its SLURM submission is one job array per stage, one GPU run (accelerate launch) per task."""
    import submitit.slurm.slurm as ss

    from rmtrain.sweep.driver import sweep_executor

    path = ROOT / "recipes" / "helpsteer2_matched_qwen3.yaml"
    sweep = load_sweep(path, {"sweep.slurm.partition": "gpu"})
    m = expand(sweep)
    assert len(m.search) == 6 * 2 * 3 and len(m.seeds) == 6 * 2 * 5 and sum(r.reuses is not None for r in m.seeds) == 12
    assert {r.model for r in m.runs} == {"Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B"}
    ex = sweep_executor("slurm", sweep, Path("/tmp/never-written"))
    cmds = ex.describe([r.run_id for r in m.search])
    assert all(c.startswith("accelerate launch --config_file ") and "accelerate_configs/single_gpu.yaml -m "
               "rmtrain.sweep.worker" in c for c in cmds)
    # no SLURM here: let submitit's SlurmExecutor believe srun exists, then write (not submit) its sbatch file
    monkeypatch.setattr(ss.SlurmExecutor, "affinity", classmethod(lambda cls: 1))
    sub = ex.executor("rmtrain-search")._executor
    text = ss._make_sbatch_string(command="CMD", folder=Path("/tmp/never-written/%j"), map_count=len(m.search),
                                  **sub.parameters)
    for flag in ("#SBATCH --array=0-35%36", "#SBATCH --gpus-per-node=1", "#SBATCH --partition=gpu",
                 "#SBATCH --cpus-per-task=8", "#SBATCH --time=720"):
        assert flag in text, flag


@pytest.mark.heavy  # ~60 s: the study recipe through submitit job arrays
@pytest.mark.slow
def test_qwen3_recipe_through_submitit_local_executor(tmp_path, tiny_qwen3, monkeypatch):
    """The Qwen3 recipe, shrunk by overrides to a tiny Qwen3 and local HelpSteer2-schema files, from
    one command: the search stage as one job array, then (no person in between) the seed stage as
    another, every task an `accelerate launch` of one run, then the audits and the report."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the tasks' torch, like the one_torch_thread fixture here
    f = _helpsteer2_files(tmp_path)
    out = tmp_path / "out"
    sets = {"sweep.models": f"[{tiny_qwen3}]", "sweep.arms": "[regression]", "sweep.seeds": "[1, 2]",
            "sweep.search": "{training.learning_rate: [1.0e-3]}", "model.dtype": "float32",
            "model.gradient_checkpointing": "false", "training.bf16": "false", "training.use_cpu": "true",
            "training.max_steps": 2, "training.eval_steps": 1, "training.save_steps": 1,
            "training.per_device_batch_size": 4, "training.gradient_accumulation_steps": 1,
            "training.max_length": 96, "training.eval_batch_size": 16, "heldout_fraction": 0.2,
            "selection_fraction": 0.2, "data.path": f["train"], "data.preference_path": f["preference"],
            "audit.max_prompts": 4, "audit.n_boot": 20, "sweep.audit.data.path": f["validation"],
            "sweep.audit.data.preference_path": f["preference"], "sweep.audit.n_boot": 50,
            "sweep.audit.batch_size": 16, "sweep.slurm.accelerate_config": "accelerate_configs/cpu_single.yaml",
            "sweep.slurm.gpus_per_node": 0, "sweep.slurm.timeout_min": 30, "wandb.mode": "disabled",
            # the study-scale extras name Hub models: the probes here read the local MiniLM and the tiny
            # Qwen3's hidden states; no extra rating set or released scorer
            "sweep.audit.features.embedders": "[]", "sweep.audit.features.base_model": str(tiny_qwen3),
            "sweep.audit.features.learners": "[ridge]", "sweep.audit.features.dtype": "float32",
            "sweep.extra_audit_data": "{}", "sweep.released_scorers": "{}", "sweep.selection_rules": "[final]"}
    argv = ["sweep", "--config", str(ROOT / "recipes" / "helpsteer2_matched_qwen3.yaml"), "--out", str(out),
            "--executor", "submitit-local"]
    for k, v in sets.items():
        argv += ["--set", f"{k}={v}"]
    assert rmtrain_main(argv) == 0
    rows = {r["run_id"]: r for r in Ledger(out / "ledger").rows()}
    assert len(rows) == 3 and all(r["state"] == "done" for r in rows.values()), {k: r["error"] for k, r in rows.items()}
    trained = [r for r in rows.values() if not r["reused_from"]]
    assert len(trained) == 2  # the search run (first job) and the seed-2 run (second job); seed 1 reused
    # each ran in a submitit task (its own process, not this one), launched by accelerate
    assert all(r["pid"] != os.getpid() and r["job_id"] for r in trained)
    # two training tasks, then the two trained runs' final audits as a job array of their own
    assert len(list((out / "submitit").glob("*_submitted.pkl"))) == 4
    assert all((Path(r["output_dir"]) / "final_audit" / "audit.json").is_file() for r in trained)
    search_end = max(r["finished_at"] for r in trained if r["stage"] == "search")
    assert all(r["started_at"] >= search_end for r in trained if r["stage"] == "seed")
    # the training-time audit callback and the final audit on validation prompts (none trained on)
    run = Path(rows[f"{tiny_qwen3.name}/regression/seed2"]["output_dir"])
    ckpts = list(run.glob("checkpoint-*"))
    assert ckpts and all((c / "audit" / "audit.json").is_file() for c in ckpts)
    fig = rows[f"{tiny_qwen3.name}/regression/seed2"]["figures"]
    assert fig["n_audit_prompts"] == fig["n_candidate_prompts"] - fig["n_dropped_seen_in_training"] > 0
    csv = pd.read_csv(out / "summary.csv")
    assert len(csv) == 2 and csv[list(FIGURES)].notna().all().all()
    assert (out / "report.md").is_file()


@pytest.mark.heavy  # ~20 s: a sweep logged to offline W&B
def test_wandb_runs_grouped_by_sweep_with_summary_table(tmp_path, tiny_qwen3, monkeypatch):
    from tests.support import read_run

    monkeypatch.setenv("WANDB_MODE", "offline")
    path = recipe(tmp_path, tiny_qwen3, arms=["binarized"], seeds=[4])
    raw = yaml.safe_load(path.read_text())
    raw["wandb"] = {"project": "t", "mode": "offline"}
    raw["sweep"]["name"] = "my-sweep"
    path.write_text(yaml.safe_dump(raw))
    run_sweep(load_sweep(path))
    run_dir = tmp_path / "out" / tiny_qwen3.name / "binarized" / "seed4"
    train = read_run(run_dir / "wandb")
    assert train["group"] == "my-sweep" and train["job_type"] == "train"
    assert (train["config"]["arm"], train["config"]["seed"]) == ("binarized", 4)
    assert train["config"]["model"]["name_or_path"] == str(tiny_qwen3)  # the model size
    assert {"arm:binarized", "seed:4", f"size:{tiny_qwen3.name}", "stage:seed"} <= set(train["tags"])
    audit = read_run(run_dir / "final_audit" / "wandb")
    assert audit["group"] == "my-sweep" and (audit["config"]["arm"], audit["config"]["seed"]) == ("binarized", 4)
    summary = read_run(tmp_path / "out" / "wandb_summary")
    assert summary["group"] == "my-sweep" and summary["job_type"] == "sweep-summary"
    row = next(h for h in summary["history"] if "sweep/summary/_type" in h)
    assert row["sweep/summary/_type"] == "table-file" and row["sweep/summary/nrows"] == 1
    assert row["sweep/summary/ncols"] == len(pd.read_csv(tmp_path / "out" / "summary.csv").columns)
    assert any("sweep/share_vs_margin/_type" in h for h in summary["history"])


@pytest.mark.heavy
def test_local_executor_runs_workers_in_parallel(tmp_path, tiny_qwen3):
    """--max-parallel 2: each run in its own worker process, two at once, logs under OUT/logs."""
    path = recipe(tmp_path, tiny_qwen3, arms=["regression", "bradley_terry"], seeds=[1], audit=False)
    assert rmtrain_main(["sweep", "--config", str(path), "--max-parallel", "2"]) == 0
    rows = Ledger(tmp_path / "out" / "ledger").rows()
    assert len(rows) == 2 and all(r["state"] == "done" for r in rows)
    assert len({r["pid"] for r in rows}) == 2 and os.getpid() not in {r["pid"] for r in rows}
    a, b = sorted(rows, key=lambda r: r["started_at"])
    assert b["started_at"] <= a["finished_at"]  # overlapping, not one after the other
    assert len(list((tmp_path / "out" / "logs").glob("*.log"))) == 2


def test_checkpoint_cut_short_by_a_kill_is_not_resumed(tmp_path, tiny_qwen3):
    """A process killed while saving leaves checkpoint-N without trainer_state.json (written last);
    resuming must start from the checkpoint before it, not from half-written weights."""
    from rmtrain.runs import train_run

    path = recipe(tmp_path, tiny_qwen3, arms=["regression"], seeds=[1], audit=False, max_steps=4, save_steps=2,
                  save_total_limit=None)
    cfg = load_sweep(path).run_config(str(tiny_qwen3), "regression", 1, {}, str(tmp_path / "run"))
    train_run(cfg)
    run = tmp_path / "run"
    (run / "train_summary.json").unlink()  # as if killed while writing checkpoint-4
    (run / "checkpoint-4" / "trainer_state.json").unlink()
    (run / "checkpoint-4" / "optimizer.pt").write_bytes(b"half")
    s = train_run(cfg)
    # steps 3 and 4 retrained from checkpoint-2; the summary counts the whole run (4 steps, 4 pairs each)
    assert s["global_step"] == 4 and s["pairs_per_rank"] == [4 * 4]
    assert s["resumed_from"] == str(run / "checkpoint-2")
    assert (run / "checkpoint-4" / "trainer_state.json").is_file()


def _figures(csv: pd.DataFrame, arm: str) -> pd.DataFrame:
    return csv[csv["arm"] == arm][["seed", *FIGURES]].reset_index(drop=True)


@pytest.mark.slow  # two sweeps, the first with a final audit process
def test_sweep_with_a_diverging_arm_finishes_and_says_why(tmp_path, tiny_qwen3, monkeypatch, capsys):
    """One arm forced to diverge (targets of 1e30 at odd seeds: loss inf at step 1): the sweep
    finishes, audits the other arm, marks the diverged run in summary.csv and report.md with its
    reason, and exits 1 (a final run lost); the other arm's figures equal those of the same sweep
    without the diverging arm. The first sweep's final audit is a process of its own, as a user's
    is; the second sweep's runs in this process (``audit_in_process``), so the equal figures also
    say that the other tests' in-process audits give what the process gives."""
    monkeypatch.setitem(ARMS, "diverging_at_odd_seeds", planted_arms()["diverging_at_odd_seeds"])
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the audit process's threads: this process's one (one_torch_thread)
    path = recipe(tmp_path, tiny_qwen3, arms=["regression", "diverging_at_odd_seeds"], seeds=[1])
    assert rmtrain_main(["sweep", "--config", str(path)]) == 1
    err = capsys.readouterr().err
    bad = f"{Path(tiny_qwen3).name}/diverging_at_odd_seeds/seed1"
    assert f"rmtrain: 1 final run(s) diverged or collapsed ({bad}): see report.md" in err
    out = tmp_path / "out"
    row = Ledger(out / "ledger").get(bad)
    reason = "non-finite loss at step 1 (loss inf); training stopped, no model saved"
    assert (row["state"], row["status"], row["status_reason"]) == ("done", "diverged", reason)
    assert not (Path(row["output_dir"]) / "final_audit").exists()  # no model, no audit
    csv = pd.read_csv(out / "summary.csv")
    lost = csv[csv["arm"] == "diverging_at_odd_seeds"].iloc[0]
    assert (lost["status"], lost["status_reason"]) == ("diverged", reason) and lost[list(FIGURES)].isna().all()
    assert list(csv.loc[csv["arm"] == "regression", "status"]) == ["ok"]
    # its final audit ran as a process of its own: the local executor's log of it
    assert (out / "logs" / f"{Path(tiny_qwen3).name}__regression__seed1.audit.log").is_file()
    report = (out / "report.md").read_text()
    assert "1 of them diverged or collapsed" in report and "## Runs that diverged or collapsed" in report
    assert f"| {bad} | seed | diverged | {reason} |" in report
    assert strict_json((Path(row["output_dir"]) / "train_summary.json").read_text())["heldout_rmse"] is None

    # the same sweep without the diverging arm: the regression run's figures are the same
    raw = yaml.safe_load(path.read_text())
    raw["sweep"].update(arms=["regression"], output_root=str(tmp_path / "alone"))
    path.write_text(yaml.safe_dump(raw))
    audit_in_process(monkeypatch)
    assert rmtrain_main(["sweep", "--config", str(path)]) == 0
    alone = pd.read_csv(tmp_path / "alone" / "summary.csv")
    assert not (tmp_path / "alone" / "logs").exists()  # audited in this process
    assert alone[list(FIGURES)].notna().all().all()
    pd.testing.assert_frame_equal(_figures(csv, "regression"), _figures(alone, "regression"), check_exact=True)


def test_diverged_runs_are_left_out_of_selection_figures_and_tests(tmp_path, tiny_qwen3, monkeypatch):
    """A search grid point that diverges (learning rate 1e300) is not selected; a final run that
    diverges (odd seed of the planted arm) keeps its summary row, blank, and leaves the per-arm
    table and the exact tests to the other seeds: 3 regression seeds against 2."""
    monkeypatch.setitem(ARMS, "diverging_at_odd_seeds", planted_arms()["diverging_at_odd_seeds"])
    arms = ["regression", "diverging_at_odd_seeds"]
    path = recipe(tmp_path, tiny_qwen3, arms=arms, seeds=[2, 3, 4], audit=False,
                  search={"training.learning_rate": [1e-3, 1e300]}, on_divergence="record")
    res = run_sweep(load_sweep(path))
    out = tmp_path / "out"
    name = Path(tiny_qwen3).name
    assert res["unusable_final"] == [f"{name}/diverging_at_odd_seeds/seed3"]
    assert rmtrain_main(["sweep", "--config", str(path)]) == 0  # record: exit 0; nothing retrained
    selection = json.loads((out / "selection.json").read_text())
    for arm in arms:
        choice = selection[f"{tiny_qwen3}/{arm}"]
        assert choice["setting"] == {"training.learning_rate": 1e-3}
        assert list(choice["excluded"]) == [f"{name}/{arm}/search/learning_rate=1e+300"]
        assert choice["excluded"][f"{name}/{arm}/search/learning_rate=1e+300"].startswith(
            "diverged: non-finite weights at step 1")
    csv = pd.read_csv(out / "summary.csv")
    assert list(csv["status"]) == ["ok", "ok", "ok", "ok", "diverged", "ok"]
    lost = csv.iloc[4]
    assert lost["seed"] == 3 and pd.isna(lost["heldout_pair_accuracy"])
    ok = csv[csv["status"] == "ok"]
    # the per-arm table and the exact test read the ok seeds only: a hand mean and a hand p
    t = arm_table(csv, arms).set_index("arm")
    assert t.loc["diverging_at_odd_seeds", "n_seeds"] == 2 and t.loc["regression", "n_seeds"] == 3
    planted = ok.loc[ok["arm"] == "diverging_at_odd_seeds", "heldout_pair_accuracy"].to_numpy()
    assert t.loc["diverging_at_odd_seeds", "heldout_pair_accuracy_mean"] == pytest.approx(planted.mean())
    report = (out / "report.md").read_text()
    assert "10 splits for 3 against 2 seeds" in report  # C(5, 2): the diverged seed is not in the test
    assert "| diverging_at_odd_seeds | 2 |" in report
    for rid in (f"{name}/regression/search/learning_rate=1e+300", f"{name}/diverging_at_odd_seeds/seed3"):
        assert f"| {rid} |" in report.split("## Runs that diverged or collapsed")[1]
