"""The settings of JudgeProfile's steps (``rmeval.judges.pipeline``), declared once: the flags of
``rmeval judges elicit`` and ``rmeval judges reweight`` and the reproduction recipes' judge rows come
from these fields. Nothing heavy here: ``--help`` loads no model library, numpy or pandas.

:class:`ElicitSettings` is one elicitation (the items, the judge, the attributes asked, the shards and
their jobs' :class:`ExecutorSettings`, where a local judge runs); :class:`ReweightSettings` how the
attribute weights are refitted to reference labels; :class:`AnalysisSettings` what ``analyze``
computes (``rmeval.judges.analysis``); :class:`BaselineSettings` the baselines of a reweighting run
(``rmeval.judges.baselines``)."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral  # numpy's integers too, without importing numpy
from typing import Any

from rmcore.errors import ConfigError
from rmcore.models.device import PLACEMENT_GROUP, Placement
from rmcore.settings.fields import bounded, check_ranges, comma_list, nested, option, output_folder


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(t) for t in comma_list(text))
    except ValueError:
        raise ConfigError(f"expected comma-separated integers, got '{text}'") from None


@dataclass
class ExecutorSettings:
    """The submitit parameters of the shards' jobs (``rmcore.runtime.jobs.submitit_executor``); unset ones are
    submitit's defaults."""

    slurm_partition: str | None = option(None, flag="--partition", deprecated=("--slurm-partition",),
                                         metavar="PARTITION", help="SLURM partition of the shards' jobs")
    timeout_min: int | None = option(None, ge=1, help="minutes a shard's job may run")
    gpus_per_node: int | None = option(None, ge=0, help="GPUs of each shard's job")

    def params(self) -> dict[str, Any]:
        """The parameters given (a timeout or partition that is empty or 0 is not)."""
        params: dict[str, Any] = {}
        if self.timeout_min:
            params["timeout_min"] = self.timeout_min
        if self.slurm_partition:
            params["slurm_partition"] = self.slurm_partition
        if self.gpus_per_node is not None:
            params["gpus_per_node"] = self.gpus_per_node
        return params


@dataclass
class ElicitSettings:
    """One elicitation (``rmeval judges elicit``, whose flags are these fields): the items, the
    judge, the attributes asked, the shards and how the judge runs."""

    out: str = option(required=True, parse=output_folder("--out"), help="output directory")
    items: str | None = option(None, help="items table (jsonl/parquet): item_id, source, query, response_a, "
                                          "response_b[, label]")
    data: list[str] = option(default_factory=list, action="append",
                             help="preference-set SPEC, one source each (repeatable)")
    max_items_per_source: int | None = option(None, ge=1, help="first N items of each --data source")
    model: str | None = option(None, help="local causal LM judge (path, Hub id, or a LoRA adapter dir)")
    endpoint: str | None = option(None, help="OpenAI-compatible base URL (e.g. a vLLM server's /v1)")
    # the endpoint's settings and the local judge's: each has an effect with its judge only
    endpoint_model: str | None = option(None, needs=("--endpoint", None), help="the served model's name (--endpoint)")
    api_key_env: str = option("OPENAI_API_KEY", needs=("--endpoint", None),
                              help="environment variable holding the endpoint's API key")
    judge_name: str | None = option(None, help="name in the judgments table (default: model name)")
    attributes: str | None = option(None, help="attribute YAML (replaces the shipped inventory)")
    extend_attributes: bool = option(False, help="add --attributes to the shipped inventory")
    attribute_names: list[str] = option(default_factory=list, parse=comma_list,
                                        help="comma-separated subset; 'core' = the 20 core attributes")
    overall: bool = option(True, flag="--no-overall", action="store_false", help="skip the overall verdict")
    n_shards: int = option(1, ge=1, help="shards of the items (one job each with --executor)")
    shard: int | None = option(None, ge=0, help="run only this shard (no merge)")
    executor: str = option("none", choices=["none", "local", "slurm", "debug"],
                           help="submitit executor for the shards (slurm: one job array)")
    executor_params: ExecutorSettings = nested(ExecutorSettings)
    batch_size: int = option(32, ge=1, needs=("--model", None), help="texts per forward (local)")
    max_length: int = option(4096, ge=1, needs=("--model", None), help="tokens per prompt (local)")
    # device (auto: this process's GPU, else the CPU), dtype (auto: bfloat16 on a GPU, float32 on the
    # CPU), kernel, remote code, device map: where a local --model judge runs
    placement: Placement = nested(Placement, group=PLACEMENT_GROUP)
    prefix_reuse: bool = option(True, flag="--no-prefix-reuse", action="store_false", needs=("--model", None),
                                help="one full forward per call (slower)")
    margin: float = option(0.0, ge=0, lt=0.5, needs=("--model", None),
                           help="unresolved when |p(A)-0.5| <= margin (local)")
    concurrency: int = option(8, ge=1, needs=("--endpoint", None), help="parallel requests (endpoint)")
    reasoning_tokens: int | None = option(None, ge=1, needs=("--endpoint", None),
                                          help="a judge that reasons before it answers (DeepSeek-R1): its reply "
                                               "budget in tokens (default: 4, a letter), the letter read after the "
                                               "reasoning (endpoint)")
    chunk_items: int = option(2, ge=1, help="items per committed chunk")
    progress: bool = option(True, flag="--no-progress", action="store_false", help="no progress bars")
    seed: int = option(0, ge=0, help="A/B assignment of --data pairs")
    table: str | None = option(None, help="also write the merged judgments as a long table OUT/TABLE "
                                          "(judgments.jsonl or .parquet) for inspection")

    def judge_spec(self) -> dict[str, Any]:
        if bool(self.model) == bool(self.endpoint):
            raise ConfigError("give exactly one judge: --model PATH (local causal LM) or --endpoint URL")
        if self.model:
            return {"kind": "hf", "model": self.model, "name": self.judge_name, "batch_size": self.batch_size,
                    "max_length": self.max_length, "dtype": self.placement.dtype, "device": self.placement.device,
                    "prefix_reuse": self.prefix_reuse, "margin": self.margin,
                    "attn_implementation": self.placement.attn_implementation,
                    "trust_remote_code": self.placement.trust_remote_code, "device_map": self.placement.device_map}
        if not self.endpoint_model:
            raise ConfigError("--endpoint needs --endpoint-model (the served model's name)")
        spec = {"kind": "openai", "model": self.endpoint_model, "base_url": self.endpoint, "name": self.judge_name,
                "api_key_env": self.api_key_env, "concurrency": self.concurrency}
        return {**spec, "reasoning_tokens": self.reasoning_tokens} if self.reasoning_tokens else spec


@dataclass
class ReweightSettings:
    """How attribute weights are refitted to reference labels (``rmeval judges reweight``)."""

    budgets: tuple[int, ...] = option((32, 64, 128, 256), parse=_ints, metavar="N,N,...",
                                      ge=2, help="labels per source the weights are refitted on (comma-separated)")
    n_repeats: int = option(10, ge=1, help="random label draws per budget")
    top_k: tuple[int, ...] = option((6, 12), parse=_ints, metavar="K,K,...",
                                    ge=1, help="attributes kept in the sparse refits (comma-separated)")
    seed: int = option(0, ge=0, help="seed of the label draws (and the baselines)")

    def validate(self) -> None:
        check_ranges(self)  # built by code too: --budgets, --top-k, --n-repeats in their declared ranges


def _names(text: str) -> list[str] | None:
    return comma_list(text) or None  # an empty list: every attribute


@dataclass
class AnalysisSettings:
    """What ``analyze`` computes beyond the agreement and the priority fits.

    ``attributes``: only these (default: every attribute in the table); ``seed``; ``n_splits``
    random half splits for split-half reliability; ``null_repeats`` repetitions of the
    identical-preference null (0: skip it); ``donor`` of the component swaps (default: the judge
    with the highest stable rate); ``min_shared`` jointly resolved attributes for the no-conflict
    subset (the paper's 20); ``min_n_source`` and ``min_n_pooled`` usable comparisons a reader
    needs to enter a label association (the paper's 50 and 200); ``attributes_file``: the
    inventory used at elicitation, if custom (for attribute families); ``controls``: False skips
    every paper control (the audit hook's quick profile); ``jobs``: worker processes for the
    logistic fits (default: this process's CPUs; the figures do not depend on it); ``progress``:
    progress bars on stderr when it is a terminal."""

    attributes: list[str] | None = option(None, flag="--attribute-names", metavar="NAMES", parse=_names,
                                          help="comma-separated subset of the attributes (default: all)")
    seed: int = option(0, ge=0, help="seed of the half splits, the null and the swaps")
    n_splits: int = option(20, ge=0, help="random half splits for split-half reliability")
    null_repeats: int = option(20, ge=0, help="repetitions of the identical-preference null (0: skip it)")
    donor: str | None = option(None, help="donor judge of the component swaps (default: highest stable rate)")
    min_shared: int = option(20, flag="--min-shared-attributes",
                             ge=1, help="jointly resolved attributes a no-conflict case needs (the paper's 20)")
    min_n_source: int = option(50, ge=0, help="usable comparisons a reader needs in a source to enter a label "
                                        "association")
    min_n_pooled: int = option(200, ge=0, help="the same over all sources pooled")
    attributes_file: str | None = option(None, flag="--attributes", deprecated=("--attributes-file",),
                                         help="attribute YAML used at elicitation, if custom (families)")
    controls: bool = True
    jobs: int | None = bounded(None, ge=1)  # set by code, not a flag; None: this process's CPUs
    progress: bool = True

    def __post_init__(self) -> None:
        integers = ("n_splits", "null_repeats", "min_shared", "min_n_source", "min_n_pooled")
        for name in integers + (("jobs",) if self.jobs is not None else ()):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, Integral):
                raise ConfigError(f"{name} must be an integer, got {v!r}")
        check_ranges(self)  # built by code too: the numbers in their declared ranges


def _kinds(text: str) -> tuple[str, ...]:
    return tuple(comma_list(text))


@dataclass
class BaselineSettings:
    """The baselines of a reweighting run: rubric prompting and/or LoRA SFT of ``model``, the
    local causal LM behind judge ``judge`` of the judgments table."""

    model: str = option(flag="--baseline-model", help="local causal LM behind --baseline-judge")
    judge: str = option(flag="--baseline-judge", help="the judge of the judgments table that --baseline-model is")
    kinds: tuple[str, ...] = option(("rubric", "lora"), flag="--baselines", parse=_kinds,
                                    help="rubric,lora: baselines with --baseline-model")
    # the attribute YAML used at elicitation, if custom
    attributes_file: str | None = option(None, flag="--attributes", deprecated=("--attributes-file",),
                                         help="attribute YAML used at elicitation, if custom")
    rubric_k: int = option(6, ge=1, help="attributes the rubric prompt names")
    # training labels per source for LoRA SFT (None: all)
    lora_budget: int | None = option(256, ge=2, help="training labels per source for LoRA SFT")
    lora_steps: int = option(200, ge=1, help="LoRA SFT steps")
    lora_lr: float = option(2e-4, gt=0, help="LoRA SFT learning rate")
    lora_batch_size: int = option(8, ge=1, help="LoRA SFT batch size")
    lora_dtype: str = option("float32", choices=["float32", "bfloat16", "float16"],
                             help="dtype of the LoRA SFT model (bfloat16 halves a large judge's memory)")
    max_length: int = option(4096, ge=8, help="tokens per prompt of the baselines")
    batch_size: int = option(32, ge=1, help="texts per forward of the baselines")
    device: str | None = option(None, help="device of the baselines' model (default: auto)")
    seed: int = bounded(0, ge=0)  # the reweighting's (--seed)

    def __post_init__(self) -> None:
        if not set(self.kinds) <= {"rubric", "lora"}:
            raise ConfigError(f"--baselines: rubric and/or lora, got '{','.join(self.kinds)}'")
        if not self.model or not self.judge:
            raise ConfigError("--baselines needs --baseline-model PATH and --baseline-judge NAME")
        check_ranges(self)  # built by code too: the numbers in their declared ranges
