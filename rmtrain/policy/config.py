"""PolicyConfig: one policy run against a reward model (``rmtrain policy``) and its evaluation
(``rmtrain policy-eval``), loaded from a recipe YAML with ``rmcore.settings.recipes``'s strict key checking
(a typo is an error naming the key and the file)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io.tables import read_table
from rmcore.models.device import DTYPES, check_device_name
from rmcore.models.modeling import LoraSettings
from rmcore.settings.fields import bounded
from rmcore.settings.recipes import config_from_dict, load_recipe
from rmeval.perturbations import CONTROLLED_CODES, STYLIZED_CODES
from rmeval.stats.settings import n_boot_field
from rmtrain.config import WandbSettings, short_model_name

ALGORITHMS = ("grpo", "rloo", "ppo")
ENVIRONMENTS = ("clean", "perturbed")
PROMPT_FORMATS = ("chat", "plain")
# the study's two families (Reward Auditor §4.2.1): controlled on the prompt, stylized on the response
# (the built-in codes of their registries, rmeval.perturbations)
DEFAULT_CONTROLLED = list(CONTROLLED_CODES)
DEFAULT_STYLIZED = list(STYLIZED_CODES)


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
    controlled_fraction: float = bounded(0.5, ge=0, le=1)
    stylized: list[str] = field(default_factory=lambda: list(DEFAULT_STYLIZED))
    stylized_fraction: float = bounded(0.5, ge=0, le=1)
    seed: int = bounded(0, ge=0)
    perturbation_options: dict[str, Any] = field(default_factory=dict)  # passed to perturb_prompt


@dataclass
class RLSettings:
    algorithm: str = "grpo"  # grpo | rloo (trl, any device) | ppo (OpenRLHF, GPUs)
    learning_rate: float = bounded(1e-5, gt=0)  # the actor's under ppo
    max_steps: int = bounded(100, ge=1)
    per_device_batch_size: int = bounded(8, ge=1)  # completions per optimizer step (trl counts completions)
    gradient_accumulation_steps: int = bounded(1, ge=1)
    num_generations: int = bounded(4, ge=2)  # rollouts per prompt (the study: 16)
    max_completion_length: int = bounded(128, ge=1)
    temperature: float = bounded(0.8, gt=0)
    top_p: float = bounded(0.9, gt=0, le=1)
    repetition_penalty: float = bounded(1.1, gt=0)
    beta: float = bounded(0.04, ge=0)  # KL coefficient to the reference (the LoRA-free base model)
    max_grad_norm: float = bounded(0.8, ge=0)
    num_epochs: int = bounded(1, ge=1)
    logging_steps: int = bounded(1, ge=1)
    gradient_checkpointing: bool = True  # trl's default; off for tiny CPU models (only slower there)
    save_adapter: bool = True
    use_cpu: bool = False
    reward_batch_size: int = bounded(32, ge=1)
    # tokens per text the reward model scores; None: the length it was trained with (a checkpoint of
    # rmtrain train, rmcore.runtime.checkpoints.scoring_max_length), else its own limit. A value other than
    # the training length is said on stderr
    reward_max_length: int | None = bounded(None, ge=1)
    reward_device: str = "auto"  # rmcore.models.device: auto = this process's GPU where there is one, else the CPU
    reward_dtype: str = "auto"  # auto: bfloat16 on a GPU, float32 on the CPU
    # rollouts: vLLM (trl's use_vllm) where it is installed and a GPU is there, else transformers' generate
    generation: str = "auto"  # auto | vllm | generate
    vllm_mode: str = "colocate"  # colocate: vLLM inside each training process; server: `trl vllm-serve`
    vllm_gpu_memory_utilization: float = bounded(0.3, gt=0, le=1)
    vllm_tensor_parallel_size: int = bounded(1, ge=1)
    vllm_enable_sleep_mode: bool = False  # colocate: vLLM's memory released while the policy trains
    vllm_server_base_url: str | None = None  # server mode
    # a checkpoint every N steps; a rerun of an interrupted run resumes from the last
    save_steps: int = bounded(50, ge=1)
    save_total_limit: int = bounded(2, ge=1)


COLOCATE = ("all", "actor_ref", "none")
LAYOUTS = ("colocated", "multi_node")
GENERATION = ("auto", "vllm", "generate")


@dataclass
class RayLayout:
    """Where OpenRLHF puts its models (``train_ppo_ray``'s placement flags) on ``nodes`` x
    ``gpus_per_node`` GPUs. ``colocate: all``: actor, reference, critic and the vLLM engines share
    the actor's GPUs, each asleep (weights offloaded) while the others work (``--train.colocate_all``
    with vLLM and DeepSpeed sleep mode; OpenRLHF's 8-GPU setup); ``actor_ref``: actor and reference
    share GPUs, the critic and vLLM have their own; ``none``: every role has its own GPUs."""

    nodes: int = bounded(1, ge=1)
    gpus_per_node: int = bounded(8, ge=1)
    colocate: str = "all"
    actor_nodes: int = bounded(1, ge=1)
    actor_gpus_per_node: int = bounded(8, ge=1)
    ref_nodes: int = bounded(1, ge=1)
    ref_gpus_per_node: int = bounded(8, ge=1)
    critic_nodes: int = bounded(1, ge=1)
    critic_gpus_per_node: int = bounded(8, ge=1)
    vllm_engines: int = bounded(4, ge=1)
    vllm_tensor_parallel_size: int = bounded(2, ge=1)
    # of each GPU's memory; colocated: leaves room for the others
    vllm_gpu_memory_utilization: float = bounded(0.5, gt=0, le=1)
    adam_offload: bool = False

    def world(self, role: str) -> int:
        return getattr(self, f"{role}_nodes") * getattr(self, f"{role}_gpus_per_node")

    def gpus(self, with_reference: bool = True) -> dict[str, int]:
        """GPUs each role asks Ray for (its placement groups, as ``train_ppo_ray.train`` builds them),
        and their total: colocated roles are counted once."""
        vllm = self.vllm_engines * self.vllm_tensor_parallel_size
        if self.colocate == "all":
            return {"actor+reference+critic+vllm": self.world("actor"), "total": self.world("actor")}
        out = {"actor+reference" if self.colocate == "actor_ref" else "actor": self.world("actor")}
        if self.colocate == "none" and with_reference:
            out["reference"] = self.world("ref")
        out.update({"critic": self.world("critic"), "vllm": vllm})
        out["total"] = sum(out.values())
        return out

    def validate(self, where: str) -> None:
        if self.colocate not in COLOCATE:
            raise ConfigError(f"{where}.colocate must be one of {', '.join(COLOCATE)}, got '{self.colocate}'")
        for role in ("actor", "ref", "critic"):
            if (getattr(self, f"{role}_nodes") > self.nodes
                    or getattr(self, f"{role}_gpus_per_node") > self.gpus_per_node):
                raise ConfigError(f"{where}: {role} asks for {getattr(self, f'{role}_nodes')} node(s) x "
                                  f"{getattr(self, f'{role}_gpus_per_node')} GPUs, the layout has {self.nodes} x "
                                  f"{self.gpus_per_node}")
        if self.vllm_engines < 1 or self.vllm_tensor_parallel_size < 1:
            raise ConfigError(f"{where}: vllm_engines and vllm_tensor_parallel_size must be >= 1")
        if self.colocate != "none" and self.world("ref") != self.world("actor"):
            raise ConfigError(f"{where}: colocated reference and actor need the same nodes and GPUs per node")
        if self.colocate == "all":
            vllm = self.vllm_engines * self.vllm_tensor_parallel_size
            if vllm != self.world("actor") or self.world("critic") != self.world("actor"):
                raise ConfigError(f"{where}: colocate all needs vllm_engines x vllm_tensor_parallel_size ({vllm}) "
                                  f"and the critic's GPUs ({self.world('critic')}) equal to the actor's "
                                  f"({self.world('actor')})")
        total, have = self.gpus()["total"], self.nodes * self.gpus_per_node
        if total > have:
            raise ConfigError(f"{where} asks Ray for {total} GPUs ({self.gpus()}) but has {self.nodes} node(s) x "
                              f"{self.gpus_per_node} = {have}; its placement groups would never be ready")


def _multi_node() -> RayLayout:
    # 4 nodes x 8: actor and reference on 2 nodes, the critic and 4 vLLM engines (TP 2) on one each
    return RayLayout(nodes=4, colocate="actor_ref", actor_nodes=2, ref_nodes=2, vllm_gpu_memory_utilization=0.9)


@dataclass
class OpenRLHFSettings:
    """PPO through OpenRLHF (``openrlhf.cli.train_ppo_ray``, 0.11 flag names). The actor's learning
    rate, rollouts per prompt, sampling, clipping and epochs come from ``training``; ``layout``
    picks where the models go (``colocated``: one 8-GPU node; ``multi_node``: a larger cluster)."""

    layout: str = "colocated"
    colocated: RayLayout = field(default_factory=RayLayout)
    multi_node: RayLayout = field(default_factory=_multi_node)
    critic_learning_rate: float = bounded(1.5e-6, gt=0)
    gamma: float = bounded(0.999, ge=0, le=1)
    python: str = "python3"
    zero_stage: int = bounded(3, ge=0, le=3)
    param_dtype: str = "bf16"
    train_batch_size: int = bounded(128, ge=1)
    rollout_batch_size: int = bounded(1024, ge=1)
    micro_train_batch_size: int = bounded(1, ge=1)
    micro_rollout_batch_size: int = bounded(1, ge=1)
    max_len: int = bounded(2048, ge=1)
    init_kl_coef: float = bounded(0.01, ge=0)
    # DeepSpeed checkpoints every N steps; a rerun of train_ppo.sh resumes from the last
    save_steps: int = bounded(20, ge=1)
    reward_host: str = "127.0.0.1"
    reward_port: int = bounded(5000, ge=1, le=65535)
    reward_device: str = "auto"  # rmeval serve-reward --device (auto: cuda:0 where there is a GPU)
    reward_dtype: str = "auto"  # auto: bfloat16 on a GPU
    extra_args: list[str] = field(default_factory=list)

    @property
    def ray(self) -> RayLayout:
        return getattr(self, self.layout)

    def validate(self) -> None:
        if self.layout not in LAYOUTS:
            raise ConfigError(f"openrlhf.layout must be one of {', '.join(LAYOUTS)}, got '{self.layout}'")
        self.ray.validate(f"openrlhf.{self.layout}")


@dataclass
class EvalSettings:
    n_prompts: int = bounded(100, ge=1)  # held-out clean prompts, as in the study
    max_new_tokens: int = bounded(256, ge=1)
    judge: str | None = None  # hf:PATH | openai:MODEL
    judge_base_url: str | None = None
    judge_max_length: int = bounded(4096, ge=1)
    device: str = "auto"  # the policies' greedy answers and an hf: judge (rmcore.models.device)
    dtype: str = "auto"
    n_boot: int = n_boot_field(help=None)
    seed: int = bounded(0, ge=0)
    # suitability.json (issue: rmeval suitability) and accuracy change per reward model, for the
    # Spearman table; keys are reward-model names as in ``reward_models``
    suitability: dict[str, str] = field(default_factory=dict)


@dataclass
class SweepRuns:
    """Reward models from a sweep's final runs: one per arm at ``seed``, found in the sweep's
    ``summary.csv`` (else its ledger), named by arm."""

    sweep: str  # the sweep's output directory (rmtrain sweep --out)
    arms: list[str] = field(default_factory=list)
    seed: int = bounded(1, ge=0)
    model: str | None = None  # which model, when the sweep trained several
    recipe: str | None = None  # the sweep's recipe, named in the message when the sweep has not run


@dataclass
class PolicyConfig:
    policy: PolicyModelSettings
    data: dict[str, Any]  # the prompt pool, any rmtrain data spec (rm_bench chat in the study)
    n_train_prompts: int | None = bounded(None, ge=1)  # None: every prompt not held out
    heldout_prompts: int = bounded(100, ge=0)  # clean prompts kept out of training for policy-eval
    split_seed: int = bounded(0, ge=0)
    seed: int = bounded(1, ge=0)
    reward_model: str | None = None  # set by --reward-model
    reward_models: dict[str, str] = field(default_factory=dict)  # name -> checkpoint (sweeps, policy-eval)
    reward_models_from: SweepRuns | None = None  # more names, from a sweep's runs
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
            raise ConfigError(f"policy.prompt_format must be one of {PROMPT_FORMATS}, "
                              f"got '{self.policy.prompt_format}'")
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
        if t.generation not in GENERATION:
            raise ConfigError(f"training.generation must be one of {', '.join(GENERATION)}, got '{t.generation}'")
        if t.vllm_mode not in ("colocate", "server"):
            raise ConfigError(f"training.vllm_mode must be colocate or server, got '{t.vllm_mode}'")
        if t.save_steps < 1:
            raise ConfigError("training.save_steps must be >= 1")
        for name in ("reward_device", "reward_dtype"):
            _check_placement(getattr(t, name), f"training.{name}")
            _check_placement(getattr(self.openrlhf, name), f"openrlhf.{name}")
        _check_placement(self.evaluation.device, "evaluation.device")
        _check_placement(self.evaluation.dtype, "evaluation.dtype")
        self.openrlhf.validate()
        targets = self.policy.lora.target_modules
        if t.algorithm == "ppo" and isinstance(targets, str) and targets != "all-linear":
            raise ConfigError(f"policy.lora.target_modules '{targets}': OpenRLHF takes all-linear or a list of module "
                              "names (--ds.lora.target_modules), not a pattern; write a list, e.g. [q_proj, v_proj]")
        src = self.reward_models_from
        if src is not None:
            if not src.arms:
                raise ConfigError("reward_models_from.arms is empty: name the sweep's arms to take")
            clash = sorted(set(src.arms) & set(self.reward_models))
            if clash:
                raise ConfigError(f"reward models {clash} are named both in reward_models and reward_models_from.arms")

    def reward_model_names(self) -> list[str]:
        """Every reward model the recipe names (``reward_models``, then the sweep's arms)."""
        return list(self.reward_models) + list(self.reward_models_from.arms if self.reward_models_from else [])

    def reward_model_path(self, name: str) -> str:
        """The checkpoint of a named reward model (a sweep's run found in its summary or ledger);
        a name the recipe does not know is taken as a path."""
        if name in self.reward_models:
            return self.reward_models[name]
        src = self.reward_models_from
        if src is not None and name in src.arms:
            return sweep_run_dir(src, name)
        return name


def _check_placement(value: str, where: str) -> None:
    if where.endswith("dtype"):
        if value not in DTYPES:
            raise ConfigError(f"{where} must be one of {', '.join(DTYPES)}, got '{value}'")
        return
    try:
        check_device_name(value)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


def sweep_run_dir(src: SweepRuns, arm: str) -> str:
    """The run directory of ``arm`` at ``src.seed`` in the sweep under ``src.sweep``: its
    ``summary.csv`` (final runs) when the sweep has finished, else its ledger's finished seed runs."""
    import json
    from pathlib import Path

    root = Path(src.sweep)
    rows: list[dict[str, Any]] = []
    if (root / "summary.csv").exists():
        rows = read_table(root / "summary.csv", "sweep summary").to_dict("records")
    elif (root / "ledger").is_dir():
        for p in sorted((root / "ledger").glob("*.json")):
            r = json.loads(p.read_text())
            if r.get("stage") == "seed" and r.get("state") == "done":
                rows.append({**r, "run_dir": r.get("output_dir")})
    else:
        run = f"rmtrain sweep --config {src.recipe} --out {src.sweep}" if src.recipe else "the sweep"
        raise ConfigError(f"reward_models_from: no sweep at {src.sweep} (no summary.csv, no ledger/): run {run} first")
    found = [r for r in rows if r.get("arm") == arm and int(r.get("seed", -1)) == src.seed
             and (src.model is None or src.model in (r.get("model"), _short_model(str(r.get("model")))))]
    models = sorted({str(r.get("model")) for r in found})
    if len(models) > 1:
        raise ConfigError(f"reward_models_from: the sweep at {src.sweep} trained {arm} seed {src.seed} on several "
                          f"models ({', '.join(models)}); set reward_models_from.model")
    status = found[0].get("status") if found else None
    if status in ("diverged", "collapsed"):  # finished, with no usable model (rmtrain.train)
        raise ConfigError(f"reward_models_from: {arm} seed {src.seed} of the sweep at {src.sweep} is {status} "
                          f"({found[0].get('status_reason')}): not a usable reward model")
    if not found or not isinstance(found[0].get("run_dir"), str) or not Path(found[0]["run_dir"]).is_dir():
        raise ConfigError(f"reward_models_from: the sweep at {src.sweep} has no finished run of arm {arm} at seed "
                          f"{src.seed}" + (f" (model {src.model})" if src.model else "")
                          + "; rerun " + (f"rmtrain sweep --config {src.recipe} --out {src.sweep}" if src.recipe
                                          else "the sweep") + " to finish it")
    return found[0]["run_dir"]


def _short_model(name: str) -> str:
    return short_model_name(name)


def policy_config_from_dict(raw: dict[str, Any], where: str = "config",
                            overrides: dict[str, Any] | None = None) -> PolicyConfig:
    # unset command-line flags arrive as None overrides and leave the recipe's value
    return config_from_dict(PolicyConfig, raw, where=where, overrides=overrides, required=("policy", "data"),
                            shorthand={"policy": "name_or_path"}, skip_none_overrides=True)


def load_policy_config(path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> PolicyConfig:
    return policy_config_from_dict(load_recipe(path), where=str(path), overrides=overrides)
