"""The experiment commands' settings (``rmeval pool``, ``rmeval leaderboard``, ``rmtrain
filter-experiment``), apart from their pipelines: their recipes (``PoolConfig``, ``LeaderboardConfig``),
the policy, sampling, reward-model and judge blocks they share, loading a recipe strictly, and the
notice every toy run prints. Nothing heavy here: a recipe is read, and ``--help`` runs, without
pandas, scipy or a model library.

A recipe names its kind at the top (``experiment: pool | leaderboard | filtering``) and is read into
the command's dataclass by ``rmcore.settings.recipes`` (an unknown key is an error naming the key and the
file). Policies are a list of mappings (``PolicySpec``), reward models a mapping name -> checkpoint
or name -> {model, kind, batch_size, max_length, ...} (``ScorerSettings``), judges a mapping
name -> ``JudgeSpec``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rmcore.errors import ConfigError
from rmcore.settings.fields import bounded
from rmcore.settings.recipes import build_config, config_from_dict, load_recipe, parse_override
from rmeval.backends.spec import BackendSpec, check_backend, parse_backend_spec, toy_kinds
from rmeval.scoring import SCORERS, ScorerSettings
from rmeval.stats.settings import n_boot_field

T = TypeVar("T")
KINDS = ("pool", "leaderboard", "filtering")  # what a recipe's ``experiment`` may say
TOY_NOTICE = ("TOY RUN: tiny untrained local models (a toy recipe). It exercises the pipeline end to end; "
              "its figures mean nothing.")


def policy_specs(items: Any, where: str) -> list[Any]:
    """The ``policies`` block: a list of PolicySpec mappings, names unique."""
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{where}: policies must be a non-empty list of {{name, model, ...}} mappings")
    out = []
    for i, item in enumerate(items):
        spec = build_config(PolicySpec, item, f"{where}[{i}]")
        spec.validate()
        out.append(spec)
    names = [p.name for p in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: policy names must be unique, got {names}")
    return out


def reward_models(block: Any, where: str) -> dict[str, Any]:
    """The ``reward_models`` block: name -> ScorerSettings (a bare string is the model)."""
    if not isinstance(block, Mapping) or not block:
        raise ConfigError(f"{where}: reward_models must map names to checkpoints")
    out = {}
    for name, v in block.items():
        s = build_config(ScorerSettings, {"model": v} if isinstance(v, str) else v, f"{where}.{name}")
        if not s.model:
            raise ConfigError(f"{where}.{name}: no model")
        if s.kind not in SCORERS:
            raise ConfigError(f"{where}.{name}: unknown scorer kind '{s.kind}'")
        out[str(name)] = s
    return out


def check_reward_models(settings: Mapping[str, Any]) -> None:
    """Each reward model (``seq_classifier``) the recipe names is a local path or a Hub id, checked
    before anything is generated: a missing checkpoint is one line saying what writes it."""
    # torch: this module loads without it
    from rmeval.scoring.loaders import check_reward_path

    for s in settings.values():
        if s.kind == "seq_classifier" and not str(s.model).startswith(TINY):
            check_reward_path(s.model)


def judge_specs(block: Any, where: str) -> dict[str, Any]:
    """The ``judges`` block: name -> JudgeSpec (a bare string is a local model); the first is the
    primary judge."""
    if not isinstance(block, Mapping) or not block:
        raise ConfigError(f"{where}: judges must map names to judge models")
    out = {}
    for name, v in block.items():
        spec = build_config(JudgeSpec, {"model": v} if isinstance(v, str) else v, f"{where}.{name}")
        spec.validate()
        out[str(name)] = spec
    return out


def load_experiment(cls: type[T], path: str | os.PathLike, kind: str, *,
                    overrides: Mapping[str, Any] | list[str] | None = None, required: tuple[str, ...] = ()) -> T:
    """The recipe at ``path`` (``experiment: kind``) as ``cls``, with overrides: a mapping of dotted
    keys (a command's, ``rmcore.settings.commands.recipe_overrides``) or ``KEY=VALUE`` items."""
    raw = load_recipe(path)
    if raw.get("experiment") != kind:
        raise ConfigError(f"{path}: not a {kind} recipe (it says experiment: {raw.get('experiment')!r})")
    pairs = dict(overrides) if isinstance(overrides, Mapping) else dict(parse_override(o) for o in overrides or [])
    return config_from_dict(cls, raw, where=str(path), overrides=pairs, required=required,
                            drop=("description", "experiment"))


TINY = "tiny:"


@dataclass
class PolicySpec:
    """One policy: a name (its label in every table) and a model on a backend."""

    name: str
    model: str  # path, Hub id, PEFT adapter directory, endpoint model name, or tiny:SEED
    backend: str = "hf"  # hf | openai | vllm
    base_url: str | None = None  # openai: the endpoint (http://host:8000/v1 for a vLLM server)
    api_key_env: str = "OPENAI_API_KEY"
    device: str = "auto"  # hf: rmcore.models.device's rule
    dtype: str = "auto"  # hf / vllm: auto = bfloat16 on a recent GPU, float32 on the CPU
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    trust_remote_code: bool = False
    tensor_parallel_size: int = bounded(1, ge=1)  # vllm
    gpu_memory_utilization: float = bounded(0.9, gt=0, le=1)  # vllm
    max_model_len: int | None = bounded(None, ge=1)  # vllm

    def backend_spec(self) -> BackendSpec:
        """The policy's backend as a spec (``rmeval.backends.spec``): ``backend``, ``model``, the endpoint."""
        return parse_backend_spec({"kind": self.backend, "model": self.model, "base_url": self.base_url,
                                   "api_key_env": self.api_key_env}, what=f"policy {self.name}")

    def validate(self) -> None:
        if not self.name or not self.model:
            raise ConfigError("a policy needs a name and a model")
        check_backend("generator", self.backend_spec())  # a kind that answers conversations, with its settings
        toys = toy_kinds()
        if self.model.startswith(TINY) and (self.backend not in toys or not self.model[len(TINY):].isdigit()):
            raise ConfigError(f"policy {self.name}: a toy model is tiny:SEED (an integer) "
                              f"on backend {' or '.join(toys)}")


@dataclass
class SamplingSettings:
    """How each policy answers: ``n`` samples per prompt, or greedily with temperature 0."""

    n: int = bounded(1, ge=1)
    temperature: float = bounded(0.0, ge=0)  # 0: greedy decoding (then n must be 1)
    top_p: float = bounded(1.0, gt=0, le=1)
    max_new_tokens: int = bounded(2048, ge=1)
    seed: int = bounded(0, ge=0)
    batch_size: int = bounded(8, ge=1)  # prompts per generate call (hf)
    chunk_prompts: int = bounded(64, ge=1)  # prompts per committed chunk of the cache

    def validate(self) -> None:
        if self.n < 1 or self.max_new_tokens < 1 or self.batch_size < 1 or self.chunk_prompts < 1:
            raise ConfigError("sampling: n, max_new_tokens, batch_size and chunk_prompts must be positive")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ConfigError("sampling: temperature must be >= 0 and top_p in (0, 1]")
        if self.temperature == 0 and self.n != 1:
            raise ConfigError(f"sampling: greedy decoding (temperature 0) gives one response per prompt, "
                              f"not n={self.n}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def key(self) -> str:
        return json.dumps({"n": self.n, "temperature": self.temperature, "top_p": self.top_p,
                           "max_new_tokens": self.max_new_tokens, "seed": self.seed}, sort_keys=True)


@dataclass
class JudgeSpec:
    """A helpfulness judge: a local causal LM (``hf``: path, Hub id, or ``tiny:SEED`` for toy runs)
    or a model behind an OpenAI-compatible endpoint (``openai_logprobs``: probabilities from the
    first token's log-probabilities; ``openai``: the letter of a greedy reply)."""

    model: str
    backend: str = "hf"  # hf | openai_logprobs | openai
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    device: str = "auto"
    dtype: str = "auto"
    max_length: int | None = bounded(4096, ge=1)  # tokens of a judge prompt (None: the model's own limit)
    batch_size: int = bounded(4, ge=1)
    concurrency: int = bounded(8, ge=1)  # openai: requests at a time
    trust_remote_code: bool = False

    def backend_spec(self) -> BackendSpec:
        """The judge's backend as a spec (``rmeval.backends.spec``): ``backend``, ``model``, the endpoint."""
        return parse_backend_spec({"kind": self.backend, "model": self.model, "base_url": self.base_url,
                                   "api_key_env": self.api_key_env}, what=f"judge {self.model}")

    def validate(self) -> None:
        check_backend("judge", self.backend_spec())  # a kind that judges, with its settings
        if self.model.startswith("tiny:") and self.backend not in toy_kinds():
            raise ConfigError(f"judge {self.model}: a toy judge (tiny:SEED) runs on backend {' or '.join(toy_kinds())}")


@dataclass
class PoolSampling(SamplingSettings):
    """The study's pool sampling: six responses per policy at temperature 0.7, top-p 0.9."""

    n: int = bounded(6, ge=1)
    temperature: float = bounded(0.7, ge=0)
    top_p: float = bounded(0.9, gt=0, le=1)
    max_new_tokens: int = bounded(2048, ge=1)


@dataclass
class PoolConfig:
    """``rmeval pool``'s recipe (``experiment: pool``)."""

    data: Any  # a data SPEC string or a spec mapping (rmcore.data.loading)
    policies: list[dict[str, Any]]  # PolicySpec mappings
    sampling: PoolSampling = field(default_factory=PoolSampling)
    reward_models: dict[str, Any] = field(default_factory=dict)  # name -> checkpoint or ScorerSettings mapping
    max_prompts: int | None = bounded(None, ge=1)  # a seeded sample of prompts
    seed: int = bounded(0, ge=0)  # the prompt sample and the seeded score head of an untrained toy scorer
    output_dir: str = "outputs/pool"
    toy: bool = False  # say in every output that the figures mean nothing
    progress: bool = True

    def validate(self) -> None:
        self.policy_specs()
        self.reward_model_settings()
        self.sampling.validate()

    def policy_specs(self) -> list[Any]:
        return policy_specs(self.policies, "policies")

    def reward_model_settings(self) -> dict[str, Any]:
        return reward_models(self.reward_models, "reward_models") if self.reward_models else {}


def load_pool_config(path: str | os.PathLike, overrides: Mapping[str, Any] | list[str] | None = None) -> PoolConfig:
    return load_experiment(PoolConfig, path, "pool", overrides=overrides, required=("data", "policies"))


CENTRES = ("anchor", "policies")


@dataclass
class MixSettings:
    n_clusters: int = bounded(20, ge=1)  # k-means clusters of the first turns' TF-IDF vectors
    seed: int = bounded(0, ge=0)


@dataclass
class LeaderboardConfig:
    """``rmeval leaderboard``'s recipe (``experiment: leaderboard``)."""

    data: Any
    policies: list[dict[str, Any]]
    anchor: str  # the policy every prompt is judged against (and, by default, centred on)
    reward_models: dict[str, Any]
    judges: dict[str, Any]  # name -> JudgeSpec mapping; the first is the primary judge
    generation: SamplingSettings = field(default_factory=SamplingSettings)  # greedy, 2,048 new tokens
    single_turn_only: bool = True
    max_prompts: int | None = bounded(None, ge=1)  # a seeded sample of the (single-turn) prompts
    mixes: MixSettings = field(default_factory=MixSettings)
    n_assignments: int = bounded(20, ge=1)
    assignment_seed: int = bounded(0, ge=0)
    centre_on: str = "anchor"  # anchor | policies
    # labelled pairs judged against the human order (0: none; None: all)
    judge_human_pairs: int | None = bounded(300, ge=0)
    n_boot: int = n_boot_field(help=None)
    seed: int = bounded(0, ge=0)
    output_dir: str = "outputs/leaderboard"
    toy: bool = False
    progress: bool = True

    def validate(self) -> None:
        names = [p.name for p in self.policy_specs()]
        if len(names) < 3:
            raise ConfigError("leaderboard: a ranking needs at least three policies")
        if self.anchor not in names:
            raise ConfigError(f"leaderboard: anchor '{self.anchor}' is not one of the policies {names}")
        self.reward_model_settings()
        self.judge_settings()
        self.generation.validate()
        if self.centre_on not in CENTRES:
            raise ConfigError(f"leaderboard: centre_on must be anchor or policies, got '{self.centre_on}'")
        if self.n_assignments < 1 or self.mixes.n_clusters < 2:
            raise ConfigError("leaderboard: n_assignments must be positive and mixes.n_clusters at least 2")

    def policy_specs(self) -> list[Any]:
        return policy_specs(self.policies, "policies")

    def reward_model_settings(self) -> dict[str, Any]:
        return reward_models(self.reward_models, "reward_models")

    def judge_settings(self) -> dict[str, Any]:
        return judge_specs(self.judges, "judges")


def load_leaderboard_config(path: str | os.PathLike,
                            overrides: Mapping[str, Any] | list[str] | None = None) -> LeaderboardConfig:
    return load_experiment(LeaderboardConfig, path, "leaderboard", overrides=overrides,
                           required=("data", "policies", "anchor", "reward_models", "judges"))
