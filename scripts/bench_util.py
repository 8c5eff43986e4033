"""Shared pieces of the benchmark scripts: this machine's fp32 matmul rate, and a small
Qwen3-architecture reward model built from a config by rmcore.models.tiny (no download) for decoder
benchmarks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from rmcore.models.tiny import tiny_causal_lm


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
    """The benchmarks' decoder: a randomly initialised Qwen3 causal LM of this shape and a byte-level
    BPE tokenizer trained on ``texts`` (rmcore.models.tiny: chat template, EOS, no pad, so rmtrain adds
    its dedicated pad token), saved under ``out``."""
    return str(tiny_causal_lm(out, texts, "qwen3", vocab_size=vocab, seed=seed, hidden_size=hidden,
                              intermediate_size=intermediate, num_hidden_layers=layers, num_attention_heads=heads,
                              num_key_value_heads=heads, head_dim=hidden // heads, max_position_embeddings=4096))


def forward_flops_per_token(model: Any) -> float:
    """2 x the parameters a token's forward multiplies through (embeddings are lookups, not matmuls);
    attention's own score/value products are excluded (they grow with length, reported apart)."""
    emb = model.get_input_embeddings()
    n_emb = emb.weight.numel() if emb is not None else 0
    return 2.0 * (sum(p.numel() for p in model.parameters()) - n_emb)


def rating_set_texts(rs: Any) -> list[str]:
    return [m["content"] for p in rs.prompts for m in p.messages] + [r.text for p in rs.prompts for r in p.responses]


def reward_checkpoint(model: str, out: Path, seed: int = 0) -> str:
    """A reward model on disk for the scoring benchmarks: ``model`` (a base encoder or causal LM)
    with a score head drawn with ``seed``, saved as ``rmtrain train`` saves one (evaluation refuses
    a checkpoint without a trained head)."""
    import torch

    from rmcore.models.modeling import load_reward_model

    torch.manual_seed(seed)
    rm, tok = load_reward_model(model, for_training=True)
    rm.save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)
