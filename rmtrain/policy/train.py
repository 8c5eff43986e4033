"""`train_policy(cfg)`: a LoRA policy trained against a reward model in one environment.

``grpo`` and ``rloo`` run trl's GRPOTrainer / RLOOTrainer (any device, CPU included) with the
reward model as a reward function (``rmtrain.policy.reward.ScorerReward``: rmeval's scorer and text
layout, so the reward is what ``rmeval`` measures). ``ppo`` runs through OpenRLHF
(``rmtrain.policy.openrlhf``): matchrm writes the prompt files and the command and serves the reward.

Outputs in ``OUT/``: ``environment/`` (the training rows and the held-out prompts, written before
training), ``adapter/`` (the LoRA adapter; ``PeftModel.from_pretrained(base, OUT/adapter)``),
``policy_summary.json`` and the W&B run (reward mean/SD, KL to the reference, response length,
environment; tags from the reward model's arm and seed).
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from rmcore.checkpoints import CONFIG_FILE
from rmcore.checkpoints import SUMMARY_FILE as RUN_SUMMARY_FILE
from rmcore.errors import ConfigError
from rmcore.formatting import plain_prompt
from rmcore.io import atomic_write_json
from rmeval.reward_server import check_reward_checkpoint
from rmtrain.policy.config import PolicyConfig
from rmtrain.policy.environment import build_environment, read_rows

log = logging.getLogger(__name__)

SUMMARY_FILE = "policy_summary.json"
# trl's logged names -> ours (W&B and policy_summary.json)
LOG_KEYS = {"reward": "reward_mean", "reward_std": "reward_sd", "kl": "kl",
            "completions/mean_length": "response_length"}


def reward_model_tags(reward_model: str) -> dict[str, Any]:
    """arm and seed of an ``rmtrain train`` checkpoint (train_summary.json, else matchrm_config.json)."""
    out: dict[str, Any] = {}
    for name in (RUN_SUMMARY_FILE, CONFIG_FILE):
        p = Path(reward_model) / name
        if p.exists():
            d = json.loads(p.read_text())
            for k in ("arm", "seed"):
                if k in d and k not in out:
                    out[k] = d[k]
    return out


def load_policy_tokenizer(cfg: PolicyConfig) -> Any:
    from rmcore.modeling import load_tokenizer

    tok = load_tokenizer(cfg.policy.name_or_path, cfg.policy.trust_remote_code)
    check_prompt_format(cfg, tok)
    return tok


def check_prompt_format(cfg: PolicyConfig, tokenizer: Any) -> None:
    if cfg.policy.prompt_format == "chat" and not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"policy {cfg.policy.name_or_path} has no chat template: set policy.prompt_format: plain "
                          "(prompts as 'User: ...\\n\\nAssistant:') or use a policy whose tokenizer has a chat template")


def policy_prompt(messages: list[dict[str, str]], prompt_format: str) -> Any:
    """What the trainer gets as ``prompt``: conversational messages or the documented plain text."""
    return messages if prompt_format == "chat" else plain_prompt(messages)


def tenth_means(values: list[float]) -> tuple[float, float]:
    """Mean of the first and of the last tenth (at least one value each) of a training curve."""
    if not values:
        return math.nan, math.nan
    k = max(1, len(values) // 10)
    return float(sum(values[:k]) / k), float(sum(values[-k:]) / k)


def train_policy(cfg: PolicyConfig, *, force: bool = False, launch: bool = False) -> dict[str, Any]:
    cfg.validate()
    if not cfg.reward_model:
        raise ConfigError("no reward model: pass --reward-model DIR (a checkpoint written by `rmtrain train`)")
    check_reward_checkpoint(cfg.reward_model)
    out = Path(cfg.output_dir)
    if (out / SUMMARY_FILE).exists() and not force:
        log.info("%s exists; not retraining (--force retrains)", out / SUMMARY_FILE)
        return json.loads((out / SUMMARY_FILE).read_text())
    tokenizer = load_policy_tokenizer(cfg)
    env_counts = build_environment(cfg, out / "environment")
    atomic_write_json(out / "policy_config.json", cfg.to_dict())
    if cfg.training.algorithm == "ppo":
        from rmtrain.policy.openrlhf import prepare_ppo

        return prepare_ppo(cfg, out, tokenizer, launch=launch)
    return _train_trl(cfg, out, tokenizer, env_counts)


def _train_trl(cfg: PolicyConfig, out: Path, tokenizer: Any, env_counts: dict[str, Any]) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from peft import LoraConfig, TaskType
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer

    from rmcore.modeling import resolve_model_path, torch_dtype
    from rmcore.tracking import Tracker
    from rmtrain.policy.reward import ScorerReward

    t, pol = cfg.training, cfg.policy
    rows = read_rows(out / "environment" / f"{cfg.environment}.jsonl")
    data = Dataset.from_list([{"prompt": policy_prompt(r["messages"], pol.prompt_format),
                               "reward_messages": json.dumps(r["reward_messages"], ensure_ascii=False)}
                              for r in rows])
    torch.manual_seed(cfg.seed)
    model = AutoModelForCausalLM.from_pretrained(resolve_model_path(pol.name_or_path), dtype=torch_dtype(pol.dtype),
                                                 trust_remote_code=pol.trust_remote_code)
    if tokenizer.pad_token is None:  # generation only; trl masks everything after EOS
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    lora = LoraConfig(task_type=TaskType.CAUSAL_LM, r=pol.lora.r, lora_alpha=pol.lora.alpha,
                      lora_dropout=pol.lora.dropout, target_modules=pol.lora.target_modules)
    # the reward model sits on this process's device (one copy per process under accelerate)
    device = "cpu" if t.use_cpu or not torch.cuda.is_available() else f"cuda:{os.environ.get('LOCAL_RANK', 0)}"
    reward = ScorerReward(cfg.reward_model, max_length=t.reward_max_length, batch_size=t.reward_batch_size,
                          device=device)
    common = dict(output_dir=str(out / "trainer"), learning_rate=t.learning_rate, max_steps=t.max_steps,
                  num_train_epochs=t.num_epochs, per_device_train_batch_size=t.per_device_batch_size,
                  gradient_accumulation_steps=t.gradient_accumulation_steps, num_generations=t.num_generations,
                  max_completion_length=t.max_completion_length, temperature=t.temperature, top_p=t.top_p,
                  repetition_penalty=t.repetition_penalty, beta=t.beta, max_grad_norm=t.max_grad_norm,
                  logging_steps=t.logging_steps, seed=cfg.seed, data_seed=cfg.seed, use_cpu=t.use_cpu,
                  report_to="none", save_strategy="no", disable_tqdm=True,
                  gradient_checkpointing=t.gradient_checkpointing)
    if t.algorithm == "grpo":
        args, trainer_cls = GRPOConfig(**common), GRPOTrainer
    else:
        args, trainer_cls = RLOOConfig(**common), RLOOTrainer

    rm_tags = reward_model_tags(cfg.reward_model)
    tags = [f"environment:{cfg.environment}", f"algorithm:{t.algorithm}"] + [f"rm_{k}:{v}" for k, v in rm_tags.items()]
    tracker = Tracker(project=cfg.wandb.project, name=f"{Path(cfg.reward_model).name}-{cfg.environment}",
                      group=cfg.wandb.group, tags=tags + list(cfg.wandb.tags), mode=cfg.wandb.mode,
                      dir=out, job_type="policy", entity=cfg.wandb.entity,
                      config={**cfg.to_dict(), "reward_model_tags": rm_tags, "environment_counts": env_counts})
    history: list[dict[str, float]] = []

    class LogToTracker(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            logs = logs or {}
            row = {ours: float(logs[k]) for k, ours in LOG_KEYS.items() if logs.get(k) is not None}
            if row:
                history.append({"step": state.global_step, **row})
                tracker.log({**{f"policy/{k}": v for k, v in row.items()}, "policy/environment": cfg.environment},
                            step=state.global_step)

    trainer = trainer_cls(model=model, reward_funcs=reward, args=args, train_dataset=data,
                          processing_class=tokenizer, peft_config=lora, callbacks=[LogToTracker()])
    trainer.train()
    if t.save_adapter:
        trainer.model.save_pretrained(out / "adapter")
        tokenizer.save_pretrained(out / "adapter")
    first, last = tenth_means(reward.batch_means)
    kl = [h["kl"] for h in history if "kl" in h]
    lengths = [h["response_length"] for h in history if "response_length" in h]
    summary = {
        "algorithm": t.algorithm, "environment": cfg.environment, "reward_model": str(cfg.reward_model),
        "reward_model_tags": rm_tags, "policy": pol.name_or_path, "steps": int(trainer.state.global_step),
        "n_prompts": len(rows), "reward_mean_first": first, "reward_mean_last": last,
        "reward_batch_means": reward.batch_means, "kl_last": kl[-1] if kl else None,
        "response_length_last": lengths[-1] if lengths else None, "n_rewarded": reward.n_scored,
        "environment_counts": env_counts, "adapter": str(out / "adapter") if t.save_adapter else None,
        "seed": cfg.seed, "history": history,
    }
    tracker.summary({k: v for k, v in summary.items() if isinstance(v, (int, float, str)) or v is None})
    tracker.finish()
    atomic_write_json(out / SUMMARY_FILE, summary)
    reward.close()
    del trainer, model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return summary
