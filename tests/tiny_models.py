"""Tiny causal LMs built from a config with a byte-level BPE tokenizer trained here (nothing is
downloaded): an EOS token, no pad token, a minimal chat template whose turns end in EOS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

EOS = "<|endoftext|>"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}" + EOS + "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def train_tokenizer(texts: list[str], vocab_size: int = 400) -> Any:
    """Byte-level BPE trained on `texts`: EOS only (no pad, no unk), the minimal chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOS)
    tok.chat_template = CHAT_TEMPLATE
    assert tok.pad_token is None and tok.unk_token is None  # forces a dedicated pad token
    return tok


def tiny_causal_lm(path: Path, texts: list[str], arch: str = "qwen2", vocab_size: int = 400) -> Path:
    """Save a 2-layer, hidden-32 causal LM (`qwen2` or `qwen3`) and its tokenizer to `path`."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    tok = train_tokenizer(texts, vocab_size)
    config_cls, model_cls = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}[arch]
    torch.manual_seed(0)
    cfg = config_cls(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                     eos_token_id=tok.eos_token_id, tie_word_embeddings=True)
    model_cls(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def lora_with_effect(model: Any, r: int = 4) -> Any:
    """LoRA adapters (rmcore.modeling.apply_lora) whose B matrices are random: they start at zero,
    and a comparison of gradients needs adapters that change the output."""
    import torch

    from rmcore.modeling import LoraSettings, apply_lora

    model = apply_lora(model, LoraSettings(r=r, dropout=0.0))
    torch.manual_seed(1)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    return model
