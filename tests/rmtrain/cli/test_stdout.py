"""stdout carries a command's results only: ``rmtrain train ... | python -c "import json, sys;
json.load(sys.stdin)"`` works, however chatty the libraries underneath (DeepSpeed logs "Setting
accelerator to CPU" to stdout when it is imported), and the summary is titled by arm and seed as the
run's reports are. Run as the user runs it, in a process of its own: the library messages that
matter here are printed once per process, at import (DeepSpeed's accelerator line; transformers'
"[INFO] Running in WANDB offline mode" under WANDB_MODE=offline). The toy experiments' commands
(``rmeval pool``, ``rmeval leaderboard``, ``rmtrain filter-experiment``), whose tiny models' tokenizer
training wrote blank lines to stdout, are checked where their tests run them (capfd: the file
descriptor, not only ``sys.stdout``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

TINY = ["data.n_prompts=40", "max_train_pairs=16", "training.per_device_batch_size=8", "training.max_length=64",
        "training.eval_batch_size=32", "wandb.mode=disabled"]


@pytest.mark.slow  # ~40 s: a fresh process imports torch, transformers and deepspeed, then trains 2 steps
def test_train_prints_json_alone(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "rmtrain.cli", "train", "--config", "recipes/demo.yaml", "--arm", "bradley_terry",
           "--seed", "2", "--out", str(tmp_path / "run"), *[a for kv in TINY for a in ("--set", kv)]]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    # cwd: the checkout, so `-m rmtrain.cli` runs this tree's code
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)  # nothing but the summary on stdout
    assert summary["title"] == "bradley_terry seed 2" and list(summary)[0] == "title"
    assert summary["arm"] == "bradley_terry" and summary["n_train_pairs"] == 16
    # the run's progress went to stderr (not a terminal here): its closing line
    assert "bradley_terry seed2 lr=0.0001: 2 of 2 steps (100%)" in proc.stderr


@pytest.mark.slow  # ~12 s: two fresh processes, the tiny policy built, then one GRPO step
def test_tiny_policy_and_policy_training_print_their_result_alone(tmp_path: Path, minilm_ckpt: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    tiny = subprocess.run([sys.executable, "-m", "rmtrain.policy.tiny", str(tmp_path / "tiny")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert tiny.returncode == 0, tiny.stderr[-3000:]
    assert tiny.stdout == f"{tmp_path / 'tiny'}\n"  # the model's path alone
    small = ["policy.name_or_path=" + str(tmp_path / "tiny"), "training.max_steps=1",
             "training.per_device_batch_size=4", "training.num_generations=2", "training.max_completion_length=2",
             "data.n_prompts=30", "heldout_prompts=5", "n_train_prompts=8"]
    cmd = [sys.executable, "-m", "rmtrain.cli", "policy", "--config", "recipes/policy_demo.yaml", "--reward-model",
           str(minilm_ckpt), "--environment", "clean", "--out", str(tmp_path / "policy"),
           *[a for kv in small for a in ("--set", kv)]]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)  # nothing but the summary on stdout
    assert summary["algorithm"] == "grpo" and summary["steps"] == 1
    assert "Running in WANDB offline mode" in proc.stderr  # the library's notice, on stderr
