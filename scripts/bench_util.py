"""Shared pieces of the benchmark scripts: this machine's fp32 matmul rate, and a small
Qwen3-architecture reward model built from a config (no download) for decoder benchmarks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|endoftext|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def matmul_gflops(n: int = 512, seconds: float = 1.0) -> float:
    """Best fp32 GFLOP/s of an n x n matmul over ~``seconds`` at the current torch thread count
    (best of many: the least disturbed figure on a shared machine)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best, t_end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9


def build_qwen3(out: Path, texts: list[str], *, hidden: int = 256, layers: int = 4, heads: int = 4,
                intermediate: int = 768, vocab: int = 4000, seed: int = 0) -> str:
    """A randomly initialised Qwen3 causal LM and a byte-level BPE tokenizer trained on ``texts``
    (chat template, EOS, no pad: rmtrain adds its dedicated pad token), saved under ``out``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")
    tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=hidden, intermediate_size=intermediate,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                      head_dim=hidden // heads, max_position_embeddings=4096, eos_token_id=tok.eos_token_id,
                      tie_word_embeddings=True)
    Qwen3ForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


def forward_flops_per_token(model: Any) -> float:
    """2 x the parameters a token's forward multiplies through (embeddings are lookups, not matmuls);
    attention's own score/value products are excluded (they grow with length, reported apart)."""
    emb = model.get_input_embeddings()
    n_emb = emb.weight.numel() if emb is not None else 0
    return 2.0 * (sum(p.numel() for p in model.parameters()) - n_emb)


def rating_set_texts(rs: Any) -> list[str]:
    return [m["content"] for p in rs.prompts for m in p.messages] + [r.text for p in rs.prompts for r in p.responses]
