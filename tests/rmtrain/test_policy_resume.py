"""GRPO and RLOO through trl: how rollouts are generated (vLLM where it is installed and a GPU is
there, transformers' generate otherwise, and the summary says which), and an interrupted run
resumed from its last checkpoint.

Material: the demo's tiny policy builder (rmtrain.policy.tiny) and a tiny one-label Qwen2 reward
model (rmcore.models.tiny), trained on the simulated set. The interruption is real: the reward function
raises KeyboardInterrupt (what Ctrl-C or a scheduler's SIGINT raises) in step 5, after trl saved the
checkpoints of steps 2 and 4; the rerun is the same call. The resumed run is checked against an
uninterrupted run with the same seed: trl restores the optimizer, scheduler and RNG states, so
the two reward curves are the same."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rmcore.errors import ConfigError
from rmtrain.policy.config import policy_config_from_dict

pytestmark = pytest.mark.usefixtures("one_torch_thread")
DATA = {"name": "simulated", "n_prompts": 30, "responses_per_prompt": 2, "seed": 0}


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import torch
    from transformers import AutoTokenizer

    from rmcore.data.loading import load_rating_set
    from rmcore.models.tiny import save_tiny, tiny_model
    from rmtrain.policy.tiny import build_tiny_policy

    torch.set_num_threads(1)
    rs = load_rating_set({**DATA, "n_prompts": 24})
    texts = [m["content"] for p in rs.prompts for m in p.messages] + [r.text for p in rs.prompts for r in p.responses]
    root = tmp_path_factory.mktemp("policy_resume")
    policy = build_tiny_policy(texts, root / "policy")
    tok = AutoTokenizer.from_pretrained(policy)
    tok.chat_template = None  # the reward model reads plain text
    rm = save_tiny(root / "rm", tiny_model(tok, "qwen2", head="classifier", num_labels=1, seed=5,
                                           max_position_embeddings=1024), tok)
    return {"policy": policy, "rm": rm}


def make_cfg(material: dict[str, Path], out: Path, **over: Any) -> Any:
    raw = {"policy": {"name_or_path": str(material["policy"]), "lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
           "data": DATA, "heldout_prompts": 4, "reward_model": str(material["rm"]), "output_dir": str(out),
           "training": {"algorithm": "grpo", "learning_rate": 5e-2, "max_steps": 6, "per_device_batch_size": 8,
                        "num_generations": 4, "max_completion_length": 4, "use_cpu": True, "beta": 0.01,
                        "reward_max_length": 128, "gradient_checkpointing": False, "save_steps": 2},
           "wandb": {"mode": "disabled"}}
    return policy_config_from_dict(raw, overrides=over)


def interrupt_reward(monkeypatch: pytest.MonkeyPatch, at_call: int,
                     means: list[float] | None = None) -> Callable[[], None]:
    """The reward function raises KeyboardInterrupt at its call ``at_call`` (1-based; the rollouts
    of that step), recording each earlier batch's mean reward in ``means``; returns the undo."""
    from rmtrain.policy import reward as reward_module

    original = reward_module.ScorerReward.__call__
    n = [0]

    def interrupted(self: Any, *args: Any, **kw: Any) -> list[float]:
        n[0] += 1
        if n[0] == at_call:
            raise KeyboardInterrupt
        out = original(self, *args, **kw)
        if means is not None:
            means.append(float(np.mean(out)))
        return out

    monkeypatch.setattr(reward_module.ScorerReward, "__call__", interrupted)
    return lambda: monkeypatch.setattr(reward_module.ScorerReward, "__call__", original)


def test_without_vllm_rollouts_use_generate_and_say_so(material: dict[str, Path], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from rmtrain.policy.train import rollout_engine, trl_arguments

    trl_imports = importlib.import_module("trl.import_utils")
    if trl_imports.is_vllm_available():
        pytest.skip("vLLM is installed here: scripts/gpu_grpo_step.py covers the vLLM path")
    cfg = make_cfg(material, tmp_path)
    engine = rollout_engine(cfg)
    assert engine == {"engine": "generate", "why": "vLLM is not installed (pip install vllm, on a CUDA machine)"}
    assert "use_vllm" not in trl_arguments(cfg, tmp_path, engine)
    with pytest.raises(ConfigError, match="training.generation: vllm, but vLLM is not installed"):
        rollout_engine(make_cfg(material, tmp_path, **{"training.generation": "vllm"}))
    # where vLLM and a GPU are there, the recipe's vLLM keys reach trl's config
    monkeypatch.setattr(trl_imports, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    cfg = make_cfg(material, tmp_path, **{"training.use_cpu": False, "training.vllm_gpu_memory_utilization": 0.25,
                                          "training.vllm_enable_sleep_mode": True})
    engine = rollout_engine(cfg)
    assert engine["engine"] == "vllm" and engine["mode"] == "colocate"
    args = trl_arguments(cfg, tmp_path, engine)
    assert (args["use_vllm"], args["vllm_mode"], args["vllm_gpu_memory_utilization"],
            args["vllm_enable_sleep_mode"]) == (True, "colocate", 0.25, True)


@pytest.mark.parametrize("algorithm", ["grpo", pytest.param("rloo", marks=pytest.mark.heavy)])
def test_interrupted_run_resumes_from_its_last_checkpoint(material: dict[str, Path], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, algorithm: str) -> None:
    from rmtrain.policy.train import train_policy

    over = {"training.algorithm": algorithm}
    whole = train_policy(make_cfg(material, tmp_path / "whole", **over))
    assert whole["rollouts"]["engine"] in ("generate", "vllm") and whole["resumed_from"] is None

    calls: list[float] = []
    restore = interrupt_reward(monkeypatch, 5, calls)  # step 5's rollouts: after the checkpoints of steps 2 and 4
    out = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        train_policy(make_cfg(material, out, **over))
    assert not (out / "policy_summary.json").exists()
    assert sorted(p.name for p in (out / "trainer").glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    restore()

    resumed = train_policy(make_cfg(material, out, **over))
    assert resumed["resumed_from"] == str(out / "trainer" / "checkpoint-4") and resumed["steps"] == 6
    assert resumed["n_rewarded"] == whole["n_rewarded"] == 6 * 8
    np.testing.assert_allclose(resumed["reward_batch_means"][:4], calls, rtol=0, atol=1e-9)
    np.testing.assert_allclose(resumed["reward_batch_means"], whole["reward_batch_means"], rtol=0, atol=1e-6)
    assert [h["step"] for h in resumed["history"]] == [h["step"] for h in whole["history"]]
    assert (out / "adapter" / "adapter_config.json").exists()


def test_a_changed_recipe_does_not_resume_silently(material: dict[str, Path], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from rmtrain.policy.train import train_policy

    restore = interrupt_reward(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        train_policy(make_cfg(material, tmp_path, **{"training.max_steps": 4}))
    restore()
    with pytest.raises(ConfigError, match=r"interrupted run \(checkpoint-2\) trained with other settings \(training\)"):
        train_policy(make_cfg(material, tmp_path, **{"training.max_steps": 4, "training.learning_rate": 1e-3}))
    s = train_policy(make_cfg(material, tmp_path, **{"training.max_steps": 4, "training.learning_rate": 1e-3}),
                     force=True)  # --force starts over
    assert s["resumed_from"] is None and s["steps"] == 4
    assert json.loads((tmp_path / "policy_summary.json").read_text())["steps"] == 4


def test_missing_policy_path_is_one_line(material: dict[str, Path], tmp_path: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    import yaml

    from rmtrain.cli import main

    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"policy": "outputs/demo/tiny_policy_not_built", "data": DATA}))
    assert main(["policy", "--config", str(recipe), "--reward-model", str(material["rm"]), "--environment", "clean",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Repo id" not in err
    assert "outputs/demo/tiny_policy_not_built not found" in err
    assert "python -m rmtrain.policy.tiny outputs/demo/tiny_policy_not_built" in err


def test_policy_command_prints_its_summary_alone(material: dict[str, Path], tmp_path: Path,
                                                 capfd: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """stdout carries the summary only: with its tqdm off, transformers' Trainer would print every
    log dict there (trl's per-step rewards and KL); the run's progress goes to stderr instead. Under
    ``accelerate launch`` the main process alone prints it (the finished run read again as rank 1)."""
    import yaml

    from rmtrain.cli import main

    raw = {"policy": {"name_or_path": str(material["policy"]), "lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
           "data": DATA, "heldout_prompts": 4, "reward_model": str(material["rm"]),
           "training": {"algorithm": "grpo", "max_steps": 2, "logging_steps": 1, "per_device_batch_size": 8,
                        "num_generations": 4, "max_completion_length": 4, "use_cpu": True,
                        "reward_max_length": 128, "gradient_checkpointing": False, "save_steps": 2},
           "wandb": {"mode": "disabled"}}
    recipe = tmp_path / "policy.yaml"
    recipe.write_text(yaml.safe_dump(raw))
    capfd.readouterr()
    assert main(["policy", "--config", str(recipe), "--reward-model", str(material["rm"]), "--environment", "clean",
                 "--out", str(tmp_path / "out")]) == 0
    out = capfd.readouterr()
    summary = json.loads(out.out)  # nothing but the summary on stdout
    assert summary["steps"] == 2 and summary["environment"] == "clean"
    assert "grpo clean policy: 2 of 2 steps (100%)" in out.err
    monkeypatch.setenv("RANK", "1")
    assert main(["policy", "--config", str(recipe), "--reward-model", str(material["rm"]), "--environment", "clean",
                 "--out", str(tmp_path / "out")]) == 0
    assert capfd.readouterr().out == ""


def test_the_reward_model_scores_at_its_training_length(material: dict[str, Path], tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """``training.reward_max_length`` unset: the reward model scores at the length it was trained with
    (its run's matchrm_config.json), recorded in policy_summary.json and the W&B config; the PPO plan's
    reward server is started at that length; a user's length other than it is said once on stderr."""
    import logging
    import shutil

    import yaml

    from rmtrain.cli import main
    from tests.support import read_run

    rm = tmp_path / "rm"
    shutil.copytree(material["rm"], rm)  # its 1024 positions would be the length without a training record
    (rm / "matchrm_config.json").write_text(json.dumps({"arm": "bradley_terry", "seed": 2,
                                                        "training": {"max_length": 48}}))
    recipe = tmp_path / "policy.yaml"
    recipe.write_text(yaml.safe_dump({
        "policy": {"name_or_path": str(material["policy"]), "lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
        "data": DATA, "heldout_prompts": 4,
        "training": {"algorithm": "grpo", "max_steps": 1, "per_device_batch_size": 8, "num_generations": 4,
                     "max_completion_length": 4, "use_cpu": True, "gradient_checkpointing": False},
        "wandb": {"mode": "offline", "project": "policy-t"}}))
    argv = ["policy", "--config", str(recipe), "--reward-model", str(rm), "--environment", "clean"]
    with caplog.at_level(logging.WARNING):
        assert main([*argv, "--out", str(tmp_path / "grpo")]) == 0
    summary = json.loads((tmp_path / "grpo" / "policy_summary.json").read_text())
    assert (summary["reward_max_length"], summary["reward_training_max_length"]) == (48, 48)
    assert read_run(tmp_path / "grpo" / "wandb")["config"]["reward_max_length"] == 48
    assert main([*argv, "--out", str(tmp_path / "ppo"), "--set", "training.algorithm=ppo"]) == 0
    cmd = json.loads((tmp_path / "ppo" / "openrlhf" / "plan.json").read_text())["reward_server_command"]
    assert cmd[cmd.index("--max-length") + 1] == "48"
    assert not [r for r in caplog.records if "trained with max_length" in r.getMessage()]
    with caplog.at_level(logging.WARNING):
        assert main([*argv, "--out", str(tmp_path / "ppo32"), "--set", "training.algorithm=ppo",
                     "--set", "training.reward_max_length=32"]) == 0
    plan = json.loads((tmp_path / "ppo32" / "openrlhf" / "plan.json").read_text())
    cmd = plan["reward_server_command"]
    assert cmd[cmd.index("--max-length") + 1] == "32" and plan["reward_max_length"] == 32
    said = [r.getMessage() for r in caplog.records if "trained with max_length" in r.getMessage()]
    assert said == [f"max_length 32: {rm} was trained with max_length 48; scoring at 32 tokens"]


def test_a_resumed_policy_run_logs_on_in_its_wandb_run(material: dict[str, Path], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``rmtrain policy`` interrupted after its step-2 checkpoint and run again goes on in the W&B run
    it began (its id kept in OUT, as ``rmtrain train`` keeps it) and records where it resumed;
    ``--force`` starts a new W&B run."""
    import yaml

    from rmtrain.cli import main
    from tests.support import read_runs

    recipe = tmp_path / "policy.yaml"
    recipe.write_text(yaml.safe_dump({
        "policy": {"name_or_path": str(material["policy"]), "lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
        "data": DATA, "heldout_prompts": 4,
        "training": {"algorithm": "grpo", "max_steps": 3, "per_device_batch_size": 8, "num_generations": 4,
                     "max_completion_length": 4, "use_cpu": True, "gradient_checkpointing": False, "save_steps": 2},
        "wandb": {"mode": "offline", "project": "policy-t", "group": "g"}}))
    out = tmp_path / "out"
    argv = ["policy", "--config", str(recipe), "--reward-model", str(material["rm"]), "--environment", "clean",
            "--out", str(out)]
    restore = interrupt_reward(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    restore()
    assert main(argv) == 0
    first, resumed = read_runs(out / "wandb")
    assert first["id"] == resumed["id"] and first["name"] == resumed["name"]
    assert (resumed["project"], resumed["group"], resumed["job_type"]) == ("policy-t", "g", "policy")
    assert first["config"]["resumed_from"] is None and resumed["config"]["resumed_from"] == "checkpoint-2"
    assert resumed["summary"]["resumed_from"] == str(out / "trainer" / "checkpoint-2")
    assert main([*argv, "--force"]) == 0
    assert len({r["id"] for r in read_runs(out / "wandb")}) == 2
