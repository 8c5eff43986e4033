"""Config dataclasses for training runs and sweeps, read from recipe YAML by ``rmcore.settings.recipes``
(strict keys: a typo in a recipe is an error naming the key and the file). The ``audit`` and
``sweep.audit`` blocks are rmeval's (``rmeval.audit.pipeline``), beside the audit that reads them."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmcore.data.loading import check_spec
from rmcore.data.schema import check_on_bad
from rmcore.errors import ConfigError
from rmcore.models.modeling import ModelSettings
from rmcore.runtime.wandb_log import DEFAULT_PROJECT, WANDB_MODES
from rmcore.settings.fields import bounded, check_ranges
from rmcore.settings.recipes import (  # noqa: F401
    build_config,
    config_from_dict,
    copy_tree,
    load_recipe,
    parse_override,
    recipe_dict,
    set_dotted,
)
from rmeval.audit.settings import FinalAuditSettings, TrainingAuditSettings  # the audit blocks live beside the audit
from rmtrain.arms import ARMS, make_arm

SELECTION_RULES = ("final", "best_pair_accuracy")
DIVERGENCE_RULES = ("fail", "record")  # training.on_divergence
SHARED_PROMPT = ("auto", "true", "false")  # training.shared_prompt (YAML true/false too)
HF_ARGUMENTS = "matchrm.training_arguments"


def hf(default: Any, *keywords: str, **bounds: Any) -> Any:
    """A setting that transformers' ``TrainingArguments`` takes as it is, as ``keywords`` (one or
    more); :func:`hf_arguments` collects them, so no field is mapped by hand. A numeric one declares
    its range in ``bounds`` (``gt=0``; ``rmcore.settings.fields.bounded``)."""
    return bounded(default, metadata={HF_ARGUMENTS: keywords}, **bounds)


def hf_arguments(settings: Any) -> dict[str, Any]:
    """The ``TrainingArguments`` keywords the fields of ``settings`` declared with :func:`hf` feed."""
    return {kw: getattr(settings, f.name) for f in dataclasses.fields(settings)
            for kw in f.metadata.get(HF_ARGUMENTS, ())}


@dataclass
class TrainingSettings:
    """The trainer's settings (the recipe's ``training`` block); a field declared with :func:`hf`
    is passed to ``TrainingArguments`` under that keyword, the others are read by rmtrain itself or
    turned into ``TrainingArguments`` in ``rmtrain.train._training_arguments``."""

    learning_rate: float = hf(2e-5, "learning_rate", gt=0)
    num_epochs: float = hf(1.0, "num_train_epochs", gt=0)
    max_steps: int = hf(-1, "max_steps", ge=1, also=(-1,))  # -1: num_epochs decides; > 0 overrides it
    # in pairs: each step scores 2x this many texts
    per_device_batch_size: int = hf(16, "per_device_train_batch_size", ge=1)
    gradient_accumulation_steps: int = hf(1, "gradient_accumulation_steps", ge=1)
    max_length: int = bounded(512, ge=1)
    # transformers 5: a float < 1 is a ratio of the total steps
    warmup_ratio: float = hf(0.03, "warmup_steps", ge=0, lt=1)
    weight_decay: float = hf(0.0, "weight_decay", ge=0)
    lr_scheduler: str = hf("linear", "lr_scheduler_type")
    max_grad_norm: float = hf(1.0, "max_grad_norm", ge=0)
    logging_steps: int = hf(10, "logging_steps", ge=1)
    # held-out evaluation every N steps (needed for best_* selection)
    eval_steps: int | None = hf(None, "eval_steps", ge=1)
    save_steps: int | None = bounded(None, ge=1)  # None: only the final model is saved
    save_total_limit: int | None = hf(2, "save_total_limit", ge=1)
    selection: str = bounded("final", choices=SELECTION_RULES)  # best_pair_accuracy: on the held-out prompts
    bf16: bool = hf(False, "bf16")
    group_by_length: bool = True  # length-grouped batches: less padding, same data
    dataloader_num_workers: int = hf(0, "dataloader_num_workers", ge=0)
    eval_batch_size: int = bounded(64, ge=1)
    use_cpu: bool = False
    # Decoder reward models: one forward of [prompt][chosen][rejected] per pair (rmcore.models.shared_prompt).
    # auto: where the model takes a custom attention mask; true: required; false: never.
    shared_prompt: str = bounded("auto", choices=SHARED_PROMPT)  # YAML true/false accepted too
    # Encoder classifiers (BERT family): token-wise sublayers on real tokens only, the last layer for
    # the pooled token only (rmcore.models.packed_encoder); exact, so on by default; other models unaffected.
    packed_encoder: bool = True
    # A non-finite loss or weight stops training at once (status diverged, no model saved); a held-out
    # score SD <= collapse_sd x the scores' root-mean-square is status collapsed (0: never). Either
    # way train_summary.json records it; fail: `rmtrain train` then exits 1, record: exits 0.
    on_divergence: str = bounded("fail", choices=DIVERGENCE_RULES)
    collapse_sd: float = bounded(1e-4, ge=0, lt=1)


@dataclass
class WandbSettings:
    project: str = DEFAULT_PROJECT
    mode: str | None = bounded(None, choices=WANDB_MODES)  # None: online with a key, else offline
    group: str | None = None
    tags: list[str] = field(default_factory=list)
    entity: str | None = None


@dataclass
class TrainConfig:
    arm: str
    model: ModelSettings
    data: dict[str, Any]
    seed: int = hf(1, "seed", "data_seed", ge=0)
    output_dir: str = hf("outputs/run", "output_dir")
    attribute: str = "helpfulness"
    heldout_fraction: float = bounded(0.1, gt=0, lt=1)  # prompts for the reported held-out figures
    # > 0: prompts for selection (checkpoint, search); else held-out
    selection_fraction: float = bounded(0.0, ge=0, lt=1)
    split_seed: int = bounded(0, ge=0)  # fixed across arms and seeds: every arm sees the same split
    use_released_preferences: bool = True
    max_train_pairs: int | None = bounded(None, ge=1)
    # raise | skip: the data specs' switch, same name and values (skips counted in train_summary.json);
    # a data spec's own on_bad wins
    on_bad: str = "raise"
    arm_options: dict[str, Any] = field(default_factory=dict)
    training: TrainingSettings = field(default_factory=TrainingSettings)
    wandb: WandbSettings = field(default_factory=WandbSettings)
    audit: TrainingAuditSettings = field(default_factory=TrainingAuditSettings)

    def to_dict(self) -> dict[str, Any]:
        # the recipe mapping: held settings (the audit block's AuditSettings) flat, as a recipe gives them
        return recipe_dict(self)

    def validate(self) -> None:
        check_ranges(self)  # built by code too: the values its fields declare (a recipe's are checked as read)
        if self.arm not in ARMS:
            raise ARMS.unknown(self.arm)
        make_arm(self.arm, self.arm_options)  # its options: known fields, numbers in range
        if self.training.selection != "final" and not self.training.eval_steps:
            raise ConfigError("training.selection 'best_pair_accuracy' needs training.eval_steps")
        if self.selection_fraction >= 1 - self.heldout_fraction:  # each in its range: the two together
            raise ConfigError(f"selection_fraction must be in [0, 1 - heldout_fraction), got {self.selection_fraction}")
        check_on_bad(self.on_bad)  # the data specs' switch, checked as theirs is
        if not isinstance(self.data, dict) or "name" not in self.data:
            raise ConfigError("data must be a mapping with a 'name' (e.g. simulated, helpsteer2)")
        check_spec(self.data)  # limit, min_responses: before any data is read


def train_config_from_dict(raw: dict[str, Any], where: str = "config",
                           overrides: dict[str, Any] | None = None) -> TrainConfig:
    overrides = overrides or {}
    if "on_bad_data" in raw or "on_bad_data" in overrides:
        old = overrides.get("on_bad_data", raw.get("on_bad_data"))
        raise ConfigError(f"{where}: 'on_bad_data' was renamed 'on_bad' (values raise | skip, as in data specs); "
                          f"write on_bad: {'raise' if old == 'error' else old}")
    # None overrides apply too: `--set save_total_limit=null` means "no limit"
    return config_from_dict(TrainConfig, raw, where=where, overrides=overrides, required=("arm", "model", "data"),
                            drop=("sweep", "description"), shorthand={"model": "name_or_path"})


def load_train_config(path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> TrainConfig:
    return train_config_from_dict(load_recipe(path), where=str(path), overrides=overrides)


@dataclass
class SweepSlurmSettings:
    """How `rmtrain sweep --executor slurm` submits (submitit job arrays, one run per task)."""

    accelerate_config: str | None = "accelerate_configs/single_gpu.yaml"  # None: plain python
    partition: str | None = None
    timeout_min: int = bounded(24 * 60, ge=1)
    gpus_per_node: int = bounded(1, ge=0)
    cpus_per_task: int = bounded(8, ge=1)
    mem_gb: float = bounded(64, gt=0)
    array_parallelism: int = bounded(64, ge=1)
    setup: list[str] = field(default_factory=list)  # shell lines before each task (module load, venv)
    additional_parameters: dict[str, Any] = field(default_factory=dict)  # any other #SBATCH flag


@dataclass
class SweepSettings:
    """A matched grid: every (model, arm, seed) shares data, split, budget and selection rule.

    ``search`` is the hyper-parameter budget, the same for every arm: a grid of dotted config keys
    (e.g. ``training.learning_rate: [5e-6, 1e-5, 2e-5]``) tried at ``search_seed``; the setting
    with the best held-out pair accuracy is then trained at every seed."""

    arms: list[str]
    seeds: list[int] = bounded(default_factory=lambda: [1], ge=0)
    models: list[str] = field(default_factory=list)  # empty: the base config's model
    output_root: str = "outputs/sweep"
    search: dict[str, list[Any]] = field(default_factory=dict)
    search_seed: int | None = bounded(None, ge=0)  # default: the first seed
    name: str | None = None  # W&B group of every run; default wandb.group, else the output directory's name
    max_parallel: int = bounded(1, ge=1)  # local executor: runs at once
    audit: FinalAuditSettings = field(default_factory=FinalAuditSettings)
    # Both checkpoint-selection rules side by side (the study's Table 26): [final, best_pair_accuracy]
    # audits each run's final-step checkpoint beside its best one (training.selection best_pair_accuracy);
    # empty: the recipe's rule only.
    selection_rules: list[str] = field(default_factory=list)
    # label -> data spec: every run's final checkpoint is also audited on that rating set (sweep.audit's
    # settings), e.g. {helpsteer: {name: helpsteer, path: nvidia/HelpSteer, split: validation}}
    extra_audit_data: dict[str, dict[str, Any]] = field(default_factory=dict)
    # label -> Hub id or path (a sequence classifier), or {model, kind: seq_classifier | generative_judge,
    # batch_size, max_length}: released scorers audited like the runs, drawn on the share-vs-margin plot
    released_scorers: dict[str, Any] = field(default_factory=dict)
    slurm: SweepSlurmSettings = field(default_factory=SweepSlurmSettings)

    def grid(self) -> list[dict[str, Any]]:
        keys = sorted(self.search)
        return [dict(zip(keys, vals)) for vals in itertools.product(*(self.search[k] for k in keys))]


@dataclass
class Sweep:
    settings: SweepSettings
    base: dict[str, Any]
    where: str
    overrides: dict[str, Any]

    @property
    def models(self) -> list[str]:
        m = self.base.get("model")
        return self.settings.models or [m if isinstance(m, str) else (m or {}).get("name_or_path")]

    @property
    def root(self) -> Path:
        """The sweep's output folder, absolute: every run directory lies under it, so the ledger and
        summary.csv are read from any folder."""
        return Path(self.settings.output_root).resolve()

    def seed_dir(self, model: str, arm: str, seed: int) -> str:
        return str(self.root / short_model_name(model) / arm / f"seed{seed}")

    def run_config(self, model: str, arm: str, seed: int, extra: dict[str, Any] | None = None,
                   output_dir: str | None = None) -> TrainConfig:
        ov = dict(self.overrides)
        ov.update(extra or {})
        ov.update({"arm": arm, "seed": seed, "model.name_or_path": model,
                   "output_dir": output_dir or self.seed_dir(model, arm, seed)})
        base = dict(self.base)
        if isinstance(base.get("model"), str):
            base["model"] = {"name_or_path": base["model"]}
        base.setdefault("arm", arm)
        return train_config_from_dict(base, where=self.where, overrides=ov)

    def search_dir(self, model: str, arm: str, combo: dict[str, Any]) -> str:
        tag = "_".join(f"{k.split('.')[-1]}={v}" for k, v in combo.items()) or "default"
        return str(self.root / short_model_name(model) / arm / "search" / tag)

    def runs(self) -> list[TrainConfig]:
        """The final runs, one per (model, arm, seed), at the base settings (no search)."""
        s = self.settings
        return [self.run_config(m, a, seed) for m, a, seed in itertools.product(self.models, s.arms, s.seeds)]


def load_sweep(path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> Sweep:
    raw = load_recipe(path)
    if "sweep" not in raw:
        raise ConfigError(f"{path}: no 'sweep' section (arms, seeds, models, output_root)")
    overrides = dict(overrides or {})
    sweep_raw = copy_tree(raw["sweep"])
    swept = [k for k in overrides if k.startswith("sweep.")]
    for k in swept:  # sweep keys override the sweep section; null too (sweep.search=null: no grid)
        set_dotted(sweep_raw, k[len("sweep."):], overrides.pop(k))
    settings = build_config(SweepSettings, sweep_raw, f"{path}.sweep",
                            overridden=frozenset(f"{path}.{k}" for k in swept))
    if not settings.arms:
        raise ConfigError.at(f"{path}.sweep.arms", "empty; allowed: a list of one or more arm names")
    if not settings.seeds:
        raise ConfigError.at(f"{path}.sweep.seeds", "empty; allowed: a list of one or more integers >= 0 "
                                                   "(each arm is trained once per seed)")
    sw = Sweep(settings, raw, str(path), overrides)
    for combo in settings.grid():  # fail early on a bad search key
        sw.run_config(sw.models[0], settings.arms[0], settings.seeds[0], combo)
    _check_extra_audits(sw)
    return sw


AUDIT_LABEL = re.compile(r"[a-z][a-z0-9_]*")


def _check_extra_audits(sw: Sweep) -> None:
    """The selection rules, extra rating sets and released scorers of a sweep, checked before anything runs."""
    s, where = sw.settings, f"{sw.where}.sweep"
    bad = [r for r in s.selection_rules if r not in SELECTION_RULES]
    if bad:
        raise ConfigError(f"{where}.selection_rules: unknown rule(s) {bad}; known: {', '.join(SELECTION_RULES)}")
    if len(set(s.selection_rules)) > 1:
        t = sw.run_config(sw.models[0], s.arms[0], s.seeds[0]).training
        if t.selection != "best_pair_accuracy":
            raise ConfigError(f"{where}.selection_rules audits the final-step checkpoint beside the best one: set "
                              f"training.selection: best_pair_accuracy (with training.eval_steps); the last "
                              f"checkpoint-N is kept as the final one")
        if t.save_total_limit is not None and t.save_total_limit < 2:
            raise ConfigError(f"{where}.selection_rules needs training.save_total_limit of at least 2 (or null): "
                              f"with 1 the Trainer deletes the final-step checkpoint when it is not the best")
    for kind, labels in (("extra_audit_data", s.extra_audit_data), ("released_scorers", s.released_scorers)):
        for label in labels:
            if not AUDIT_LABEL.fullmatch(str(label)) or label in SELECTION_RULES:
                raise ConfigError(f"{where}.{kind}: label '{label}' must be lower_snake_case and not a selection "
                                  f"rule's name")
    for label, spec in s.extra_audit_data.items():
        if not isinstance(spec, dict) or "name" not in spec:
            raise ConfigError(f"{where}.extra_audit_data.{label}: a data spec mapping with a 'name'")
    for label, spec in s.released_scorers.items():
        if isinstance(spec, dict):
            unknown = sorted(set(spec) - {"model", "kind", "batch_size", "max_length"})
            if unknown or not spec.get("model"):
                raise ConfigError(f"{where}.released_scorers.{label}: keys model (required), kind, batch_size, "
                                  f"max_length; got {sorted(spec)}")
            if spec.get("kind", "seq_classifier") not in ("seq_classifier", "generative_judge"):
                raise ConfigError(f"{where}.released_scorers.{label}.kind: seq_classifier or generative_judge")
        elif not isinstance(spec, str) or not spec:
            raise ConfigError(f"{where}.released_scorers.{label}: a Hub id or path, or a mapping with 'model'")


def short_model_name(model_name: str) -> str:
    """Directory name for a model: 'Qwen/Qwen3-0.6B' -> 'Qwen3-0.6B', 'pkg:gt_x' -> 'gt_x'."""
    name = model_name.split(":", 1)[1] if model_name.startswith("pkg:") else model_name
    p = Path(name)
    return p.name if p.name not in ("model", "") else p.parent.name
