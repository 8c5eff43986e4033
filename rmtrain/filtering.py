"""Raw against centred filtering, followed by preference training: does the per-prompt term of a
reward model change which training data a global threshold keeps, and the policy trained on it?

Protocol (``recipes/filtering_helpsteer2_study.yaml``):

1. The training pool is the preference pairs of a data set (released labels, else pairs ordered by
   the rating; ``rmcore.data.pairs.build_pairs``), split by conversation text into training and
   held-out prompts (``split_by_prompt``: a conversation never sits on both sides).
2. A reward model scores every response of the training prompts (``rmeval.experiments.pool.score_pool``). A
   pair is kept by the score of its chosen response: raw, s(chosen), or centred on its prompt,
   s(chosen) minus the mean score of the prompt's other responses (for a prompt with two responses,
   the margin over the rejected one), computed exactly as the audit's centred score
   (``rmeval.stats.selection.loo_centered``: equal centred values are equal floats whatever the
   row order). Each filter keeps the top ``keep_fraction`` (30%) of the training pairs,
   round(0.3 n) of them, ties in input order; a random arm keeps a seeded sample of
   the same size. The overlap of the raw and the centred kept sets is their Jaccard index
   |R and C| / |R or C|.
3. DPO (trl's ``DPOTrainer``: beta 0.1, two epochs, 32 pairs per optimiser step) trains one policy
   per kept set from the same base, for each variant: a full fine-tune and a rank-16 LoRA in the
   study. The learning rate of a variant is chosen on the random arm: one run per rate of the grid,
   the rate with the highest held-out implicit-reward accuracy (the share of held-out pairs whose
   DPO reward beta log(pi/pi_ref) is higher for the chosen response; ties: the lower held-out DPO
   loss), and the raw and centred arms train at that rate.
4. Every policy (the base, the raw and the centred arm) answers the evaluation prompts greedily
   (``rmeval.experiments.responses``), and the variant's judge (``rmeval.experiments.comparisons``) compares raw with
   centred head to head and each with the base, in both orders: P(x better) per prompt is the mean
   over the orders of the renormalised probability of the letter naming x; the win rate is its mean
   over prompts with a prompt bootstrap, and the difference between the arms' win rates against the
   base is paired over prompts. Reported beside: the judge's self-agreement across orders, the
   share of each arm's responses identical to the base's, and the arms' held-out accuracy.

Every step resumes: a finished DPO run leaves ``metrics.json`` beside its model and is not rerun;
responses and judgments are cached in SQLite. Outputs in OUT/: ``filters.parquet`` (one row per
training pair: keys and kept flags), ``scores.parquet``, ``<variant>/<arm>[/lr-<rate>]/`` (model,
metrics.json), ``<variant>/responses.parquet``, ``<variant>/judgments.parquet``, ``filtering.json``,
``filtering.md``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmcore.data.loading import load_data
from rmcore.data.pairs import build_pairs, split_by_prompt
from rmcore.data.schema import pick_attribute
from rmcore.errors import ConfigError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.io.markdown import estimate, interval, num, table
from rmcore.io.tables import atomic_write_table
from rmcore.models.device import resolve_device, resolve_dtype
from rmcore.models.formatting import plain_prompt
from rmcore.models.modeling import LoraSettings
from rmcore.runtime.wandb_log import DEFAULT_PROJECT, Tracker, flatten
from rmcore.settings.fields import bounded
from rmcore.settings.recipes import build_config, load_recipe
from rmeval.experiments.comparisons import HelpfulnessJudge
from rmeval.experiments.pool import candidates_table, load_reward_scorer, score_pool
from rmeval.experiments.responses import corpus, generate_responses, resolve_model
from rmeval.experiments.settings import (
    KINDS,
    TOY_NOTICE,
    PolicySpec,
    SamplingSettings,
    check_reward_models,
    judge_specs,
    load_experiment,
    load_leaderboard_config,
    load_pool_config,
    reward_models,
)
from rmeval.stats.bootstrap import rows_with_siblings
from rmeval.stats.ranking import head_to_head, jaccard, paired_difference
from rmeval.stats.selection import loo_centered
from rmeval.stats.settings import n_boot_field

ARMS = ("random", "raw", "centred")
COMPARISONS = (("raw", "centred"), ("raw", "base"), ("centred", "base"))
METRICS_FILE = "metrics.json"


@dataclass
class FilterSettings:
    keep_fraction: float = bounded(0.3, gt=0, lt=1)  # share of the training pairs each filter keeps


@dataclass
class DPOSettings:
    """trl DPOTrainer settings shared by every arm of a variant."""

    beta: float = bounded(0.1, gt=0)
    num_epochs: float = bounded(2.0, gt=0)
    pairs_per_step: int = bounded(32, ge=1)  # per optimiser step, over devices and gradient accumulation
    per_device_batch_size: int = bounded(4, ge=1)
    learning_rates: list[float] = bounded(default_factory=lambda: [5e-7, 1e-6, 2e-6], gt=0)  # grid on the random arm
    max_length: int = bounded(2048, ge=1)  # tokens of prompt and response (trl truncates beyond)
    warmup_ratio: float = bounded(0.1, ge=0, lt=1)  # of the training steps
    gradient_checkpointing: bool = False
    device: str = "auto"  # rmcore.models.device's rule
    dtype: str = "auto"  # bfloat16 on a recent GPU, float32 on the CPU
    seed: int = bounded(0, ge=0)


@dataclass
class FilterVariantSettings:
    """One way of training the policies: a full fine-tune (``lora`` null) or a LoRA, judged by one
    of the recipe's judges; ``learning_rates`` replaces the DPO grid for this variant."""

    name: str
    judge: str
    lora: LoraSettings | None = None
    learning_rates: list[float] | None = bounded(None, gt=0)


@dataclass
class FilterEvalSettings:
    data: Any = None  # prompts the policies answer for the judge (None: the held-out prompts)
    n_prompts: int | None = bounded(None, ge=1)  # a seeded sample of them
    max_new_tokens: int = bounded(2048, ge=1)
    batch_size: int = bounded(8, ge=1)


@dataclass
class FilteringConfig:
    """``rmtrain filter-experiment``'s recipe (``experiment: filtering``)."""

    data: Any  # the training pool (a data SPEC or spec mapping)
    reward_model: Any  # a checkpoint, or a ScorerSettings mapping
    base_model: str  # the policy DPO starts from: path, Hub id, or tiny:SEED for toy runs
    judges: dict[str, Any]
    variants: list[dict[str, Any]]
    filter: FilterSettings = field(default_factory=FilterSettings)
    dpo: DPOSettings = field(default_factory=DPOSettings)
    evaluation: FilterEvalSettings = field(default_factory=FilterEvalSettings)
    heldout_fraction: float = bounded(0.1, gt=0, lt=1)
    max_prompts: int | None = bounded(None, ge=1)  # a seeded sample of the data's prompts
    max_train_pairs: int | None = bounded(None, ge=1)
    attribute: str | None = None  # the rating that orders pairs when the data has no released labels
    split_seed: int = bounded(0, ge=0)
    seed: int = bounded(0, ge=0)
    n_boot: int = n_boot_field(help=None)
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)  # the policies' chat template options
    output_dir: str = "outputs/filtering"
    toy: bool = False
    progress: bool = True

    def validate(self) -> None:
        if not 0 < self.filter.keep_fraction < 1:
            raise ConfigError(f"filter.keep_fraction must be in (0, 1), got {self.filter.keep_fraction}")
        if not 0 < self.heldout_fraction < 1:
            raise ConfigError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction}")
        d = self.dpo
        if d.pairs_per_step < 1 or d.per_device_batch_size < 1 or d.pairs_per_step % d.per_device_batch_size:
            raise ConfigError(f"dpo.pairs_per_step ({d.pairs_per_step}) must be a multiple of "
                              f"dpo.per_device_batch_size ({d.per_device_batch_size})")
        if not d.learning_rates:
            raise ConfigError("dpo.learning_rates: the grid needs at least one rate")
        judges = self.judge_settings()
        variants = self.variant_settings()
        grids = [("dpo.learning_rates", d.learning_rates)] + [
            (f"variants.{v.name}.learning_rates", v.learning_rates) for v in variants if v.learning_rates is not None]
        for where, grid in grids:  # YAML 1.1 reads 1e-5 (no dot) as text: a rate is checked as a number here
            if not isinstance(grid, list) or not grid:
                raise ConfigError(f"{where}: a non-empty list of learning rates, got {grid!r}")
            for x in grid:
                try:
                    ok = float(x) > 0
                except (TypeError, ValueError):
                    ok = False
                if not ok:
                    raise ConfigError(f"{where}: learning rates must be positive numbers, got {x!r}")
        for v in variants:
            if v.judge not in judges:
                raise ConfigError(f"variants.{v.name}: judge '{v.judge}' is not one of the judges {list(judges)}")
        self.reward_model_settings()

    def reward_model_settings(self) -> Any:
        return reward_models({"reward_model": self.reward_model}, "")["reward_model"]

    def judge_settings(self) -> dict[str, Any]:
        return judge_specs(self.judges, "judges")

    def variant_settings(self) -> list[FilterVariantSettings]:
        if not isinstance(self.variants, list) or not self.variants:
            raise ConfigError("variants must be a non-empty list of {name, judge, lora, learning_rates}")
        out = [build_config(FilterVariantSettings, v, f"variants[{i}]") for i, v in enumerate(self.variants)]
        names = [v.name for v in out]
        if len(set(names)) != len(names) or any(n in ("scores", "models") for n in names):
            raise ConfigError(f"variants: names must be unique (and not 'scores' or 'models'), got {names}")
        return out


def load_filtering_config(path: str | os.PathLike,
                          overrides: Mapping[str, Any] | list[str] | None = None) -> FilteringConfig:
    return load_experiment(FilteringConfig, path, "filtering", overrides=overrides,
                           required=("data", "reward_model", "base_model", "judges", "variants"))


def check_experiment_recipe(path: str | os.PathLike) -> str:
    """What an experiment recipe (pool, leaderboard or filtering) holds, validated like its command."""
    kind = load_recipe(path).get("experiment")
    if kind == "filtering":
        cfg = load_filtering_config(path)
        cfg.validate()
        return (f"ok (filtering, {len(cfg.variant_settings())} variants x {len(ARMS)} arms, "
                f"{len(cfg.dpo.learning_rates)} learning rates)")
    if kind == "pool":
        pc = load_pool_config(path)
        return f"ok (pool, {len(pc.policy_specs())} policies x {pc.sampling.n} responses)"
    if kind == "leaderboard":
        lb = load_leaderboard_config(path)
        return (f"ok (leaderboard, {len(lb.policy_specs())} policies, {len(lb.reward_model_settings())} reward "
                f"models, {lb.n_assignments} assignments)")
    raise ConfigError(f"{path}: experiment must be one of {', '.join(KINDS)}, got {kind!r}")


# -- the filters -------------------------------------------------------------------------------------

def filter_keys(pairs: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """``pairs`` (prompt_id, chosen_id, rejected_id) with raw_key = s(chosen) and centred_key =
    s(chosen) minus the mean score of the prompt's other responses; ``scores`` (prompt_id,
    response_id, score) holds every scored response of the prompts. The centred score is the
    audit's exact leave-one-out value (``rmeval.stats.selection.loo_centered``), so pairs whose
    centred keys are equal tie whatever the row order; an unscored response (NaN) takes no part
    in its prompt's mean, and a prompt with fewer than two scored responses has no centred key."""
    s = scores.assign(prompt_id=scores["prompt_id"].astype(str), response_id=scores["response_id"].astype(str))
    row = np.arange(len(s), dtype=float)  # carried through the filter: where each centred value goes
    (score, kept_row), codes, k, _ = rows_with_siblings(s["prompt_id"].to_numpy(), s["score"].to_numpy(float), row)
    centred_all = np.full(len(s), np.nan)
    centred_all[kept_row.astype(np.int64)] = loo_centered(score, codes, k)
    index = pd.MultiIndex.from_arrays([s["prompt_id"], s["response_id"]])
    by = pd.Series(s["score"].to_numpy(float), index=index)
    cen = pd.Series(centred_all, index=index)
    keys = list(zip(pairs["prompt_id"].astype(str), pairs["chosen_id"].astype(str)))
    return pairs.assign(raw_key=by.reindex(keys).to_numpy(float), centred_key=cen.reindex(keys).to_numpy(float))


def kept(keys: np.ndarray, n_keep: int) -> np.ndarray:
    """Boolean mask of the ``n_keep`` highest keys (ties and NaN: input order, NaN last)."""
    k = np.where(np.isfinite(keys), keys, -np.inf)
    order = np.argsort(-k, kind="stable")
    mask = np.zeros(len(keys), dtype=bool)
    mask[order[:n_keep]] = True
    return mask


def select_pairs(keyed: pd.DataFrame, keep_fraction: float, seed: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The kept flags of the three arms and their overlaps (see the module doc)."""
    n = len(keyed)
    n_keep = int(round(keep_fraction * n))
    if n_keep < 1:
        raise ConfigError(f"filter: keeping {keep_fraction} of {n} training pairs keeps none")
    rand = np.zeros(n, dtype=bool)
    rand[np.random.default_rng(seed).choice(n, n_keep, replace=False)] = True
    out = keyed.assign(kept_raw=kept(keyed["raw_key"].to_numpy(float), n_keep),
                       kept_centred=kept(keyed["centred_key"].to_numpy(float), n_keep), kept_random=rand)
    ids = {a: set(np.flatnonzero(out[f"kept_{a}"].to_numpy())) for a in ARMS}
    info: dict[str, Any] = {
        "n_pairs": n, "n_kept": n_keep, "keep_fraction": keep_fraction,
        "jaccard_raw_centred": jaccard(ids["raw"], ids["centred"]),
        "jaccard_random_raw": jaccard(ids["random"], ids["raw"]),
        "jaccard_random_centred": jaccard(ids["random"], ids["centred"]),
        "n_unscored_pairs": int((~np.isfinite(keyed["raw_key"].to_numpy(float))).sum()),
        "prompts": {a: int(out.loc[out[f"kept_{a}"], "prompt_id"].nunique()) for a in ARMS},
    }
    if "gap" in out.columns and out["gap"].notna().any():
        info["mean_rating_gap"] = {a: float(out.loc[out[f"kept_{a}"], "gap"].mean()) for a in ARMS}
    return out, info


# -- DPO -----------------------------------------------------------------------------------------------

def dpo_rows(pairs: pd.DataFrame, rs: Any, tokenizer: Any,
             chat_template_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """trl's preference format: conversational when the tokenizer has a chat template (with the
    template options on every row, where trl reads them), else the plain layout
    (``rmcore.models.formatting.plain_prompt``) with the responses as continuations."""
    by_id = rs.by_id()
    text = {(p.prompt_id, r.response_id): r.text for p in rs.prompts for r in p.responses}
    chat = bool(getattr(tokenizer, "chat_template", None))
    rows = []
    for q in pairs.itertuples(index=False):
        msgs = by_id[q.prompt_id].messages
        c, r = text[(q.prompt_id, q.chosen_id)], text[(q.prompt_id, q.rejected_id)]
        if chat:
            rows.append({"prompt": msgs, "chosen": [{"role": "assistant", "content": c}],
                         "rejected": [{"role": "assistant", "content": r}],
                         **({"chat_template_kwargs": chat_template_kwargs} if chat_template_kwargs else {})})
        else:
            rows.append({"prompt": plain_prompt(msgs), "chosen": " " + c, "rejected": " " + r})
    return rows


def train_dpo(base: str, train_rows: list[dict[str, Any]], held_rows: list[dict[str, Any]], out: Path, *,
              settings: DPOSettings, learning_rate: float, lora: LoraSettings | None, name: str) -> dict[str, Any]:
    """One DPO run from ``base`` into ``out/model`` (a LoRA saves its adapter); returns and writes
    ``out/metrics.json``: held-out implicit-reward accuracy, DPO loss, reward margin, train loss.
    A run whose metrics exist is not repeated."""
    done = out / METRICS_FILE
    if done.is_file() and (out / "model").is_dir():
        return json.loads(done.read_text())
    import datasets
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    # transformers: this module loads without it
    from rmcore.console.training import use_progress_bar

    device = resolve_device(settings.device)
    dtype = resolve_dtype(settings.dtype, device)
    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    accum = max(1, settings.pairs_per_step // (settings.per_device_batch_size * world))
    args = DPOConfig(
        output_dir=str(out / "trainer"), beta=settings.beta, num_train_epochs=settings.num_epochs,
        per_device_train_batch_size=settings.per_device_batch_size,
        per_device_eval_batch_size=settings.per_device_batch_size,
        gradient_accumulation_steps=accum, learning_rate=learning_rate, warmup_steps=settings.warmup_ratio,
        max_length=settings.max_length, activation_checkpointing=settings.gradient_checkpointing,
        bf16=dtype == torch.bfloat16, use_cpu=device.type == "cpu",
        seed=settings.seed, data_seed=settings.seed, report_to=[], save_strategy="no", logging_steps=1,
        disable_tqdm=True)
    peft_config = None
    if lora is not None:
        from peft import LoraConfig

        peft_config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                 target_modules=lora.target_modules, task_type="CAUSAL_LM")
    trainer = DPOTrainer(model=model, args=args, train_dataset=datasets.Dataset.from_list(train_rows),
                         eval_dataset=datasets.Dataset.from_list(held_rows), processing_class=tok,
                         peft_config=peft_config)
    use_progress_bar(trainer, name)
    t0 = time.perf_counter()
    train = trainer.train()
    ev = trainer.evaluate()
    tmp = out / ".model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    trainer.save_model(str(tmp))
    tok.save_pretrained(str(tmp))
    shutil.rmtree(out / "model", ignore_errors=True)
    os.replace(tmp, out / "model")
    shutil.rmtree(out / "trainer", ignore_errors=True)
    metrics = {"learning_rate": learning_rate, "heldout_accuracy": float(ev["eval_rewards/accuracies"]),
               "heldout_loss": float(ev["eval_loss"]),
               "heldout_margin": float(ev.get("eval_rewards/margins", math.nan)),
               "train_loss": float(train.training_loss), "n_train_pairs": len(train_rows),
               "n_heldout_pairs": len(held_rows), "steps": int(train.global_step),
               "gradient_accumulation_steps": accum, "lora": None if lora is None else lora.__dict__,
               "seconds": round(time.perf_counter() - t0, 1)}
    atomic_write_json(done, metrics)
    del trainer, model
    return metrics


def choose_learning_rate(runs: dict[float, dict[str, Any]]) -> float:
    """The rate with the highest held-out accuracy; ties: the lower held-out loss, then the lower rate."""
    return min(runs, key=lambda lr: (-runs[lr]["heldout_accuracy"], runs[lr]["heldout_loss"], lr))


# -- the experiment -------------------------------------------------------------------------------------

def _pairs_table(pairset: Any) -> pd.DataFrame:
    return pd.DataFrame([{"pair_id": i, "prompt_id": q.prompt_id, "chosen_id": q.chosen_id,
                          "rejected_id": q.rejected_id, "gap": q.gap} for i, q in enumerate(pairset.pairs)])


def run_filter_experiment(cfg: FilteringConfig, *, out: str | os.PathLike | None = None,
                          wandb_project: str = DEFAULT_PROJECT, wandb_mode: str | None = None) -> dict[str, Any]:
    """The filtering experiment of ``cfg`` into ``out`` (default cfg.output_dir); see the module doc."""
    t0 = time.perf_counter()
    cfg.validate()
    out = Path(out or cfg.output_dir)
    rs = load_data(cfg.data, cfg.max_prompts, cfg.seed)
    check_reward_models({"reward_model": cfg.reward_model_settings()})
    texts = corpus(rs.prompts)
    build = out / "models"
    split = _split_pairs(cfg, rs)
    reward_model, selected, overlap = _score_and_filter(cfg, rs, split.train_pairs, out, texts=texts, build=build)
    eval_prompts = _evaluation_prompts(cfg, rs, split.held_ids)
    greedy = SamplingSettings(temperature=0.0, max_new_tokens=cfg.evaluation.max_new_tokens,
                              batch_size=cfg.evaluation.batch_size)
    base = resolve_model(cfg.base_model, texts=texts, build_dir=build)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    held_rows = dpo_rows(split.held_pairs, rs, tok, cfg.chat_template_kwargs)
    rows = {a: dpo_rows(selected[selected[f"kept_{a}"]], rs, tok, cfg.chat_template_kwargs) for a in ARMS}
    variants: dict[str, Any] = {}
    for v in cfg.variant_settings():
        variants[v.name] = _run_variant(cfg, v, base, rows, held_rows, eval_prompts, greedy, out, texts=texts,
                                        build=build)
    result: dict[str, Any] = {
        "filter": overlap, "variants": variants,
        "meta": {"data": cfg.data if isinstance(cfg.data, str) else dict(cfg.data), "rating_set": rs.name,
                 "skipped_rows": dict(rs.skipped), "label_source": split.pairset.label_source,
                 "n_train_prompts": len(split.train_ids), "n_heldout_prompts": len(split.held_ids),
                 "n_heldout_pairs": len(split.held_pairs), "base_model": cfg.base_model, "reward_model": reward_model,
                 "dpo": {k: v for k, v in cfg.dpo.__dict__.items()}, "n_boot": cfg.n_boot, "toy": cfg.toy,
                 "seconds": round(time.perf_counter() - t0, 1)}}
    if cfg.toy:
        result["notice"] = TOY_NOTICE
    atomic_write_json(out / "filtering.json", result)
    atomic_write_text(out / "filtering.md", filtering_markdown(result))
    _log(result, out, cfg, wandb_project, wandb_mode)
    return result


@dataclass
class _PairSplit:
    """The training pool's pairs split by prompt: training and held-out prompt ids and pairs."""

    pairset: Any  # rmcore.data.pairs.PairSet: where the labels come from
    train_ids: list[str]
    held_ids: list[str]
    train_pairs: pd.DataFrame
    held_pairs: pd.DataFrame


def _split_pairs(cfg: FilteringConfig, rs: Any) -> _PairSplit:
    """Build the preference pairs of ``rs`` and split them by conversation text into training and held-out
    pairs (the training pairs capped at a seeded ``max_train_pairs``)."""
    # transformers: this module loads without it
    from rmtrain.prepare import prompt_texts

    by_text = prompt_texts(rs)
    _, held_texts = split_by_prompt(by_text.values(), cfg.heldout_fraction, cfg.split_seed)
    held_set = set(held_texts)
    held_ids = sorted(p for p, t in by_text.items() if t in held_set)
    train_ids = sorted(p for p, t in by_text.items() if t not in held_set)
    pairset = build_pairs(rs, attribute=pick_attribute(rs.attributes, cfg.attribute))
    pairs = _pairs_table(pairset)
    if pairs.empty:
        raise ConfigError(f"data {cfg.data}: no preference pairs (no released labels and no differing ratings)")
    train_pairs = pairs[pairs["prompt_id"].isin(set(train_ids))].reset_index(drop=True)
    held_pairs = pairs[pairs["prompt_id"].isin(set(held_ids))].reset_index(drop=True)
    if cfg.max_train_pairs and len(train_pairs) > cfg.max_train_pairs:
        keep = np.sort(np.random.default_rng(cfg.split_seed).permutation(len(train_pairs))[: cfg.max_train_pairs])
        train_pairs = train_pairs.iloc[keep].reset_index(drop=True)
    if train_pairs.empty or held_pairs.empty:
        raise ConfigError(f"data {cfg.data}: the split leaves {len(train_pairs)} training and {len(held_pairs)} "
                          "held-out pairs; both need some (more prompts, or another heldout_fraction)")
    return _PairSplit(pairset, train_ids, held_ids, train_pairs, held_pairs)


def _score_and_filter(cfg: FilteringConfig, rs: Any, train_pairs: pd.DataFrame, out: Path, *, texts: Any,
                      build: Path) -> tuple[str, pd.DataFrame, dict[str, Any]]:
    """Score the training prompts' responses with the reward model and keep pairs by raw, centred and random
    keys; returns (the reward model's path, the filters table, the kept sets' overlap)."""
    train_rs = rs.subset(set(train_pairs["prompt_id"]))
    settings = cfg.reward_model_settings()
    settings = replace(settings, model=resolve_model(settings.model, texts=texts, build_dir=build))
    scorer = load_reward_scorer(settings, seed=cfg.seed)
    try:
        scores = score_pool(scorer, train_rs, candidates_table(train_rs), cache_path=out / "score_cache.sqlite",
                            progress=cfg.progress, label="reward model")
    finally:
        scorer.close()
    atomic_write_table(out / "scores.parquet", scores[["prompt_id", "response_id", "score"]])
    selected, overlap = select_pairs(filter_keys(train_pairs, scores), cfg.filter.keep_fraction, cfg.seed)
    atomic_write_table(out / "filters.parquet", selected)
    return settings.model, selected, overlap


def _evaluation_prompts(cfg: FilteringConfig, rs: Any, held_ids: list[str]) -> list[Any]:
    """The prompts the policies answer: the evaluation data's, else a seeded sample of the held-out prompts."""
    if cfg.evaluation.data is not None:
        return load_data(cfg.evaluation.data, cfg.evaluation.n_prompts, cfg.seed).prompts
    return rs.subset(held_ids).sample(cfg.evaluation.n_prompts, cfg.seed).prompts


def _train_arms(cfg: FilteringConfig, v: FilterVariantSettings, base: str, rows: dict[str, list[dict[str, Any]]],
                held_rows: list[dict[str, Any]],
                vdir: Path) -> tuple[float, dict[float, dict[str, Any]], dict[str, dict[str, Any]]]:
    """DPO of one variant: the learning-rate grid on the random arm, then the raw and centred arms at the
    chosen rate; returns (the rate, the grid's metrics, each arm's metrics and directory)."""
    grid = [float(x) for x in (v.learning_rates or cfg.dpo.learning_rates)]

    def run(arm: str, lr: float, where: Path) -> dict[str, Any]:
        return train_dpo(base, rows[arm], held_rows, where, settings=cfg.dpo, learning_rate=lr, lora=v.lora,
                         name=f"{v.name} {arm} lr={lr:g}")

    search = {lr: run("random", lr, vdir / "random" / f"lr-{lr:g}") for lr in grid}
    lr = choose_learning_rate(search)
    arms = {"random": {**search[lr], "dir": str(vdir / "random" / f"lr-{lr:g}")}}
    for a in ("raw", "centred"):
        arms[a] = {**run(a, lr, vdir / a), "dir": str(vdir / a)}
    for other in grid:  # the grid's other models are not needed again; their metrics stay
        if other != lr:
            shutil.rmtree(vdir / "random" / f"lr-{other:g}" / "model", ignore_errors=True)
    return lr, search, arms


def _judge_comparisons(cfg: FilteringConfig, v: FilterVariantSettings, eval_prompts: list[Any],
                       responses: dict[str, pd.DataFrame], vdir: Path, out: Path, *, texts: Any,
                       build: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The variant's judge on each pair of policies in both orders: head-to-head win rates, the raw minus
    centred difference against the base (paired over prompts), and the judge's counts."""
    judge = HelpfulnessJudge(cfg.judge_settings()[v.judge], cache=out / "judgments.sqlite", texts=texts,
                             build_dir=build)
    msgs = [p.messages for p in eval_prompts]
    comps, jrows, better = {}, [], {}
    try:
        for x, y in COMPARISONS:
            p_xy, p_yx = judge.both_orders(msgs, responses[x]["response"].tolist(),
                                           responses[y]["response"].tolist())
            comps[f"{x}_vs_{y}"] = head_to_head(p_xy, p_yx, n_boot=cfg.n_boot, rng=cfg.seed)
            better[(x, y)] = (p_xy + 1 - p_yx) / 2
            jrows.append(pd.DataFrame({"prompt_id": [p.prompt_id for p in eval_prompts], "x": x, "y": y,
                                       "p_x_first": p_xy, "p_y_first": p_yx, "p_x_better": better[(x, y)]}))
    finally:
        judge_meta = {"judge": v.judge, "model": judge.spec.model, "n_asked": judge.n_asked,
                      "n_cached": judge.n_cached, "n_truncated": judge.n_truncated}
        judge.close()
    atomic_write_table(vdir / "judgments.parquet", pd.concat(jrows, ignore_index=True))
    comps["raw_minus_centred_vs_base"] = paired_difference(better[("raw", "base")], better[("centred", "base")],
                                                           n_boot=cfg.n_boot, rng=cfg.seed)
    return comps, judge_meta


def _run_variant(cfg: FilteringConfig, v: FilterVariantSettings, base: str, rows: dict[str, list[dict[str, Any]]],
                 held_rows: list[dict[str, Any]], eval_prompts: list[Any], greedy: Any, out: Path, *, texts: Any,
                 build: Path) -> dict[str, Any]:
    """One variant: its DPO arms, their greedy responses to the evaluation prompts and the judge's comparisons."""
    vdir = out / v.name
    lr, search, arms = _train_arms(cfg, v, base, rows, held_rows, vdir)
    # -- responses and judgments
    policy_models = {"base": base, "raw": str(vdir / "raw" / "model"), "centred": str(vdir / "centred" / "model")}
    responses = {}
    for name, model in policy_models.items():
        spec = PolicySpec(name=name, model=model, device=cfg.dpo.device, dtype=cfg.dpo.dtype,
                          chat_template_kwargs=cfg.chat_template_kwargs)
        responses[name] = generate_responses(eval_prompts, spec, greedy, cache=out / "responses.sqlite",
                                             build_dir=build, texts=texts, progress=cfg.progress)
    atomic_write_table(vdir / "responses.parquet", pd.concat(responses.values(), ignore_index=True))
    comps, judge_meta = _judge_comparisons(cfg, v, eval_prompts, responses, vdir, out, texts=texts, build=build)
    base_text = responses["base"]["response"].to_numpy()
    identical = {a: float((responses[a]["response"].to_numpy() == base_text).mean()) for a in ("raw", "centred")}
    return {"lora": None if v.lora is None else v.lora.__dict__, "learning_rate": lr,
            "learning_rate_search": {f"{k:g}": s for k, s in search.items()}, "arms": arms,
            "comparisons": comps, "identical_to_base": identical, **judge_meta,
            "n_eval_prompts": len(eval_prompts)}


def _log(result: dict[str, Any], out: Path, cfg: FilteringConfig, project: str, mode: str | None) -> None:
    tracker = Tracker(project=project, name="filter-experiment", mode=mode, dir=out, job_type="filtering",
                      config={"data": str(cfg.data), "base_model": cfg.base_model,
                              "keep_fraction": cfg.filter.keep_fraction, "beta": cfg.dpo.beta})
    try:
        flat = flatten({k: result[k] for k in ("filter", "variants")})
        tracker.log({f"filtering/{k}": v for k, v in flat.items() if isinstance(v, (int, float))})
    finally:
        tracker.finish()


def filtering_markdown(result: dict[str, Any]) -> str:
    f, m = result["filter"], result["meta"]
    lines = ["# Raw against centred filtering", ""]
    if result.get("notice"):
        lines += [f"**{result['notice']}**", ""]
    lines += [f"Training pool: {f['n_pairs']} preference pairs ({m['label_source']} labels) on {m['n_train_prompts']} "
              f"prompts of {m['rating_set']}; {m['n_heldout_prompts']} prompts ({m['n_heldout_pairs']} pairs) held "
              f"out. Each filter keeps {f['n_kept']} pairs ({num(100 * f['keep_fraction'], 0)}%) by the reward "
              f"model's score of the chosen response, raw or centred on the prompt's other responses.", ""]
    rows = [["raw vs centred", num(f["jaccard_raw_centred"])], ["random vs raw", num(f["jaccard_random_raw"])],
            ["random vs centred", num(f["jaccard_random_centred"])]]
    lines += table(["kept sets", "Jaccard index"], rows) + [""]
    if "mean_rating_gap" in f:
        lines += table(["arm", "prompts kept", "mean rating gap of kept pairs"],
                       [[a, f["prompts"][a], num(f["mean_rating_gap"][a])] for a in ARMS]) + [""]
    d = m["dpo"]
    for name, v in result["variants"].items():
        kind = "full fine-tune" if v["lora"] is None else f"LoRA rank {v['lora']['r']}"
        lines += [f"## {name} ({kind}), judged by {v['judge']}", "",
                  f"DPO: beta {num(d['beta'], 2)}, {num(d['num_epochs'], 0)} epochs, {d['pairs_per_step']} pairs per "
                  f"step; learning rate {v['learning_rate']:g}, chosen on the random arm's held-out pairs from "
                  + ", ".join(f"{k} (accuracy {num(s['heldout_accuracy'])}, loss {num(s['heldout_loss'])})"
                              for k, s in v["learning_rate_search"].items()) + ".", ""]
        lines += table(["arm", "held-out accuracy", "held-out DPO loss", "train loss", "identical to base"],
                       [[a, num(r["heldout_accuracy"]), num(r["heldout_loss"]), num(r["train_loss"]),
                         num(v["identical_to_base"].get(a))] for a, r in v["arms"].items()]) + [""]
        rows = []
        for key, c in v["comparisons"].items():
            if key == "raw_minus_centred_vs_base" or "win_rate" not in c:
                continue
            x, y = key.split("_vs_")
            rows.append([f"{x} vs {y}", estimate(c["win_rate"]), num(c["self_agreement"]["estimate"]),
                         num(c["same_position_both_orders"]), c["n_prompts"], c["n_missing"]])
        lines += table(["comparison", "P(first better) [95% CI]", "self-agreement across orders",
                        "same letter both orders", "prompts", "missing"], rows) + [""]
        diff = v["comparisons"]["raw_minus_centred_vs_base"]
        if "estimate" in diff:
            lines += [f"Raw arm's win rate against the base minus the centred arm's: {num(diff['estimate'])} "
                      f"{interval(diff)} (paired over {diff['n_prompts']} prompts).", ""]
    return "\n".join(lines)
