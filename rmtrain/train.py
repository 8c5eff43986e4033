"""`train(config)`: one matched arm, from rating set to checkpoint and train_summary.json.

Data preparation lives in `rmtrain.prepare`, the run directory (resume, reuse, saving) in
`rmtrain.rundir`; this module wires them to the trainer. Callbacks that belong to layers above
(the audit callback of `rmeval`) are attached by the caller: `rmtrain.runs.train_run` does it for
the CLI and the sweep.

A run ends with a ``status`` in train_summary.json (``run_status``), beside ``status_reason`` and
``status_step``:

- ``diverged``: a loss or a trainable weight was NaN or infinite at the end of some step (training
  stopped there: ``rmtrain.trainer.DivergenceCallback``), or a held-out score is. No model is
  saved and every held-out figure is null: nothing in the directory can be mistaken for a model.
- ``collapsed``: the held-out scores are (nearly) constant, sd <= c * rms with sd their standard
  deviation (ddof 1), rms = sqrt(mean(score^2)) their root-mean-square and c =
  ``training.collapse_sd`` (1e-4; 0 never). The ratio is scale-free, as a reward's origin and
  unit are arbitrary; a constant model's sd in float32 is 0 or rounding, about 1e-7 of rms. The
  model is saved, with its figures.
- ``ok`` otherwise."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from rmcore.console.training import use_progress_bar
from rmcore.errors import ConfigError
from rmcore.models.modeling import load_reward_model, resolve_max_length
from rmcore.models.shared_prompt import unsupported_reason
from rmcore.runtime.wandb_log import Tracker
from rmtrain.arms import make_arm
from rmtrain.config import TrainConfig, hf_arguments
from rmtrain.prepare import (  # noqa: F401  (re-exported: the names callers know)
    EncodedInputs,
    PreparedData,
    ResponseEncoder,
    build_heldout,
    build_train_dataset,
    encode_inputs,
    pair_table,
    prepare_data,
)
from rmtrain.rundir import (  # noqa: F401
    CONFIG_FILE,
    SUMMARY_FILE,
    open_run,
    progress_callback,
    read_progress,
    resume_checkpoint,
    save_checkpoint,
    store_wandb_run,
    stored_wandb_run,
    write_config,
    write_results,
)
from rmtrain.trainer import MatchedRewardTrainer, PairCollator

log = logging.getLogger(__name__)

# (config, prepared data, tokenizer) -> a transformers TrainerCallback
CallbackFactory = Callable[[TrainConfig, PreparedData, Any], Any]


def use_shared_prompt(setting: bool | str, model: Any) -> bool:
    """Resolve ``training.shared_prompt`` for this model: auto uses it where the model can take it
    and says once when it cannot; true requires it."""
    mode = str(setting).lower()
    if mode == "false":
        return False
    reason = unsupported_reason(model)
    if reason is None:
        return True
    if mode == "true":
        raise ConfigError(f"training.shared_prompt is true but {reason}")
    log.info("shared-prompt forward off: %s; training with one forward per text", reason)
    return False


def skip_deepspeed_cpu_shm_op() -> bool:
    """Under ``accelerate launch`` with DeepSpeed on a CPU accelerator, keep DeepSpeed from
    compiling its shared-memory communication op (g++ through torch's JIT extensions: minutes on
    two cores, at the start of every run on a fresh machine). The op serves only
    ``inference_all_reduce`` (tensor-parallel inference); ZeRO training reduces and gathers through
    torch.distributed (gloo) with or without it. DeepSpeed starts its communication backend in
    ``TrainingArguments`` (accelerate's state) and builds the op there only when its probed table
    of compatible ops, one dict it keeps in ``deepspeed.ops``, says so: the op is marked
    incompatible before that. Returns whether it was."""
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() not in ("1", "true"):
        return False
    try:
        import deepspeed.ops
        from deepspeed.accelerator import get_accelerator
    except ImportError:
        return False
    if get_accelerator().device_name() != "cpu":
        return False
    ops = deepspeed.ops.__compatible_ops__
    if "deepspeed_shm_comm" not in ops:  # another DeepSpeed: leave its ops alone
        return False
    ops["deepspeed_shm_comm"] = False
    return True


def _training_arguments(cfg: TrainConfig, report_to: list[str]) -> Any:
    from transformers import TrainingArguments

    skip_deepspeed_cpu_shm_op()  # before TrainingArguments starts DeepSpeed's communication backend
    t = cfg.training
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cpu = t.use_cpu or not torch.cuda.is_available()
    # a best_* selection needs a checkpoint at each evaluation; final: only save_steps, if set
    save_steps = t.save_steps or (t.eval_steps if t.selection != "final" else None)
    # the settings TrainingArguments takes as they are (declared on their fields: rmtrain.config.hf)
    kwargs: dict[str, Any] = {**hf_arguments(cfg), **hf_arguments(t)}
    kwargs.update(
        # derived: the strategies follow from whether eval_steps / save_steps are set (500 is unused then)
        eval_strategy="steps" if t.eval_steps else "no",
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500,
        # derived from training.selection: the best held-out pair accuracy is loaded at the end
        load_best_model_at_end=t.selection != "final",
        metric_for_best_model="pair_accuracy" if t.selection != "final" else None,
        greater_is_better=True,
        # a switch in the recipe, a strategy name in transformers
        train_sampling_strategy="group_by_length" if t.group_by_length else "random",
        # fixed by this trainer: pair columns the model does not take, the collator's length column,
        # rmcore's own progress bar (use_progress_bar)
        remove_unused_columns=False,
        length_column_name="length",
        disable_tqdm=True,
        # from the caller and the machine: the W&B run (named like the tracker's), the CPU where no GPU is
        report_to=report_to,
        run_name=f"{cfg.arm}-seed{cfg.seed}",
        use_cpu=cpu,
    )
    if world > 1 and cpu:  # several CPU processes: NCCL needs GPUs
        kwargs["ddp_backend"] = "gloo"
    return TrainingArguments(**kwargs)


def train(cfg: TrainConfig, *, force: bool = False, callbacks: Sequence[CallbackFactory] = ()) -> dict[str, Any]:
    """Train one arm; returns (and writes) the summary. Resumes from the last checkpoint in
    output_dir if one exists; a finished run (summary present) is not retrained unless force.
    `callbacks` build extra Trainer callbacks once data and tokenizer exist."""
    from transformers import set_seed

    cfg.validate()
    out = Path(cfg.output_dir)
    finished = open_run(cfg, out, force)
    if finished is not None:
        return finished
    if cfg.audit.enabled and not callbacks:
        log.warning("audit.enabled: the audit callback is attached by rmtrain.runs.train_run "
                    "(the CLI and the sweep use it); this call trains without it")
    t0 = time.time()
    rank = int(os.environ.get("RANK", "0"))
    set_seed(cfg.seed)
    data = prepare_data(cfg)
    arm = make_arm(cfg.arm, cfg.arm_options)
    check_batch_size(cfg, len(data.train_pairs))
    table = pair_table(data.train_pairs, data.rating_set, cfg.attribute)
    arm.check(table)
    targets = arm.targets(table, cfg.seed)
    model, tok = load_reward_model(cfg.model, for_training=True)
    # never longer than the model can read: a longer text would crash the forward, not be truncated
    inputs = encode_inputs(cfg, data, targets, tok, resolve_max_length(cfg.training.max_length, model, tok))

    tracker = _tracker(cfg, out) if rank == 0 else None
    wandb_on = cfg.wandb.mode != "disabled" and (tracker is None or tracker.enabled)
    args = _training_arguments(cfg, ["wandb"] if wandb_on else [])
    # transformers refuses step evaluation without an eval set; ours scores the held-out prompts
    # itself (MatchedRewardTrainer.evaluate), so one row stands in.
    eval_ds = inputs.train_dataset.select(range(1)) if cfg.training.eval_steps else None
    collator = PairCollator(tok.pad_token_id, shared_prompt=use_shared_prompt(cfg.training.shared_prompt, model))
    trainer = MatchedRewardTrainer(model=model, args=args, train_dataset=inputs.train_dataset, eval_dataset=eval_ds,
                                   data_collator=collator, processing_class=tok, arm=arm,
                                   heldout=inputs.selection, pad_id=tok.pad_token_id,
                                   eval_batch_size=cfg.training.eval_batch_size,
                                   packed_encoder=cfg.training.packed_encoder,
                                   callbacks=(extra := [make(cfg, data, tok) for make in callbacks]))
    for cb in extra:
        # a callback that cannot run under this set-up (the rank-0 audit under ZeRO-3) refuses it here
        check = getattr(cb, "check_supported", None)
        if check is not None:
            check(zero_stage=3 if _zero3(trainer) else None)
    use_progress_bar(trainer, f"{cfg.arm} seed{cfg.seed} lr={cfg.training.learning_rate:g}")
    if _zero3(trainer) and cfg.model.lora is not None:
        raise ConfigError("LoRA under DeepSpeed ZeRO-3 cannot be saved as a merged plain checkpoint here; "
                          "use ZeRO-2 or DDP for LoRA runs")
    if rank == 0:
        write_config(cfg, out)
    resumed_from = resume_checkpoint(out, remove_incomplete=rank == 0)
    before = read_progress(resumed_from, rank)
    if resumed_from:
        log.info("resuming from %s (%d pairs on this rank, %.0f s before the interruption)", resumed_from,
                 before["pairs_seen"], before["train_seconds"])
    trainer.add_callback(progress_callback(trainer, t0, before))
    trainer.train(resume_from_checkpoint=resumed_from)
    trainer.pairs_seen += int(before["pairs_seen"])  # the whole run is counted, not only this part

    # Selection has already loaded the chosen model (best) or kept the last one (final); a diverged
    # model is not scored
    scores = trainer.score_set(inputs.heldout) if trainer.divergence is None else None
    if scores is not None and not np.isfinite(scores).all():
        trainer.divergence = {"step": trainer.state.global_step, "what": "held-out scores", "loss": None}
        scores = None
    summary = _summary(cfg, data, inputs, trainer, scores, t0 - before["train_seconds"])
    summary["resumed_from"] = resumed_from
    if summary["status"] != "ok" and trainer.is_world_process_zero():
        log.warning("%s seed %d: %s: %s", cfg.arm, cfg.seed, summary["status"], summary["status_reason"])
    _save(cfg, trainer, tok, out, summary, inputs, scores, tracker)
    return summary


def check_batch_size(cfg: TrainConfig, n_pairs: int) -> None:
    """Refuse a batch the training pairs cannot fill: every step would hold fewer pairs than asked
    (one smaller step per epoch), which is not the run the settings describe."""
    t = cfg.training
    world = int(os.environ.get("WORLD_SIZE", "1"))
    per_step = t.per_device_batch_size * world * t.gradient_accumulation_steps
    if per_step > n_pairs:
        how = (f"{t.per_device_batch_size} x {world} processes x {t.gradient_accumulation_steps} accumulation steps "
               f"= {per_step} pairs per step" if per_step != t.per_device_batch_size else f"{per_step}")
        raise ConfigError(f"training.per_device_batch_size: {how} is more than the {n_pairs} training pairs; "
                          f"set it to at most {max(n_pairs // (world * t.gradient_accumulation_steps), 1)}")


def run_status(divergence: dict[str, Any] | None, scores: Any, collapse_sd: float) -> dict[str, Any]:
    """{status, status_reason, status_step} of a run (module doc) from the trainer's divergence
    record and the held-out scores."""
    if divergence is not None:
        what = {"loss": "non-finite loss", "weights": "non-finite weights",
                "held-out scores": "non-finite held-out scores"}[divergence["what"]]
        loss = f" (loss {divergence['loss']})" if divergence.get("loss") is not None else ""
        return {"status": "diverged", "status_step": divergence["step"],
                "status_reason": f"{what} at step {divergence['step']}{loss}; training stopped, no model saved"}
    s = np.asarray(scores, dtype=float)
    if collapse_sd > 0 and len(s) > 1:
        sd, rms = float(np.std(s, ddof=1)), float(np.sqrt(np.mean(s * s)))
        if sd <= collapse_sd * rms:
            return {"status": "collapsed", "status_step": None,
                    "status_reason": f"held-out score SD {sd:.3g} is at most {collapse_sd:g} x their root-mean-square "
                                     f"{rms:.3g} (training.collapse_sd): a constant model"}
    return {"status": "ok", "status_reason": None, "status_step": None}


def _tracker(cfg: TrainConfig, out: Path) -> Any:
    # an interrupted run, resumed, logs on in the W&B run it began (its id kept in the run directory)
    tracker = Tracker(project=cfg.wandb.project, name=f"{cfg.arm}-seed{cfg.seed}", group=cfg.wandb.group,
                      tags=[f"arm:{cfg.arm}", f"seed:{cfg.seed}", *cfg.wandb.tags], config=cfg.to_dict(),
                      mode=cfg.wandb.mode, dir=out, job_type="train", entity=cfg.wandb.entity,
                      run_id=stored_wandb_run(out))
    store_wandb_run(out, tracker.run_id)
    return tracker


def _summary(cfg: TrainConfig, data: PreparedData, inputs: EncodedInputs, trainer: MatchedRewardTrainer,
             scores: Any, t0: float) -> dict[str, Any]:
    """The run's train_summary.json; ``scores`` None: a diverged model, every held-out figure null."""
    heldout, selection = inputs.heldout, inputs.selection
    if scores is None:
        held_metrics = sel_metrics = dict.fromkeys(("pair_accuracy", "score_sd", "score_mean"))
    else:
        held_metrics = heldout.metrics(scores)
        sel_metrics = selection.metrics(trainer.score_set(selection)) if selection is not heldout else held_metrics
    checksum = _gather_floats(trainer, float(sum(p.detach().double().sum() for p in trainer.model.parameters())))
    return {
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
        "world_size": trainer.args.world_size,
        "pairs_per_rank": _gather_ints(trainer, trainer.pairs_seen),
        "param_checksum_per_rank": checksum,
        "n_prompt_truncated": inputs.encoder.n_prompt_truncated,
        "n_response_truncated": inputs.encoder.n_response_truncated,
        "data_summary": data.rating_set.summary(),
        "pair_counts": data.pair_counts,
        "train_seconds": time.time() - t0,
        **run_status(trainer.divergence, scores, cfg.training.collapse_sd),
    }


def _save(cfg: TrainConfig, trainer: MatchedRewardTrainer, tok: Any, out: Path, summary: dict[str, Any],
          inputs: EncodedInputs, scores: Any, tracker: Any) -> None:
    """The model, the held-out scores and the summary; of a diverged run (``scores`` None) the
    summary alone."""
    if _zero3(trainer) and scores is not None:
        # ZeRO-3 shards the weights: saving is collective (every rank takes part) and gathers the
        # 16-bit weights into one plain checkpoint (accelerate config: zero3_save_16bit_model).
        trainer.save_model(str(out))
    if trainer.is_world_process_zero():
        held_df = None
        if scores is not None:
            if _zero3(trainer):
                tok.save_pretrained(out)
            else:
                save_checkpoint(trainer.model, tok, out)
            keys = inputs.heldout.keys
            held_df = pd.DataFrame({"prompt_id": [k[0] for k in keys], "response_id": [k[1] for k in keys],
                                    "condition": "original", "variant": 0, "donor_prompt_id": None, "score": scores})
        write_results(out, summary, held_df)
        if tracker is not None:
            if scores is not None:
                tracker.summary({f"heldout/{k}": v for k, v in inputs.heldout.metrics(scores).items()})
            tracker.summary({"n_train_pairs": summary["n_train_pairs"], "arm": cfg.arm, "seed": cfg.seed,
                             "status": summary["status"], "status_reason": summary["status_reason"],
                             "resumed_from": summary["resumed_from"]})
    trainer.accelerator.wait_for_everyone()
    if tracker is not None:
        tracker.finish()


def _zero3(trainer: MatchedRewardTrainer) -> bool:
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    return plugin is not None and getattr(plugin, "zero_stage", None) == 3


def _gather_ints(trainer: MatchedRewardTrainer, value: int) -> list[int]:
    t = torch.tensor([value], dtype=torch.long, device=trainer.args.device)
    return [int(x) for x in trainer.accelerator.gather(t).cpu().tolist()]


def _gather_floats(trainer: MatchedRewardTrainer, value: float) -> list[float]:
    t = torch.tensor([value], dtype=torch.float64, device=trainer.args.device)
    return [float(x) for x in trainer.accelerator.gather(t).cpu().tolist()]
