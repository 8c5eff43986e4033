"""`train(config)`: one matched arm, from rating set to checkpoint and train_summary.json."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from rmtrain.arms import PairTable, make_arm
from rmtrain.config import TrainConfig
from rmtrain.console import use_progress_bar
from rmtrain.data.schema import RatingSet
from rmtrain.errors import ConfigError
from rmtrain.formatting import Encoded, encode_example
from rmtrain.io import atomic_write_json, atomic_write_table, atomic_write_text
from rmtrain.modeling import load_reward_model, unwrap_for_saving
from rmtrain.trainer import HeldoutSet, MatchedRewardTrainer, PairCollator

log = logging.getLogger(__name__)

SUMMARY_FILE = "train_summary.json"


@dataclasses.dataclass
class PreparedData:
    """Everything an arm trains and is evaluated on; identical for every arm given the config."""

    rating_set: RatingSet
    train_pairs: list[Any]
    heldout_pairs: list[Any]
    train_prompt_ids: list[str]
    heldout_prompt_ids: list[str]
    selection_pairs: list[Any]  # the selection split (empty: selection reads the held-out split)
    selection_prompt_ids: list[str]
    pair_counts: dict[str, Any]


def prepare_data(cfg: TrainConfig) -> PreparedData:
    from rmtrain.data.pairs import build_pairs, split_by_prompt
    from rmtrain.data.registry import load_rating_set

    spec = dict(cfg.data)
    spec.setdefault("on_bad", "raise" if cfg.on_bad_data == "error" else "skip")
    rs = load_rating_set(spec)
    _check_attribute(cfg, rs)
    pairset = build_pairs(rs, attribute=cfg.attribute, use_released=cfg.use_released_preferences)
    # Split on the conversation text, not the id: a prompt that recurs under two ids (HelpSteer2
    # repeats some non-consecutively; HH-RLHF rows share openings) must not sit on both sides.
    text_of = {p.prompt_id: json.dumps(p.messages, sort_keys=True) for p in rs.prompts}
    train_texts, held_texts = split_by_prompt(text_of.values(), cfg.heldout_fraction, cfg.split_seed)
    held_text_set = set(held_texts)
    held_ids = sorted(pid for pid, t in text_of.items() if t in held_text_set)
    train_ids = sorted(pid for pid, t in text_of.items() if t not in held_text_set)
    sel_ids: list[str] = []
    if cfg.selection_fraction > 0:
        # Selection (checkpoint, search grid) on its own prompts, so the reported held-out figures
        # are not chosen on the data they are measured on. Carved from the training prompts.
        tr_texts = sorted({text_of[p] for p in train_ids})
        _, sel_texts = split_by_prompt(tr_texts, cfg.selection_fraction / (1 - cfg.heldout_fraction),
                                       cfg.split_seed + 1)
        sel_text_set = set(sel_texts)
        sel_ids = sorted(p for p in train_ids if text_of[p] in sel_text_set)
        train_ids = sorted(p for p in train_ids if text_of[p] not in sel_text_set)
    train_set, held_set, sel_set = set(train_ids), set(held_ids), set(sel_ids)
    train_pairs = [p for p in pairset.pairs if p.prompt_id in train_set]
    held_pairs = [p for p in pairset.pairs if p.prompt_id in held_set]
    if cfg.max_train_pairs and len(train_pairs) > cfg.max_train_pairs:
        # Same subset for every arm and seed: drawn with the split seed, not the run seed.
        idx = np.sort(np.random.default_rng(cfg.split_seed).permutation(len(train_pairs))[: cfg.max_train_pairs])
        train_pairs = [train_pairs[i] for i in idx]
    if not train_pairs:
        raise ConfigError(f"no training pairs from data {cfg.data}")
    sel_pairs = [p for p in pairset.pairs if p.prompt_id in sel_set]
    return PreparedData(rs, train_pairs, held_pairs, train_ids, held_ids, sel_pairs, sel_ids, pairset.summary())


def _check_attribute(cfg: TrainConfig, rs: RatingSet) -> None:
    if rs.attributes and cfg.attribute not in rs.attributes:
        raise ConfigError(f"unknown attribute '{cfg.attribute}'; this data has: {', '.join(rs.attributes)}")


def pair_table(pairs: list[Any], rs: RatingSet, attribute: str) -> PairTable:
    by_id = rs.by_id()
    rating: dict[tuple[str, str], float] = {}
    prompt_mean: dict[str, float] = {}
    for p in rs.prompts:
        vals = []
        for r in p.responses:
            v = float(r.ratings.get(attribute, np.nan))
            rating[(p.prompt_id, r.response_id)] = v
            if not np.isnan(v):
                vals.append(v)
        prompt_mean[p.prompt_id] = float(np.mean(vals)) if vals else np.nan
    assert all(q.prompt_id in by_id for q in pairs)
    return PairTable(
        prompt_id=np.array([q.prompt_id for q in pairs], dtype=object),
        chosen_id=np.array([q.chosen_id for q in pairs], dtype=object),
        rejected_id=np.array([q.rejected_id for q in pairs], dtype=object),
        y_chosen=np.array([rating[(q.prompt_id, q.chosen_id)] for q in pairs], dtype=np.float64),
        y_rejected=np.array([rating[(q.prompt_id, q.rejected_id)] for q in pairs], dtype=np.float64),
        prompt_mean=np.array([prompt_mean[q.prompt_id] for q in pairs], dtype=np.float64),
    )


class ResponseEncoder:
    """Encodes each (prompt, response) once, however many pairs it appears in."""

    def __init__(self, rs: RatingSet, tokenizer: Any, max_length: int) -> None:
        self.by_id = rs.by_id()
        self.tok, self.max_length = tokenizer, max_length
        self.cache: dict[tuple[str, str], Encoded] = {}
        self.n_prompt_truncated = 0
        self.n_response_truncated = 0

    def __call__(self, prompt_id: str, response_id: str) -> Encoded:
        key = (prompt_id, response_id)
        if key not in self.cache:
            p = self.by_id[prompt_id]
            resp = next(r for r in p.responses if r.response_id == response_id)
            e = encode_example(self.tok, p.messages, resp.text, self.max_length)
            self.n_prompt_truncated += e.prompt_truncated
            self.n_response_truncated += e.response_truncated
            self.cache[key] = e
        return self.cache[key]


def build_train_dataset(pairs: list[Any], targets: dict[str, np.ndarray], encoder: ResponseEncoder) -> Any:
    import datasets

    cols: dict[str, list[Any]] = {"chosen_input_ids": [], "rejected_input_ids": [], "length": []}
    has_tt = None
    for q in pairs:
        c, r = encoder(q.prompt_id, q.chosen_id), encoder(q.prompt_id, q.rejected_id)
        cols["chosen_input_ids"].append(c.input_ids)
        cols["rejected_input_ids"].append(r.input_ids)
        cols["length"].append(max(len(c), len(r)))
        has_tt = c.token_type_ids is not None
        if has_tt:
            cols.setdefault("chosen_token_type_ids", []).append(c.token_type_ids)
            cols.setdefault("rejected_token_type_ids", []).append(r.token_type_ids)
    for k, v in targets.items():
        cols[f"target_{k}"] = np.asarray(v, dtype=np.float64).tolist()
    return datasets.Dataset.from_dict(cols)


def build_heldout(rs: RatingSet, held_prompt_ids: list[str], held_pairs: list[Any], encoder: ResponseEncoder,
                  attribute: str) -> HeldoutSet:
    by_id = rs.by_id()
    keys, enc, ratings = [], [], []
    for pid in held_prompt_ids:
        for r in by_id[pid].responses:
            keys.append((pid, r.response_id))
            enc.append(encoder(pid, r.response_id))
            ratings.append(float(r.ratings.get(attribute, np.nan)))
    pos = {k: i for i, k in enumerate(keys)}
    pi = np.array([[pos[(q.prompt_id, q.chosen_id)], pos[(q.prompt_id, q.rejected_id)]] for q in held_pairs],
                  dtype=np.int64).reshape(-1, 2)
    return HeldoutSet(keys, enc, np.array(ratings, dtype=np.float64), pi)


def _training_arguments(cfg: TrainConfig, report_to: list[str]) -> Any:
    from transformers import TrainingArguments

    t = cfg.training
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cpu = t.use_cpu or not torch.cuda.is_available()
    save_steps = t.save_steps or (t.eval_steps if t.selection != "final" else None)
    kwargs: dict[str, Any] = dict(
        output_dir=cfg.output_dir,
        seed=cfg.seed,
        data_seed=cfg.seed,
        learning_rate=t.learning_rate,
        num_train_epochs=t.num_epochs,
        max_steps=t.max_steps,
        per_device_train_batch_size=t.per_device_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        warmup_steps=t.warmup_ratio,  # transformers 5: a float < 1 is a ratio of the total steps
        weight_decay=t.weight_decay,
        lr_scheduler_type=t.lr_scheduler,
        max_grad_norm=t.max_grad_norm,
        logging_steps=t.logging_steps,
        eval_strategy="steps" if t.eval_steps else "no",
        eval_steps=t.eval_steps,
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500,
        save_total_limit=t.save_total_limit,
        load_best_model_at_end=t.selection != "final",
        metric_for_best_model="pair_accuracy" if t.selection != "final" else None,
        greater_is_better=True,
        bf16=t.bf16,
        remove_unused_columns=False,
        train_sampling_strategy="group_by_length" if t.group_by_length else "random",
        length_column_name="length",
        dataloader_num_workers=t.dataloader_num_workers,
        report_to=report_to,
        run_name=f"{cfg.arm}-seed{cfg.seed}",
        use_cpu=cpu,
        disable_tqdm=True,
    )
    if world > 1 and cpu:
        kwargs["ddp_backend"] = "gloo"
    return TrainingArguments(**kwargs)


def train(cfg: TrainConfig, *, force: bool = False) -> dict[str, Any]:
    """Train one arm; returns (and writes) the summary. Resumes from the last checkpoint in
    output_dir if one exists; a finished run (summary present) is not retrained unless force."""
    from transformers import set_seed

    from rmtrain.tracking import Tracker

    cfg.validate()
    out = Path(cfg.output_dir)
    if force:
        _clear_run(out)  # never resume or reuse another run's checkpoints
    else:
        _check_same_run(cfg, out)
        if (out / SUMMARY_FILE).exists():
            log.info("%s exists: run already finished, not retraining (force=True retrains)", out / SUMMARY_FILE)
            return json.loads((out / SUMMARY_FILE).read_text())
    t0 = time.time()
    rank = int(os.environ.get("RANK", "0"))
    set_seed(cfg.seed)
    data = prepare_data(cfg)
    arm = make_arm(cfg.arm, cfg.arm_options)
    table = pair_table(data.train_pairs, data.rating_set, cfg.attribute)
    arm.check(table)
    targets = arm.targets(table, cfg.seed)

    model, tok = load_reward_model(cfg.model, for_training=True)
    encoder = ResponseEncoder(data.rating_set, tok, cfg.training.max_length)
    train_ds = build_train_dataset(data.train_pairs, targets, encoder)
    heldout = build_heldout(data.rating_set, data.heldout_prompt_ids, data.heldout_pairs, encoder, cfg.attribute)
    selection = (build_heldout(data.rating_set, data.selection_prompt_ids, data.selection_pairs, encoder, cfg.attribute)
                 if data.selection_prompt_ids else heldout)

    tracker = None
    if rank == 0:
        tracker = Tracker(project=cfg.wandb.project, name=f"{cfg.arm}-seed{cfg.seed}", group=cfg.wandb.group,
                          tags=[f"arm:{cfg.arm}", f"seed:{cfg.seed}", *cfg.wandb.tags],
                          config=cfg.to_dict(), mode=cfg.wandb.mode, dir=out, job_type="train",
                          entity=cfg.wandb.entity)
    wandb_on = cfg.wandb.mode != "disabled" and (tracker is None or tracker.enabled)
    args = _training_arguments(cfg, ["wandb"] if wandb_on else [])

    callbacks = []
    if cfg.audit.enabled:
        from rmeval.callback import AuditCallback

        held_rs = data.rating_set.subset(data.heldout_prompt_ids[: cfg.audit.max_prompts])
        callbacks.append(AuditCallback(rating_set=held_rs, tokenizer=tok, conditions=cfg.audit.conditions,
                                       max_length=cfg.training.max_length, n_boot=cfg.audit.n_boot,
                                       attribute=cfg.attribute))

    # transformers refuses step evaluation without an eval set; ours scores the held-out prompts
    # itself (MatchedRewardTrainer.evaluate), so one row stands in.
    eval_ds = train_ds.select(range(1)) if cfg.training.eval_steps else None
    trainer = MatchedRewardTrainer(model=model, args=args, train_dataset=train_ds, eval_dataset=eval_ds,
                                   data_collator=PairCollator(tok.pad_token_id), processing_class=tok, arm=arm,
                                   heldout=selection, pad_id=tok.pad_token_id,
                                   eval_batch_size=cfg.training.eval_batch_size, callbacks=callbacks)
    use_progress_bar(trainer, f"{cfg.arm} seed{cfg.seed} lr={cfg.training.learning_rate:g}")
    if _zero3(trainer) and cfg.model.lora is not None:
        raise ConfigError("LoRA under DeepSpeed ZeRO-3 cannot be saved as a merged plain checkpoint here; "
                          "use ZeRO-2 or DDP for LoRA runs")
    if rank == 0:
        atomic_write_text(out / CONFIG_FILE, json.dumps(cfg.to_dict(), indent=2, default=str))
    resume = any(out.glob("checkpoint-*")) if out.exists() else False
    trainer.train(resume_from_checkpoint=True if resume else None)

    # Selection has already loaded the chosen model (best) or kept the last one (final).
    scores = trainer.score_set(heldout)
    held_metrics = heldout.metrics(scores)
    sel_metrics = selection.metrics(trainer.score_set(selection)) if selection is not heldout else held_metrics
    world = trainer.args.world_size
    pairs_per_rank = _gather_ints(trainer, trainer.pairs_seen)
    checksum = _gather_floats(trainer, float(sum(p.detach().double().sum() for p in trainer.model.parameters())))

    summary: dict[str, Any] = {
        "arm": cfg.arm,
        "seed": cfg.seed,
        "model": cfg.model.name_or_path,
        "lora": cfg.model.lora is not None,
        "data": cfg.data,
        "attribute": cfg.attribute,
        "selection": cfg.training.selection,
        "n_train_prompts": len(data.train_prompt_ids),
        "n_heldout_prompts": len(data.heldout_prompt_ids),
        "n_train_pairs": len(data.train_pairs),
        "n_heldout_pairs": len(data.heldout_pairs),
        "n_selection_prompts": len(data.selection_prompt_ids),
        "selection_pair_accuracy": sel_metrics["pair_accuracy"],
        "heldout_pair_accuracy": held_metrics["pair_accuracy"],
        "heldout_rmse": held_metrics.get("rmse"),
        "heldout_pearson": held_metrics.get("pearson"),
        "score_sd": held_metrics["score_sd"],
        "score_mean": held_metrics["score_mean"],
        "global_step": trainer.state.global_step,
        "best_checkpoint": trainer.state.best_model_checkpoint,
        "world_size": world,
        "pairs_per_rank": pairs_per_rank,
        "param_checksum_per_rank": checksum,
        "n_prompt_truncated": encoder.n_prompt_truncated,
        "n_response_truncated": encoder.n_response_truncated,
        "data_summary": data.rating_set.summary(),
        "pair_counts": data.pair_counts,
        "train_seconds": time.time() - t0,
    }
    if _zero3(trainer):
        # ZeRO-3 shards the weights: saving is collective (every rank takes part) and gathers the
        # 16-bit weights into one plain checkpoint (accelerate config: zero3_save_16bit_model).
        trainer.save_model(str(out))
    if trainer.is_world_process_zero():
        if _zero3(trainer):
            tok.save_pretrained(out)
        else:
            save_checkpoint(trainer.model, tok, out)
        held_df = pd.DataFrame({"prompt_id": [k[0] for k in heldout.keys], "response_id": [k[1] for k in heldout.keys],
                                "condition": "original", "variant": 0, "donor_prompt_id": None, "score": scores})
        atomic_write_table(out / "heldout_scores.parquet", held_df)
        atomic_write_json(out / SUMMARY_FILE, summary)
        if tracker is not None:
            tracker.summary({f"heldout/{k}": v for k, v in held_metrics.items()})
            tracker.summary({"n_train_pairs": summary["n_train_pairs"], "arm": cfg.arm, "seed": cfg.seed})
    trainer.accelerator.wait_for_everyone()
    if tracker is not None:
        tracker.finish()
    return summary


CONFIG_FILE = "matchrm_config.json"
# Keys that may differ between a run and its resumption without changing what is trained.
_RESUME_FREE = ("wandb", "audit", "output_dir", "on_bad_data")


def _comparable(cfg_dict: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in cfg_dict.items() if k not in _RESUME_FREE}, sort_keys=True, default=str)


def _check_same_run(cfg: TrainConfig, out: Path) -> None:
    """Resuming (or returning a finished summary) is only right for the same arm, seed, model,
    data and budget; anything else in the directory is another run's."""
    saved = out / CONFIG_FILE
    if saved.exists():
        if _comparable(json.loads(saved.read_text())) != _comparable(json.loads(json.dumps(cfg.to_dict(), default=str))):
            raise ConfigError(f"{out} holds a run with another config ({saved}); choose another output_dir "
                              "or pass --force to replace it")
    elif any(out.glob("checkpoint-*")) or (out / SUMMARY_FILE).exists():
        raise ConfigError(f"{out} holds checkpoints of an unknown run (no {CONFIG_FILE}); "
                          "choose another output_dir or pass --force")


def _clear_run(out: Path) -> None:
    import shutil

    for p in list(out.glob("checkpoint-*")) if out.exists() else []:
        shutil.rmtree(p)
    for name in (SUMMARY_FILE, CONFIG_FILE, "heldout_scores.parquet"):
        (out / name).unlink(missing_ok=True)


def save_checkpoint(model: Any, tokenizer: Any, out: Path) -> None:
    """A plain transformers checkpoint: LoRA merged, head included, pad token recorded."""
    import shutil
    import tempfile

    plain = unwrap_for_saving(model)
    plain.config.pad_token_id = tokenizer.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    # Written beside, then moved in file by file: a crash never leaves a half-written weights file.
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=".saving-"))
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        for f in tmp.iterdir():
            os.replace(f, out / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _zero3(trainer: MatchedRewardTrainer) -> bool:
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    return plugin is not None and getattr(plugin, "zero_stage", None) == 3


def _gather_ints(trainer: MatchedRewardTrainer, value: int) -> list[int]:
    t = torch.tensor([value], dtype=torch.long, device=trainer.args.device)
    return [int(x) for x in trainer.accelerator.gather(t).cpu().tolist()]


def _gather_floats(trainer: MatchedRewardTrainer, value: float) -> list[float]:
    t = torch.tensor([value], dtype=torch.float64, device=trainer.args.device)
    return [float(x) for x in trainer.accelerator.gather(t).cpu().tolist()]
