"""`rmtrain train` (rmtrain.runs.train_run) with `audit.enabled`: every saved checkpoint gets an audit beside it and the
audit's figures land in the run's W&B history at that step."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from rmcore.errors import ConfigError
from rmtrain.config import load_train_config
from rmtrain.runs import train_run
from tests.support import ROOT, plain_scores, read_run


@pytest.mark.slow
def test_every_saved_checkpoint_is_audited(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    out = tmp_path / "run"
    cfg = load_train_config(ROOT / "recipes" / "demo.yaml", {
        "arm": "regression", "output_dir": str(out), "data.n_prompts": 40, "max_train_pairs": None,
        "heldout_fraction": 0.25,  # 10 held-out prompts, of which the audit reads audit.max_prompts
        "training.max_steps": 4, "training.save_steps": 2, "training.save_total_limit": None,
        "training.max_length": 64, "training.per_device_batch_size": 4, "training.logging_steps": 1,
        "audit.enabled": True, "audit.max_prompts": 8, "audit.n_boot": 50,
        "audit.conditions": ["original", "generic", "random"],
        "audit.suitability": {"enabled": True, "max_items": 8, "n_permutations": 200}})
    summary = train_run(cfg)  # the wiring layer attaches rmeval's callback
    assert summary["global_step"] == 4
    for step in (2, 4):
        audit = json.loads((out / f"checkpoint-{step}" / "audit" / "audit.json").read_text())
        assert audit["meta"]["n_prompts"] == 8
        assert set(audit["share"]) >= {"original", "generic", "human"}
        assert "random" in audit["transplant"] and "paraphrase" not in audit  # not scored -> absent
        scores = pd.read_parquet(out / f"checkpoint-{step}" / "audit" / "scores.parquet")
        assert set(scores["condition"]) == {"original", "generic", "random"}
    # each audit scored its own checkpoint (the in-memory model at that save): its original-condition
    # scores are a plain transformers forward of checkpoint-N, one unpadded text at a time; and the two
    # checkpoints are different models (two optimizer steps at a positive rate lie between them)
    for step in (2, 4):
        scores = pd.read_parquet(out / f"checkpoint-{step}" / "audit" / "scores.parquet")
        orig = scores[scores["condition"] == "original"]
        ref = plain_scores(out / f"checkpoint-{step}", list(zip(orig["prompt_id"], orig["response_id"])),
                           cfg.training.max_length, data=cfg.data)
        np.testing.assert_allclose(orig["score"].to_numpy(), ref, atol=1e-4, err_msg=f"checkpoint-{step}")
    w2, w4 = (load_file(out / f"checkpoint-{s}" / "model.safetensors") for s in (2, 4))
    assert set(w2) == set(w4) and any(not torch.equal(w2[k], w4[k]) for k in w2)
    a4 = json.loads((out / "checkpoint-4" / "audit" / "audit.json").read_text())
    run = read_run(out / "wandb")
    audited = [h for h in run["history"] if any(k.startswith("audit") for k in h)]
    assert len(audited) == 2
    steps = sorted(h["train/global_step"] for h in audited)
    assert steps == [2, 4]
    # the share itself, not a like-for-like or difference figure that also names "original"
    key = next(k for k in audited[0] if k.endswith("/share/original/estimate"))
    by_step = {h["train/global_step"]: h for h in audited}
    assert by_step[4][key] == pytest.approx(a4["share"]["original"]["estimate"])
    # the suitability part (cheap subset: controlled + rule-based ST/SP) beside the audit, logged at that step
    suit = json.loads((out / "checkpoint-4" / "audit" / "suitability.json").read_text())
    assert list(suit["perturbations"]) == ["EF", "PH", "IU", "IW", "CN", "ST", "SP"]
    assert suit["settings"]["B"] == 200 and suit["perturbations"]["EF"]["n"] <= 8
    assert (out / "checkpoint-4" / "audit" / "suitability.png").is_file()
    assert by_step[4]["audit/suitability/perturbations/EF/cohens_d"] == pytest.approx(
        suit["perturbations"]["EF"]["cohens_d"])


@pytest.mark.usefixtures("one_torch_thread")
def test_audit_under_zero3_is_refused_before_training(tmp_path, monkeypatch):
    import rmtrain.train as rt
    from rmeval.audit.callback import check_audit_supported

    with pytest.raises(ConfigError, match="ZeRO-3"):
        check_audit_supported(3)
    check_audit_supported(2)
    check_audit_supported(None)

    monkeypatch.setattr(rt, "_zero3", lambda trainer: True)
    cfg = load_train_config(ROOT / "recipes" / "demo.yaml", {
        "output_dir": str(tmp_path / "run"), "data.n_prompts": 20, "max_train_pairs": 8, "training.max_steps": 1,
        "training.max_length": 32, "training.per_device_batch_size": 4, "wandb.mode": "disabled",
        "audit.enabled": True, "audit.max_prompts": 4})
    from rmtrain.runs import train_run  # the wiring layer attaches the audit callback

    with pytest.raises(ConfigError, match="ZeRO-3"):
        train_run(cfg)
    assert not list((tmp_path / "run").glob("checkpoint-*"))
