"""PPO through OpenRLHF, driven from outside (it pins its own transformers and DeepSpeed, so it
cannot share matchrm's environment).

``prepare_ppo`` writes, under ``OUT/openrlhf/``:
- ``prompts.jsonl``: the environment's rows as OpenRLHF prompt data: ``messages`` (the policy's
  conversation; ``--data.apply_chat_template``) or ``prompt`` (plain text), and ``label``, the JSON
  conversation the reward model scores against (``--data.label_key label``; the reward server reads
  it, so the rollout's style instruction never reaches the reward model);
- ``reward_server.sh`` and ``train_ppo.sh`` (the ``rmeval serve-reward`` and
  ``openrlhf.cli.train_ppo_ray`` command lines) and ``plan.json`` (both as argument lists, with the
  study's settings and how each maps to a flag).
With ``launch`` it starts the reward server and runs the training command.

Flag names are those of ``openrlhf/cli/train_ppo_ray.py`` in OpenRLHF 0.11 (hierarchical
``--actor.adam.lr`` style); every flag written is checked against ``OPENRLHF_FLAGS``.
The study's repetition penalty (1.1) has no flag there (rollouts use temperature and top-p only),
so the plan records it under ``not_supported``.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io import atomic_write_json, atomic_write_text
from rmtrain.policy.config import PolicyConfig
from rmtrain.policy.environment import read_rows

log = logging.getLogger(__name__)

# openrlhf/cli/train_ppo_ray.py (OpenRLHF 0.11.0, commit 3c3be623): the flags this module may emit
OPENRLHF_FLAGS = frozenset({
    "--ref.num_nodes", "--ref.num_gpus_per_node", "--actor.num_nodes", "--actor.num_gpus_per_node",
    "--critic.num_nodes", "--critic.num_gpus_per_node", "--vllm.num_engines", "--vllm.tensor_parallel_size",
    "--actor.model_name_or_path", "--reward.remote_url", "--ckpt.output_dir", "--ckpt.path", "--ckpt.save_hf",
    "--actor.adam.lr", "--critic.adam.lr", "--actor.max_norm", "--critic.max_norm", "--algo.advantage.gamma",
    "--algo.advantage.estimator", "--rollout.n_samples_per_prompt", "--rollout.temperature", "--rollout.top_p",
    "--rollout.max_new_tokens", "--train.max_epochs", "--train.num_episodes", "--train.batch_size",
    "--rollout.batch_size", "--train.seed", "--data.max_len", "--data.prompt_dataset", "--data.input_key",
    "--data.label_key", "--data.apply_chat_template", "--ds.zero_stage", "--ds.param_dtype", "--ds.lora.rank",
    "--ds.lora.alpha", "--ds.lora.dropout", "--ds.lora.target_modules", "--algo.kl.init_coef",
    "--actor.gradient_checkpointing_enable", "--logger.wandb.project", "--logger.wandb.group",
    "--logger.wandb.key", "--logger.wandb.org",
    "--logger.wandb.run_name", "--train.colocate_all", "--vllm.gpu_memory_utilization", "--ds.packing_samples",
    "--vllm.enable_sleep", "--ds.enable_sleep", "--ds.adam_offload", "--rollout.micro_batch_size",
    "--train.micro_batch_size", "--data.max_samples",
})


def _flag(args: list[str], name: str, *values: Any) -> None:
    if name not in OPENRLHF_FLAGS:
        raise ConfigError(f"'{name}' is not a train_ppo_ray flag of OpenRLHF 0.11")
    args.append(name)
    args.extend(str(v) for v in values)


def prompt_records(rows: list[dict[str, Any]], prompt_format: str) -> list[dict[str, Any]]:
    from rmcore.formatting import plain_prompt

    out = []
    for r in rows:
        rec: dict[str, Any] = {"prompt_id": r["prompt_id"], "label": json.dumps(r["reward_messages"], ensure_ascii=False)}
        if prompt_format == "chat":
            rec["messages"] = r["messages"]
        else:
            rec["prompt"] = plain_prompt(r["messages"])
        out.append(rec)
    return out


def reward_server_command(cfg: PolicyConfig) -> list[str]:
    o = cfg.openrlhf
    return ["rmeval", "serve-reward", "--checkpoint", str(cfg.reward_model), "--host", o.reward_host,
            "--port", str(o.reward_port), "--max-length", str(cfg.training.reward_max_length)]


def train_command(cfg: PolicyConfig, prompts_file: Path, out: Path) -> list[str]:
    o, t, pol = cfg.openrlhf, cfg.training, cfg.policy
    a: list[str] = [o.python, "-m", "openrlhf.cli.train_ppo_ray"]
    for role in ("ref", "actor", "critic"):
        _flag(a, f"--{role}.num_nodes", o.num_nodes)
        _flag(a, f"--{role}.num_gpus_per_node", o.num_gpus_per_node)
    _flag(a, "--vllm.num_engines", o.vllm_num_engines)
    _flag(a, "--vllm.tensor_parallel_size", o.vllm_tensor_parallel_size)
    _flag(a, "--actor.model_name_or_path", pol.name_or_path)
    _flag(a, "--reward.remote_url", f"http://{o.reward_host}:{o.reward_port}/get_reward")
    _flag(a, "--ckpt.output_dir", out / "policy")
    _flag(a, "--ckpt.path", out / "checkpoints")
    _flag(a, "--ckpt.save_hf")
    _flag(a, "--algo.advantage.estimator", "gae")  # PPO with a critic, as in the study
    _flag(a, "--actor.adam.lr", t.learning_rate)
    _flag(a, "--critic.adam.lr", o.critic_learning_rate)
    _flag(a, "--actor.max_norm", t.max_grad_norm)
    _flag(a, "--critic.max_norm", t.max_grad_norm)
    _flag(a, "--algo.advantage.gamma", o.gamma)
    _flag(a, "--rollout.n_samples_per_prompt", t.num_generations)
    _flag(a, "--rollout.temperature", t.temperature)
    _flag(a, "--rollout.top_p", t.top_p)
    _flag(a, "--rollout.max_new_tokens", t.max_completion_length)
    _flag(a, "--train.max_epochs", t.num_epochs)
    _flag(a, "--train.num_episodes", 1)
    _flag(a, "--train.batch_size", o.train_batch_size)
    _flag(a, "--rollout.batch_size", o.rollout_batch_size)
    _flag(a, "--train.seed", cfg.seed)
    _flag(a, "--data.max_len", o.max_len)
    _flag(a, "--data.prompt_dataset", prompts_file)
    _flag(a, "--data.label_key", "label")
    if pol.prompt_format == "chat":
        _flag(a, "--data.input_key", "messages")
        _flag(a, "--data.apply_chat_template")
    else:
        _flag(a, "--data.input_key", "prompt")
    _flag(a, "--ds.zero_stage", o.zero_stage)
    _flag(a, "--ds.param_dtype", o.param_dtype)
    lora = pol.lora
    _flag(a, "--ds.lora.rank", lora.r)
    _flag(a, "--ds.lora.alpha", lora.alpha)
    _flag(a, "--ds.lora.dropout", lora.dropout)
    targets = [lora.target_modules] if isinstance(lora.target_modules, str) else list(lora.target_modules)
    _flag(a, "--ds.lora.target_modules", *targets)
    _flag(a, "--algo.kl.init_coef", o.init_kl_coef)
    _flag(a, "--actor.gradient_checkpointing_enable")
    _flag(a, "--logger.wandb.project", cfg.wandb.project)
    _flag(a, "--logger.wandb.run_name", f"{Path(str(cfg.reward_model)).name}-{cfg.environment}")
    if cfg.wandb.group:
        _flag(a, "--logger.wandb.group", cfg.wandb.group)
    for x in o.extra_args:
        if x.startswith("--") and x not in OPENRLHF_FLAGS:
            raise ConfigError(f"openrlhf.extra_args: '{x}' is not a train_ppo_ray flag of OpenRLHF 0.11")
    return a + list(o.extra_args)


def _script(commands: list[list[str]], background_first: bool) -> str:
    lines = ["#!/usr/bin/env bash", "set -euo pipefail"]
    for i, c in enumerate(commands):
        line = shlex.join(c)
        if background_first and i == 0:
            line += " &\nRM_PID=$!\ntrap 'kill $RM_PID' EXIT"
        lines.append(line)
    return "\n".join(lines) + "\n"


def prepare_ppo(cfg: PolicyConfig, out: Path, tokenizer: Any, *, launch: bool = False) -> dict[str, Any]:
    rows = read_rows(out / "environment" / f"{cfg.environment}.jsonl")
    d = out / "openrlhf"
    prompts_file = d / "prompts.jsonl"
    atomic_write_text(prompts_file, "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                            for r in prompt_records(rows, cfg.policy.prompt_format)))
    rm_cmd, ppo_cmd = reward_server_command(cfg), train_command(cfg, prompts_file, d)
    t = cfg.training
    plan = {
        "algorithm": "ppo", "engine": "openrlhf", "environment": cfg.environment, "reward_model": str(cfg.reward_model),
        "n_prompts": len(rows), "prompts_file": str(prompts_file),
        "reward_server_command": rm_cmd, "train_command": ppo_cmd,
        "settings": {"actor_learning_rate": t.learning_rate, "critic_learning_rate": cfg.openrlhf.critic_learning_rate,
                     "rollouts_per_prompt": t.num_generations, "temperature": t.temperature, "top_p": t.top_p,
                     "max_grad_norm": t.max_grad_norm, "gamma": cfg.openrlhf.gamma, "epochs": t.num_epochs},
        "not_supported": {"repetition_penalty": {"value": t.repetition_penalty,
                                                 "why": "OpenRLHF 0.11 train_ppo_ray has no repetition-penalty flag"}},
    }
    atomic_write_text(d / "reward_server.sh", _script([rm_cmd], False))
    atomic_write_text(d / "train_ppo.sh", _script([rm_cmd, ppo_cmd], True))
    atomic_write_json(d / "plan.json", plan)
    if launch:
        plan["returncode"] = launch_ppo(cfg, rm_cmd, ppo_cmd)
    return plan


def launch_ppo(cfg: PolicyConfig, rm_cmd: list[str], ppo_cmd: list[str], wait_s: float = 600.0) -> int:
    """Start the reward server, wait until it answers, run OpenRLHF, stop the server."""
    server = subprocess.Popen([sys.executable, "-m", "rmeval.cli", *rm_cmd[1:]])
    url = f"http://{cfg.openrlhf.reward_host}:{cfg.openrlhf.reward_port}/get_reward"
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                req = urllib.request.Request(url, data=b'{"query": [], "prompts": []}', method="POST",
                                             headers={"Content-Type": "application/json"})
                urllib.request.urlopen(req, timeout=5).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise ConfigError(f"reward server did not come up at {url}") from None
                time.sleep(2)
        return subprocess.call(ppo_cmd)
    finally:
        server.terminate()
        server.wait(timeout=30)
