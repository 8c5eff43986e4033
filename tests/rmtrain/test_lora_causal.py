"""A tiny causal LM as a reward model: pad handling, padding invariance, LoRA training and merging.

The model (Qwen2, hidden 32, 2 layers) and its tokenizer (byte-level BPE trained here on the
simulated set's text, an EOS token, no pad token, a minimal chat template whose turns end in EOS)
are built locally by rmcore.models.tiny, so nothing is downloaded. References are independent of rmtrain's scoring code:
the backbone's last hidden state at the last real token, pushed through the score head by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from rmcore.data.loading import load_rating_set
from rmcore.models.formatting import Encoded, encode_example, layout
from rmcore.models.modeling import LoraSettings, ModelSettings, load_reward_model, score_encoded
from rmcore.models.tiny import tiny_causal_lm
from rmtrain.config import TrainConfig, TrainingSettings, WandbSettings
from tests.support import TINY_SET as DATA
from tests.support import set_texts

MAX_LENGTH = 256  # the tiny models' positions; the simulated texts run 81-356 tokens, so lengths vary


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_causal_lm(tmp_path_factory.mktemp("tiny_qwen2"), set_texts(DATA), "qwen2")


def encoded_examples(tok: Any, n: int = 16) -> list[Encoded]:
    rs = load_rating_set(DATA)
    items = [(p.messages, r.text) for p in rs.prompts for r in p.responses][:n]
    return [encode_example(tok, m, t, MAX_LENGTH) for m, t in items]


@torch.no_grad()
def hand_scores(model: Any, encoded: list[Encoded]) -> np.ndarray:
    """Score = head(last hidden state at the last token), one unpadded text at a time."""
    out = []
    for e in encoded:
        h = model.model(input_ids=torch.tensor([e.input_ids])).last_hidden_state
        out.append(float(model.score(h[0, -1])[0]))
    return np.array(out)


def test_pad_token_and_padding_invariance(tiny_lm: Path) -> None:
    model, tok = load_reward_model(tiny_lm)
    model.eval()
    assert layout(tok) == "chat"
    assert tok.pad_token_id is not None and tok.pad_token_id != tok.eos_token_id
    assert model.config.pad_token_id == tok.pad_token_id
    assert model.get_input_embeddings().weight.shape[0] == len(tok)  # resized for the new token

    enc = encoded_examples(tok)
    # Untruncated texts end in EOS: the case where pad == EOS would read the wrong token.
    assert sum(e.input_ids[-1] == tok.eos_token_id for e in enc) >= len(enc) // 2
    assert len({len(e) for e in enc}) > 3  # varied lengths, so padding really happens
    ref = hand_scores(model, enc)
    assert np.std(ref) > 0
    for side in ("right", "left"):
        for bs in (1, 5, 16):
            got = score_encoded(model, enc, pad_id=tok.pad_token_id, batch_size=bs, padding_side=side)
            np.testing.assert_allclose(got, ref, atol=1e-5, err_msg=f"padding {side}, batch {bs}")
    # The reference does catch the classic bug: with pad == EOS the score is read one token early.
    model.config.pad_token_id = tok.eos_token_id
    bad = score_encoded(model, enc, pad_id=tok.eos_token_id, batch_size=5)
    assert np.abs(bad - ref).max() > 1e-4


def lora_config(model_path: Path, out: Path, *, gradient_checkpointing: bool = False,
                max_steps: int = 3) -> TrainConfig:
    return TrainConfig(
        arm="bradley_terry", seed=1, output_dir=str(out), data=dict(DATA), heldout_fraction=0.25,
        model=ModelSettings(str(model_path), lora=LoraSettings(r=4), gradient_checkpointing=gradient_checkpointing),
        training=TrainingSettings(learning_rate=1e-2, max_steps=max_steps, per_device_batch_size=4,
                                  max_length=MAX_LENGTH, warmup_ratio=0.0, logging_steps=1, use_cpu=True,
                                  eval_batch_size=8),
        wandb=WandbSettings(mode="disabled"),
    )


def _capture_model(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Keep a handle on the model `train` builds, and a copy of its initial head and base weights."""
    import rmtrain.train as rt

    seen: dict[str, Any] = {}

    def load(settings: Any, **kw: Any) -> Any:
        model, tok = load_reward_model(settings, **kw)
        seen["model"] = model
        base = model.get_base_model()
        seen["score0"] = base.score.weight.detach().clone()
        seen["q0"] = base.model.layers[0].self_attn.q_proj.weight.detach().clone()
        return model, tok

    def save(model: Any, tok: Any, out: Path) -> None:
        # Trained state as it is before save_checkpoint merges the adapters away.
        seen["trained"] = {n: (p.requires_grad, p.detach().clone()) for n, p in model.named_parameters()}
        seen["gradient_checkpointing"] = model.get_base_model().is_gradient_checkpointing
        save_checkpoint(model, tok, out)

    save_checkpoint = rt.save_checkpoint
    monkeypatch.setattr(rt, "load_reward_model", load)
    monkeypatch.setattr(rt, "save_checkpoint", save)
    return seen


def test_lora_trains_head_and_saves_merged(tiny_lm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rmtrain.train import train

    seen = _capture_model(monkeypatch)
    out = tmp_path / "lora"
    summary = train(lora_config(tiny_lm, out))
    assert summary["lora"] is True and summary["global_step"] == 3

    # The head is trained in full next to the adapters (modules_to_save), and it moved.
    trained = seen["trained"]
    head = {n: v for n, v in trained.items() if "score" in n and "modules_to_save" in n}
    assert head and all(req for req, _ in head.values())
    assert not torch.allclose(next(w for req, w in head.values()), seen["score0"])
    frozen = [req for n, (req, _) in trained.items() if "q_proj.base_layer" in n]
    assert frozen and not any(frozen)

    # Saved checkpoint: merged, loads without peft, head and adapters both baked in.
    assert not (out / "adapter_config.json").exists()
    keys = load_file(out / "model.safetensors").keys()
    assert not any("lora_" in k or "modules_to_save" in k or "base_layer" in k for k in keys), sorted(keys)[:5]
    plain = AutoModelForSequenceClassification.from_pretrained(out).eval()
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.pad_token_id is not None and tok.pad_token_id != tok.eos_token_id
    assert plain.config.pad_token_id == tok.pad_token_id
    assert not torch.allclose(plain.score.weight, seen["score0"])
    assert not torch.allclose(plain.model.layers[0].self_attn.q_proj.weight, seen["q0"])  # LoRA merged in

    # The plain checkpoint reproduces the held-out scores the trainer computed with the peft model.
    held = pd.read_parquet(out / "heldout_scores.parquet")
    by_id = load_rating_set(DATA).by_id()
    enc = []
    for pid, rid in zip(held["prompt_id"], held["response_id"]):
        p = by_id[pid]
        enc.append(encode_example(tok, p.messages, next(r for r in p.responses if r.response_id == rid).text,
                                  MAX_LENGTH))
    np.testing.assert_allclose(held["score"].to_numpy(), hand_scores(plain, enc), atol=1e-5)
    with torch.no_grad():  # and a plain transformers forward agrees too
        plain_fwd = [float(plain(input_ids=torch.tensor([e.input_ids])).logits[0, 0]) for e in enc]
    np.testing.assert_allclose(held["score"].to_numpy(), plain_fwd, atol=1e-5)


def test_gradient_checkpointing_with_lora_runs(tiny_lm: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from rmtrain.train import train

    seen = _capture_model(monkeypatch)
    summary = train(lora_config(tiny_lm, tmp_path / "gc", gradient_checkpointing=True, max_steps=2))
    assert summary["global_step"] == 2 and np.isfinite(summary["score_sd"])
    assert seen["gradient_checkpointing"]
    # Gradients flowed through the checkpointed layers into the first layer's adapters (B starts at 0).
    lora_b = [w for n, (_, w) in seen["trained"].items() if "layers.0." in n and "lora_B" in n]
    assert lora_b and any(w.abs().sum() > 0 for w in lora_b)
