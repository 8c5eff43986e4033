"""PPO results in the same tables: `rmtrain policy --collect` reads what an OpenRLHF run wrote
(its per-step status lines in train.log, its LoRA adapter in --ckpt.output_dir, its DeepSpeed
checkpoints) into policy_summary.json, which policy-eval reads as it reads a GRPO or RLOO run.

The fixture log is written in OpenRLHF 0.11's format: ``PPOTrainer.fit`` logs
``f"✨ Global step {global_step}: {log_status}"`` through ``openrlhf.utils.logging_utils`` (format
``"%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s"``), and Ray prints a worker's
lines on the driver behind ``(PPOTrainer pid=N)``; tqdm bars share the stream with carriage
returns. The status keys are those of ``PPOTrainer.train_step`` (the actor's and critic's
``ppo_train`` means, ``_compute_rollout_stats``, the ``timing/*`` figures). Expected values are
computed by hand from the planted numbers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytestmark = pytest.mark.usefixtures("one_torch_thread")
DATA = {"name": "simulated", "n_prompts": 20, "responses_per_prompt": 2, "seed": 0}
# planted per-step means: 12 steps, so a tenth is one step
REWARDS = [0.10, 0.12, 0.15, 0.11, 0.20, 0.22, 0.25, 0.24, 0.30, 0.31, 0.33, 0.40]
KLS = [0.0, 0.001, 0.002, 0.004, 0.004, 0.005, 0.007, 0.008, 0.01, 0.011, 0.012, 0.0135]


def status(step: int, reward: float, kl: float) -> dict[str, Any]:
    return {"policy_loss": -0.01 * step, "actor_lr": 5e-07, "clip_ratio": 0.02, "kl": kl, "reward": reward * 0.9,
            "return": reward * 0.8, "response_length": 200.0 + step, "total_length": 700.0 + step,
            "entropy": float("nan"), "critic_loss": 0.5, "values": 0.1, "critic_lr": 1.5e-06,
            "timing/make_experience": 41.2, "timing/ppo_train": 30.5, "timing/broadcast": 2.1,
            "rollout/reward_mean": reward, "rollout/reward_std": 0.5, "rollout/response_length_mean": 210.0 + step,
            "rollout/truncated_rate": 0.01, "rollout/num_samples": 16384.0, "timing/generation": 60.0,
            "timing/step_total": 133.8}


def log_line(step: int, st: dict[str, Any], pid: int = 81234) -> str:
    return (f"\x1b[36m(PPOTrainer pid={pid})\x1b[0m INFO 12-01 10:{step:02d}:00 ppo_trainer.py:551] "
            f"✨ Global step {step}: {st}")


def openrlhf_log(steps: range, *, resumed_from: int | None = None) -> str:
    lines = ["(PPOTrainer pid=81234) INFO 12-01 10:00:00 ppo_trainer.py:457] checkpoint_states: {'global_step': 0}"]
    for s in steps:
        lines.append("(PolicyModelActor pid=81300) Train epoch [1/1]: 100%|██████████| 16/16 [00:30<00:00]\r"
                     + log_line(s, status(s, REWARDS[s - 1], KLS[s - 1])))
    if resumed_from is not None:  # a rerun resumed from a checkpoint logs its steps again
        for s in range(resumed_from + 1, steps.stop):
            lines.append(log_line(s, status(s, REWARDS[s - 1], KLS[s - 1]), pid=90001))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from transformers import AutoTokenizer

    from rmcore.data.loading import load_rating_set
    from rmcore.models.tiny import save_tiny, tiny_causal_lm, tiny_model

    rs = load_rating_set({**DATA, "n_prompts": 24})
    texts = [m["content"] for p in rs.prompts for m in p.messages] + [r.text for p in rs.prompts for r in p.responses]
    root = tmp_path_factory.mktemp("ppo_collect")
    policy = tiny_causal_lm(root / "policy", texts, "qwen2", vocab_size=300, pad_token="<|pad|>")
    tok = AutoTokenizer.from_pretrained(policy)
    rm = save_tiny(root / "rm01", tiny_model(tok, "qwen2", head="classifier", num_labels=1), tok)
    (rm / "train_summary.json").write_text(json.dumps({"arm": "gap_only", "seed": 2}))
    return {"policy": policy, "rm": rm, "root": root}


def recipe(material: dict[str, Path], path: Path, **openrlhf: Any) -> Path:
    raw = {"policy": {"name_or_path": str(material["policy"]), "lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
           "data": DATA, "heldout_prompts": 6, "reward_models": {"rm01": str(material["rm"])},
           "output_root": str(path.parent / "policies"),
           "training": {"algorithm": "ppo", "num_generations": 4, "max_completion_length": 8},
           "openrlhf": {"layout": "colocated", **openrlhf}, "evaluation": {"n_prompts": 4, "max_new_tokens": 4},
           "wandb": {"project": "p", "group": "g"}}
    path.write_text(yaml.safe_dump(raw))
    return path


def save_adapter(policy: Path, out: Path, seed: int) -> None:
    """What OpenRLHF's save_model leaves in --ckpt.output_dir under LoRA: the peft adapter, tokenizer."""
    import peft
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    m = peft.get_peft_model(AutoModelForCausalLM.from_pretrained(policy),
                            peft.LoraConfig(task_type=peft.TaskType.CAUSAL_LM, r=4, lora_alpha=8))
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    m.save_pretrained(out)
    AutoTokenizer.from_pretrained(policy).save_pretrained(out)


def prepared_run(material: dict[str, Path], tmp_path: Path, env: str) -> Path:
    from rmtrain.cli import main

    r = recipe(material, tmp_path / "recipe.yaml")
    assert main(["policy", "--config", str(r), "--reward-model", "rm01", "--environment", env]) == 0
    return tmp_path / "policies" / "rm01" / env


def test_collect_reads_openrlhf_log_and_adapter(material: dict[str, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    from rmtrain.cli import main

    out = prepared_run(material, tmp_path, "perturbed")
    plan = json.loads((out / "openrlhf" / "plan.json").read_text())
    assert plan["collect_command"][-1] == "--collect" and not (out / "policy_summary.json").exists()
    r = str(tmp_path / "recipe.yaml")
    # before OpenRLHF ran: one line saying what to run
    assert main(["policy", "--config", r, "--reward-model", "rm01", "--environment", "perturbed", "--collect"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rmtrain: error:") and "train_ppo.sh" in err and len(err.splitlines()) == 1
    (out / "openrlhf" / "train.log").write_text(openrlhf_log(range(1, 13), resumed_from=9), encoding="utf-8")
    save_adapter(material["policy"], out / "openrlhf" / "policy", seed=0)
    for s in (5, 10):
        (out / "openrlhf" / "checkpoints" / "_actor" / f"global_step{s}").mkdir(parents=True)
    capsys.readouterr()
    assert main(["policy", "--config", r, "--reward-model", "rm01", "--environment", "perturbed", "--collect"]) == 0
    printed = json.loads(capsys.readouterr().out)
    s = json.loads((out / "policy_summary.json").read_text())
    assert printed["steps"] == s["steps"] == 12 and s["algorithm"] == "ppo" and s["environment"] == "perturbed"
    assert s["reward_batch_means"] == REWARDS  # one per step, the resumed repeats not counted twice
    assert s["reward_mean_first"] == pytest.approx(0.10) and s["reward_mean_last"] == pytest.approx(0.40)
    assert s["kl_last"] == pytest.approx(0.0135) and s["response_length_last"] == pytest.approx(222.0)
    assert s["last_checkpoint_step"] == 10 and s["unreadable_step_lines"] == 0
    assert s["reward_model_tags"] == {"arm": "gap_only", "seed": 2} and s["n_prompts"] == 14
    assert s["adapter"] == str(out / "openrlhf" / "policy")
    assert "entropy" not in s["history"][0] and s["history"][0]["policy_loss"] == pytest.approx(-0.01)  # nan: no value
    for key in ("reward_mean_first", "reward_mean_last", "kl_last", "steps"):  # what the trl runs write
        assert key in s


def test_policy_eval_reads_ppo_runs_like_trl_runs(material: dict[str, Path], tmp_path: Path) -> None:
    from rmtrain.policy.config import load_policy_config
    from rmtrain.policy.evaluate import evaluate_pair

    dirs = {}
    for seed, env in enumerate(("clean", "perturbed")):
        out = prepared_run(material, tmp_path, env)
        (out / "openrlhf" / "train.log").write_text(openrlhf_log(range(1, 4)), encoding="utf-8")
        save_adapter(material["policy"], out / "openrlhf" / "policy", seed=seed)
        from rmtrain.policy.openrlhf import collect_ppo

        collect_ppo(out)
        dirs[env] = out

    class LongerIsBetter:
        def judge(self, items: list[tuple[str, str, str]]) -> list[str | None]:
            return ["A" if len(a) > len(b) else "B" if len(b) > len(a) else "C" for _, a, b in items]

    cfg = load_policy_config(tmp_path / "recipe.yaml")
    res = evaluate_pair(cfg, dirs["clean"], dirs["perturbed"], tmp_path / "eval", LongerIsBetter())
    assert res["n_prompts"] == 4 and res["reward_model"] == str(material["rm"])
    for env in ("clean", "perturbed"):
        assert len((dirs[env] / "eval_responses.jsonl").read_text().splitlines()) == 4


FAKE_OPENRLHF = r'''
"""Stands in for `python -m openrlhf.cli.train_ppo_ray` where OpenRLHF cannot run (no GPU): asks the
reward server for rewards as OpenRLHF's SingleTurnAgentExecutor does (one item per request), logs
each step in OpenRLHF's format, saves nothing else."""
import json, sys, urllib.request
from transformers import AutoTokenizer
argv = sys.argv[3:] if sys.argv[1:3] == ["-m", "openrlhf.cli.train_ppo_ray"] else sys.exit("not train_ppo_ray")
opt = {a: (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else True)
       for i, a in enumerate(argv) if a.startswith("--")}
tok = AutoTokenizer.from_pretrained(opt["--actor.model_name_or_path"])
rows = [json.loads(x) for x in open(opt["--data.prompt_dataset"])][:3]
for step, row in enumerate(rows, 1):
    prompt = tok.apply_chat_template(row["messages"], tokenize=False, add_generation_prompt=True)
    rewards = []
    for k in range(int(opt["--rollout.n_samples_per_prompt"])):
        body = {"query": [prompt + f"answer {k}" + tok.eos_token], "prompts": [prompt], "labels": [row["label"]]}
        req = urllib.request.Request(opt["--reward.remote_url"], data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        rewards.append(json.loads(urllib.request.urlopen(req, timeout=60).read())["rewards"][0])
    st = {"kl": 0.001 * step, "rollout/reward_mean": sum(rewards) / len(rewards),
          "wandb_key_given": float(opt.get("--logger.wandb.key") == "key-from-env")}
    print(f"(PPOTrainer pid=1) INFO 12-01 10:00:00 ppo_trainer.py:551] ✨ Global step {step}: {st}", flush=True)
'''


@pytest.mark.heavy  # three Python processes start (reward server, stand-in, collect): ~30 s idle, 85 s shared
def test_train_ppo_script_runs_server_openrlhf_and_collect(material: dict[str, Path], tmp_path: Path) -> None:
    """train_ppo.sh end to end with a stand-in for OpenRLHF: the real reward server comes up, the
    W&B key arrives from the environment, the log lands in train.log, and the script's last command
    (`rmtrain policy ... --collect`) writes policy_summary.json whose rewards are the server's."""
    from rmeval.scoring.seq_classifier import SeqClassifierScorer
    from rmtrain.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fake = tmp_path / "fake_openrlhf.py"
    fake.write_text(FAKE_OPENRLHF)
    python = tmp_path / "openrlhf_python"
    python.write_text(f"#!/usr/bin/env bash\nexec {sys.executable} {fake} \"$@\"\n")
    python.chmod(0o755)
    r = recipe(material, tmp_path / "recipe.yaml", python=str(python), reward_port=port, reward_device="cpu")
    assert main(["policy", "--config", str(r), "--reward-model", "rm01", "--environment", "clean"]) == 0
    out = tmp_path / "policies" / "rm01" / "clean"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "WANDB_API_KEY": "key-from-env"}
    proc = subprocess.run(["bash", str(out / "openrlhf" / "train_ppo.sh")], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((out / "policy_summary.json").read_text())
    assert s["steps"] == 3 and all(h["wandb_key_given"] == 1.0 for h in s["history"])
    rows = [json.loads(x) for x in (out / "openrlhf" / "prompts.jsonl").read_text().splitlines()][:3]
    ref = SeqClassifierScorer(str(material["rm"]), max_length=256)
    expected = [float(np.mean(ref.score([(json.loads(row["label"]), f"answer {k}") for k in range(4)])))
                for row in rows]
    np.testing.assert_allclose(s["reward_batch_means"], expected, rtol=0, atol=1e-6)
