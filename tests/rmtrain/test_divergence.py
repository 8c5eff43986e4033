"""Divergence and collapse are results (issue 33, item 1), through ``rmtrain train`` itself: a run
whose loss or weights turn non-finite stops at that step, saves no model and says so; a constant
model is recorded as collapsed; the printed and written JSON is strict; a batch the pairs cannot
fill is refused. Each failure is built in (a learning rate of 1e300, targets of 1e30, a loss without
gradient on a zero score head), never an accident of a tiny model's numerics."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from rmtrain.arms import ARMS
from rmtrain.cli import main
from rmtrain.train import run_status
from tests.support import TINY_SET, planted_arms, strict_json

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def recipe(tmp_path: Path, model: Path, arm: str = "regression", **training) -> Path:
    raw = {"arm": arm, "seed": 1, "model": {"name_or_path": str(model)}, "data": TINY_SET, "heldout_fraction": 0.25,
           "training": {"learning_rate": 1e-3, "max_steps": 3, "per_device_batch_size": 4, "max_length": 64,
                        "warmup_ratio": 0.0, "logging_steps": 1, "use_cpu": True, "eval_batch_size": 32, **training},
           "wandb": {"mode": "disabled", "project": "t"}}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_nonfinite_weights_stop_training_at_once_and_no_model_is_saved(tmp_path, tiny_set_qwen3, capsys, caplog):
    """learning_rate 1e300: Adam's first step moves each weight by about the learning rate, which
    float32 holds as inf. Step 1 would have been saved (save_steps 1) and two more steps were asked for."""
    out = tmp_path / "run"
    path = recipe(tmp_path, tiny_set_qwen3, learning_rate=1e300, save_steps=1)
    with caplog.at_level(logging.WARNING):
        assert main(["train", "--config", str(path), "--out", str(out)]) == 1
    printed = strict_json(capsys.readouterr().out)  # stdout: the summary alone, strict JSON
    reason = "non-finite weights at step 1; training stopped, no model saved"
    assert printed["status"] == "diverged" and printed["status_reason"] == reason
    assert printed["heldout_pair_accuracy"] is None and printed["score_sd"] is None
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "diverged" in r.getMessage()] \
        == [f"regression seed 1: diverged: {reason}"]
    summary = strict_json((out / "train_summary.json").read_text())
    assert (summary["status"], summary["status_step"], summary["global_step"]) == ("diverged", 1, 1)
    assert summary["heldout_rmse"] is None and summary["heldout_pearson"] is None
    # nothing in the run directory can be taken for a model: no weights, no scores, no checkpoint
    assert sorted(p.name for p in out.iterdir()) == ["matchrm_config.json", "train_summary.json"]

    # on_divergence=record: the same run, recorded (not retrained), and the command succeeds
    mtime = (out / "train_summary.json").stat().st_mtime_ns
    assert main(["train", "--config", str(path), "--out", str(out), "--set", "training.on_divergence=record"]) == 0
    assert strict_json(capsys.readouterr().out)["status"] == "diverged"
    assert (out / "train_summary.json").stat().st_mtime_ns == mtime
    # auditing the run says why there is nothing to audit (rmcore.runtime.checkpoints.check_trained)
    from rmeval.cli import main as rmeval_main

    assert rmeval_main(["audit", "--checkpoint", str(out), "--data", "simulated", "--out", str(tmp_path / "a")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"rmeval: error: {out}: the run diverged at step 1 (non-finite weights) and left no model")


def test_a_nonfinite_loss_is_caught_at_its_step(tmp_path, tiny_set_qwen3, monkeypatch, capsys):
    """Targets of 1e30: the squared error of the first batch is inf in float32."""
    monkeypatch.setitem(ARMS, "diverging_at_odd_seeds", planted_arms()["diverging_at_odd_seeds"])
    out = tmp_path / "run"
    path = recipe(tmp_path, tiny_set_qwen3, arm="diverging_at_odd_seeds", on_divergence="record")
    assert main(["train", "--config", str(path), "--out", str(out)]) == 0  # record: a result, exit 0
    summary = strict_json((out / "train_summary.json").read_text())
    assert summary["status"] == "diverged" and summary["global_step"] == 1
    assert summary["status_reason"] == "non-finite loss at step 1 (loss inf); training stopped, no model saved"
    assert not (out / "model.safetensors").exists()
    assert strict_json(capsys.readouterr().out)["status"] == "diverged"


def test_a_constant_model_is_recorded_as_collapsed(tmp_path, tiny_set_qwen3, monkeypatch, capsys):
    """A score head of zeros trained with a loss whose gradient is exactly 0: every held-out score
    is 0 (SD 0, at most 1e-4 x RMS 0), and its Pearson correlation with the ratings is undefined."""
    import torch

    from rmcore.models.modeling import load_reward_model

    model, tok = load_reward_model(str(tiny_set_qwen3))
    with torch.no_grad():
        model.score.weight.zero_()
    zero = tmp_path / "zero_head"
    model.save_pretrained(zero)
    tok.save_pretrained(zero)
    monkeypatch.setitem(ARMS, "no_gradient", planted_arms()["no_gradient"])
    out = tmp_path / "run"
    assert main(["train", "--config", str(recipe(tmp_path, zero, arm="no_gradient")), "--out", str(out)]) == 1
    printed = strict_json(capsys.readouterr().out)
    summary = strict_json((out / "train_summary.json").read_text())
    assert printed["status"] == summary["status"] == "collapsed" and summary["global_step"] == 3
    assert summary["status_reason"] == ("held-out score SD 0 is at most 0.0001 x their root-mean-square 0 "
                                        "(training.collapse_sd): a constant model")
    assert summary["score_sd"] == 0.0 and summary["heldout_pair_accuracy"] == 0.5  # every pair a tie
    assert summary["heldout_pearson"] is None  # undefined, null in strict JSON
    assert (out / "model.safetensors").is_file()  # a finite model, saved and marked


def test_run_status_reads_the_spread_relative_to_the_scale():
    """sd <= collapse_sd x rms, sd with ddof 1 and rms the root-mean-square (rmtrain.train)."""
    near = [5.0, 5.0 + 1e-5, 5.0 - 1e-5]  # sd 1e-5, rms about 5: 2e-6 of the scale
    assert run_status(None, near, 1e-4)["status"] == "collapsed"
    assert run_status(None, [x * 1e-30 for x in near], 1e-4)["status"] == "collapsed"
    assert run_status(None, [1e-30, 2e-30, 3e-30], 1e-4)["status"] == "ok"  # small, but not constant
    assert run_status(None, near, 1e-6)["status"] == "ok"
    assert run_status(None, [0.0, 0.0, 0.0], 0.0)["status"] == "ok"  # 0: never
    assert run_status({"step": 4, "what": "loss", "loss": float("nan")}, None, 1e-4) == {
        "status": "diverged", "status_step": 4,
        "status_reason": "non-finite loss at step 4 (loss nan); training stopped, no model saved"}


def test_a_batch_larger_than_the_training_pairs_is_refused(tmp_path, tiny_set_qwen3, capsys):
    out = tmp_path / "run"
    path = recipe(tmp_path, tiny_set_qwen3, per_device_batch_size=10**12)
    assert main(["train", "--config", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rmtrain: error: training.per_device_batch_size: 1000000000000 is "
                                               "more than the ") and "training pairs; set it to at most " in err[0]
    assert not out.exists()  # nothing written


def test_finite_weights_reads_every_trainable_weight():
    """A float32 sum that overflows on finite weights is not a divergence; one NaN or inf is, and
    a frozen weight is not read (it cannot change)."""
    import torch

    from rmtrain.trainer import finite_weights

    model = torch.nn.Sequential(torch.nn.Linear(4, 300), torch.nn.Linear(300, 1))
    with torch.no_grad():
        model[0].weight.fill_(3e37)  # 1200 of them: the sum is inf in float32, every weight finite
        assert finite_weights(model)
        for bad in (float("nan"), float("inf"), -float("inf")):
            model[1].bias[0] = bad
            assert not finite_weights(model)
            model[1].bias.requires_grad_(False)
            assert finite_weights(model)
            model[1].bias.requires_grad_(True)


@pytest.mark.parametrize(("setting", "message"), [
    ("training.on_divergence=maybe", "training.on_divergence must be one of fail, record, got 'maybe'"),
    ("training.collapse_sd=1", "--set training.collapse_sd=1: 1.0 is out of range; allowed: a finite number in [0, 1)"),
])
def test_divergence_settings_are_checked(tmp_path, capsys, setting, message):
    path = recipe(tmp_path, tmp_path / "no-model-needed")
    assert main(["train", "--config", str(path), "--out", str(tmp_path / "run"), "--set", setting]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rmtrain: error: ") and err[0].endswith(message), err
    assert not (tmp_path / "run").exists()
