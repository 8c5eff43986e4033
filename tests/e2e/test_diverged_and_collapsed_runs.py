"""A run directory whose training diverged or collapsed, pointed at by the commands that score a
reward model, through the real ``rmeval`` and ``rmtrain`` mains: a diverged run left no model, so
``audit``, ``suitability``, ``serve-reward`` and ``rmtrain policy`` say in one line that it diverged
at step N, why, and that it left no model (exit 2, nothing written); a collapsed run's model is
audited, and said once on stderr to be marked collapsed.

Material: what ``rmtrain train`` leaves (``rmtrain.train``'s module doc): a diverged run holds its
config and a train_summary.json with status diverged and no model; a collapsed run is a model (a
tiny word-level Llama classifier, ``tests.support.save_tiny_classifier``) with status collapsed."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import pytest
import yaml

from rmeval.cli import main
from rmtrain.cli import main as rmtrain_main
from tests.support import save_tiny_classifier

DATA = "simulated:n_prompts=6,responses_per_prompt=2,seed=1"
REASON = "non-finite weights at step 2; training stopped, no model saved"
SAID = "the run diverged at step 2 (non-finite weights) and left no model"


def _summary(status: str, reason: str | None, step: int | None) -> str:
    return json.dumps({"arm": "bt_margin", "seed": 1, "model": "tiny-llama", "status": status,
                       "status_reason": reason, "status_step": step})


@pytest.fixture
def diverged(tmp_path: Path) -> Path:
    d = tmp_path / "diverged"
    d.mkdir()
    (d / "matchrm_config.json").write_text(json.dumps({"arm": "bt_margin", "seed": 1, "training": {"max_length": 16}}))
    (d / "train_summary.json").write_text(_summary("diverged", REASON, 2))
    return d


@pytest.mark.parametrize("command", [
    ["audit", "--data", DATA, "--out", "OUT"],
    ["suitability", "--data", DATA, "--out", "OUT"],
    ["serve-reward"],
])
def test_a_diverged_run_is_said_to_have_left_no_model(diverged: Path, tmp_path: Path, command: list[str],
                                                      capsys: pytest.CaptureFixture) -> None:
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in command] + ["--checkpoint", str(diverged)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rmeval: error: {diverged}: {SAID}"
    assert not (tmp_path / "out").exists()


def test_a_diverged_run_under_a_sweep_folder_is_said_and_left_out(diverged: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    # a diverged run that had saved checkpoint-N first: the run is refused, the earlier model named
    save_tiny_classifier(diverged / "checkpoint-1")
    assert main(["audit", "--checkpoint", str(diverged), "--data", DATA, "--out", str(tmp_path / "out")]) == 2
    # (the last line: building the tiny model here imported DeepSpeed, whose import logs a line)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"rmeval: error: {diverged}: {SAID}; checkpoint-1/, saved before, is scored by its own path"
    # the folder of several runs, all diverged: no checkpoint, and why
    (diverged / "checkpoint-1" / "config.json").unlink()
    assert main(["audit", "--checkpoint", str(tmp_path), "--data", DATA, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"rmeval: error: {tmp_path}: no checkpoint (no config.json in it or in its subdirectories); "
                   f"{diverged}: {SAID}")


def test_rmtrain_policy_refuses_a_diverged_reward_model(diverged: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    recipe = tmp_path / "policy.yaml"
    recipe.write_text(yaml.safe_dump({"policy": {"name_or_path": str(tmp_path / "policy")},
                                      "data": {"name": "simulated", "n_prompts": 10}}))
    assert rmtrain_main(["policy", "--config", str(recipe), "--reward-model", str(diverged), "--environment", "clean",
                         "--out", str(tmp_path / "p")]) == 2
    assert capsys.readouterr().err.strip() == f"rmtrain: error: {diverged}: {SAID}"
    assert not (tmp_path / "p").exists()


def test_a_collapsed_run_is_audited_and_said_once(diverged: Path, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """The folder of a sweep's runs: the collapsed run is audited and said once, the diverged one
    beside it is said to have left no model."""
    import torch

    run = tmp_path / "collapsed"
    model, tok = save_tiny_classifier(run)
    with torch.no_grad():
        model.score.weight.zero_()  # a constant model, as a collapsed run's is
    model.save_pretrained(run)
    reason = "held-out score SD 0 is at most 0.0001 x their root-mean-square 1.91 (training.collapse_sd)"
    (run / "train_summary.json").write_text(_summary("collapsed", reason, None))
    out = tmp_path / "audit"
    with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        assert main(["audit", "--checkpoint", str(tmp_path), "--data", DATA, "--out", str(out), "--conditions",
                     "original", "--n-boot", "20", "--wandb-mode", "disabled", "--no-progress"]) == 0
    # a constant model's undefined figures are null in the record, not scipy warnings on stderr
    assert not [w for w in warned if "constant" in str(w.message).lower()], [str(w.message) for w in warned]
    said = [r.getMessage() for r in caplog.records if r.name == "rmcore.runtime.checkpoints"]
    assert said == [f"{diverged}: {SAID}",
                    f"{run}: the run was marked collapsed ({reason}); scoring its model as it is"]
    audit = json.loads((out / "audit.json").read_text())
    assert audit["truncation"]["total"]["n"] == 12
    assert set(audit["selection"]["spearman"].values()) == {None}
