"""PolicyConfig: one policy run against a reward model (``rmtrain policy``) and its evaluation
(``rmtrain policy-eval``), loaded from a recipe YAML with ``rmcore.config``'s strict key checking (a typo is an error naming the key and the file)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from rmcore.config import config_from_dict, load_recipe
from rmcore.errors import ConfigError
from rmcore.modeling import LoraSettings
from rmtrain.config import WandbSettings

ALGORITHMS = ("grpo", "rloo", "ppo")
ENVIRONMENTS = ("clean", "perturbed")
PROMPT_FORMATS = ("chat", "plain")
# the study's two families (Reward Auditor §4.2.1): controlled on the prompt, stylized on the response
DEFAULT_CONTROLLED = ["EF", "PH", "IU", "IW", "CN"]
DEFAULT_STYLIZED = ["ST", "LE", "SP", "LC", "SLC"]


@dataclass
class PolicyModelSettings:
    name_or_path: str
    dtype: str = "float32"
    # chat: the tokenizer's chat template (required); plain: ``User: ...\n\nAssistant:`` text prompts
    prompt_format: str = "chat"
    lora: LoraSettings = field(default_factory=lambda: LoraSettings(r=16, alpha=32, dropout=0.0))
    trust_remote_code: bool = False


@dataclass
class EnvironmentSettings:
    """The perturbed environment: a seeded share of prompts carries one controlled perturbation
    (the user's prompt as the policy and the reward model see it), and a seeded share gets an
    instruction asking for one stylized feature (seen by the policy only; the reward model scores
    the response against the user's prompt)."""

    controlled: list[str] = field(default_factory=lambda: list(DEFAULT_CONTROLLED))
    controlled_fraction: float = 0.5
    stylized: list[str] = field(default_factory=lambda: list(DEFAULT_STYLIZED))
    stylized_fraction: float = 0.5
    seed: int = 0
    perturbation_options: dict[str, Any] = field(default_factory=dict)  # passed to perturb_prompt


@dataclass
class RLSettings:
    algorithm: str = "grpo"  # grpo | rloo (trl, any device) | ppo (OpenRLHF, GPUs)
    learning_rate: float = 1e-5  # the actor's under ppo
    max_steps: int = 100
    per_device_batch_size: int = 8  # completions per optimizer step (trl counts completions)
    gradient_accumulation_steps: int = 1
    num_generations: int = 4  # rollouts per prompt (the study: 16)
    max_completion_length: int = 128
    temperature: float = 0.8
    top_p: float = 0.9
    repetition_penalty: float = 1.1
    beta: float = 0.04  # KL coefficient to the reference (the LoRA-free base model)
    max_grad_norm: float = 0.8
    num_epochs: int = 1
    logging_steps: int = 1
    gradient_checkpointing: bool = True  # trl's default; off for tiny CPU models (only slower there)
    save_adapter: bool = True
    use_cpu: bool = False
    reward_batch_size: int = 32
    reward_max_length: int = 1024


@dataclass
class OpenRLHFSettings:
    """PPO through OpenRLHF (``openrlhf.cli.train_ppo_ray``, 0.11 flag names). The actor's learning
    rate, rollouts per prompt, sampling, clipping and epochs come from ``training``."""

    critic_learning_rate: float = 1.5e-6
    gamma: float = 0.999
    python: str = "python3"
    num_nodes: int = 1
    num_gpus_per_node: int = 8
    vllm_num_engines: int = 4
    vllm_tensor_parallel_size: int = 2
    zero_stage: int = 3
    param_dtype: str = "bf16"
    train_batch_size: int = 128
    rollout_batch_size: int = 1024
    max_len: int = 2048
    init_kl_coef: float = 0.01
    reward_host: str = "127.0.0.1"
    reward_port: int = 5000
    extra_args: list[str] = field(default_factory=list)


@dataclass
class EvalSettings:
    n_prompts: int = 100  # held-out clean prompts, as in the study
    max_new_tokens: int = 256
    judge: str | None = None  # hf:PATH | openai:MODEL
    judge_base_url: str | None = None
    judge_max_length: int = 4096
    n_boot: int = 2000
    seed: int = 0
    # suitability.json (issue: rmeval suitability) and accuracy change per reward model, for the
    # Spearman table; keys are reward-model names as in ``reward_models``
    suitability: dict[str, str] = field(default_factory=dict)


@dataclass
class PolicyConfig:
    policy: PolicyModelSettings
    data: dict[str, Any]  # the prompt pool, any rmtrain data spec (rm_bench chat in the study)
    n_train_prompts: int | None = None  # None: every prompt not held out
    heldout_prompts: int = 100  # clean prompts kept out of training for policy-eval
    split_seed: int = 0
    seed: int = 1
    reward_model: str | None = None  # set by --reward-model
    reward_models: dict[str, str] = field(default_factory=dict)  # name -> checkpoint (sweeps, policy-eval)
    environment: str = "clean"
    output_dir: str = "outputs/policy/run"
    output_root: str = "outputs/policy"
    environments: EnvironmentSettings = field(default_factory=EnvironmentSettings)
    training: RLSettings = field(default_factory=RLSettings)
    openrlhf: OpenRLHFSettings = field(default_factory=OpenRLHFSettings)
    evaluation: EvalSettings = field(default_factory=EvalSettings)
    wandb: WandbSettings = field(default_factory=WandbSettings)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        if self.environment not in ENVIRONMENTS:
            raise ConfigError(f"unknown environment '{self.environment}': use one of {', '.join(ENVIRONMENTS)}")
        if self.training.algorithm not in ALGORITHMS:
            raise ConfigError(f"training.algorithm must be one of {ALGORITHMS}, got '{self.training.algorithm}'")
        if self.policy.prompt_format not in PROMPT_FORMATS:
            raise ConfigError(f"policy.prompt_format must be one of {PROMPT_FORMATS}, got '{self.policy.prompt_format}'")
        for name in ("controlled_fraction", "stylized_fraction"):
            v = getattr(self.environments, name)
            if not 0 <= v <= 1:
                raise ConfigError(f"environments.{name} must be in [0, 1], got {v}")
        if not isinstance(self.data, dict) or "name" not in self.data:
            raise ConfigError("data must be a mapping with a 'name' (e.g. rm_bench, simulated)")
        t = self.training
        if t.num_generations < 2:
            raise ConfigError("training.num_generations must be >= 2 (group baselines need two rollouts)")
        if t.algorithm != "ppo" and t.per_device_batch_size % t.num_generations:
            raise ConfigError(f"training.per_device_batch_size ({t.per_device_batch_size}) must be a multiple of "
                              f"training.num_generations ({t.num_generations})")
        if self.heldout_prompts < 0:
            raise ConfigError("heldout_prompts must be >= 0")


def policy_config_from_dict(raw: dict[str, Any], where: str = "config",
                            overrides: dict[str, Any] | None = None) -> PolicyConfig:
    # unset command-line flags arrive as None overrides and leave the recipe's value
    return config_from_dict(PolicyConfig, raw, where=where, overrides=overrides, required=("policy", "data"),
                            shorthand={"policy": "name_or_path"}, skip_none_overrides=True)


def is_policy_recipe(raw: dict[str, Any]) -> bool:
    return "policy" in raw


def load_policy_config(path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> PolicyConfig:
    return policy_config_from_dict(load_recipe(path), where=str(path), overrides=overrides)
