"""Tiny models built locally (nothing is downloaded), for CPU demos, tests and benchmarks.

A tokenizer trained here on the given texts -- byte-level BPE, or words split on whitespace -- with
the special tokens it is given, in that order (so their ids are fixed: the first is 0), and
optionally a minimal chat template whose turns end in EOS. A randomly initialised model of any
transformers architecture (``llama``, ``qwen2``, ``qwen3``, ``gpt2``, ``roberta``...) as a causal LM
or a sequence classifier, built from a config after ``torch.manual_seed(seed)``: the same call gives
the same weights. Decoders default to the smallest useful shape (hidden 32, 2 layers, 2 heads).

The config takes the tokenizer's special-token ids (pad, bos, eos where the tokenizer has them)
because they change the model, not only its metadata: the embedding row of the pad id is zeroed at
initialisation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

EOS = "<|endoftext|>"
PAD = "<|pad|>"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}" + EOS + "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# the decoder shape every tiny model starts from; a caller's config overrides any of it
DECODER_SHAPE = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                 "num_key_value_heads": 2}
SHAPES = {"llama": DECODER_SHAPE, "qwen2": DECODER_SHAPE, "qwen3": DECODER_SHAPE}
TOKEN_ROLES = ("pad", "bos", "eos")


def train_tokenizer(texts: list[str], vocab_size: int | None = None, *, word_level: bool = False,
                    chat_template: str | None = None, **special_tokens: str) -> Any:
    """A fast tokenizer trained on ``texts``. ``special_tokens`` name the roles (``eos_token=``,
    ``pad_token=``, ``unk_token=``, ``bos_token=``) in the order their ids are given (default: an EOS
    ``<|endoftext|>`` only). Byte-level BPE, or with ``word_level`` whole words split on whitespace
    (unknown words map to ``unk_token``, which it then needs). ``vocab_size`` None: the trainer's.
    The trainer's progress is off: it writes blank lines to stdout when stdout is no terminal."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special_tokens = special_tokens or {"eos_token": EOS}
    specials = list(special_tokens.values())
    size = {} if vocab_size is None else {"vocab_size": vocab_size}
    unk = special_tokens.get("unk_token")
    if word_level:
        tk = Tokenizer(models.WordLevel(unk_token=unk))
        tk.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.WordLevelTrainer(special_tokens=specials, show_progress=False, **size)
    else:
        tk = Tokenizer(models.BPE(unk_token=unk) if unk else models.BPE())
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tk.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False, **size)
    tk.train_from_iterator(texts, trainer)  # (no progress: on a pipe it prints runs of blank lines)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, **special_tokens)
    if chat_template is not None:
        tok.chat_template = chat_template
    return tok


def tiny_model(tokenizer: Any | None = None, arch: str = "llama", *, head: str = "causal_lm", seed: int = 0,
               token_ids: tuple[str, ...] = TOKEN_ROLES, **config: Any) -> Any:
    """A randomly initialised ``arch`` model (a transformers model type) with a ``causal_lm`` or
    ``classifier`` (sequence classification) head. Its vocabulary is the tokenizer's, and the ids of
    the ``token_ids`` roles the tokenizer has go into the config; ``config`` sets or overrides any
    config field (shape, ``num_labels``, ``max_position_embeddings``...)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    fields: dict[str, Any] = dict(SHAPES.get(arch, {}))
    if tokenizer is not None:
        fields["vocab_size"] = len(tokenizer)
        fields.update({f"{r}_token_id": getattr(tokenizer, f"{r}_token_id") for r in token_ids
                       if getattr(tokenizer, f"{r}_token", None) is not None})
    cfg = AutoConfig.for_model(arch, **{**fields, **config})
    heads = {"causal_lm": AutoModelForCausalLM, "classifier": AutoModelForSequenceClassification}
    if head not in heads:
        raise ValueError(f"unknown head '{head}' ({' or '.join(heads)})")
    torch.manual_seed(seed)
    return heads[head].from_config(cfg)


def save_tiny(path: str | os.PathLike, model: Any, tokenizer: Any | None = None) -> Path:
    """``model`` (and ``tokenizer``) saved under ``path``, loadable by ``from_pretrained``."""
    path = Path(path)
    model.save_pretrained(path)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    return path


def tiny_causal_lm(path: str | os.PathLike, texts: list[str], arch: str = "qwen2", *, vocab_size: int = 400,
                   pad_token: str | None = None, chat_template: bool = True, seed: int = 0, **config: Any) -> Path:
    """A tiny causal LM and its byte-level BPE tokenizer trained on ``texts`` (EOS, then ``pad_token``
    when given; the minimal chat template unless ``chat_template`` is False), saved under ``path``.
    256 positions and tied embeddings unless ``config`` says otherwise."""
    roles = {"eos_token": EOS, **({"pad_token": pad_token} if pad_token else {})}
    tok = train_tokenizer(texts, vocab_size, chat_template=CHAT_TEMPLATE if chat_template else None, **roles)
    model = tiny_model(tok, arch, seed=seed, **{"max_position_embeddings": 256, "tie_word_embeddings": True, **config})
    return save_tiny(path, model, tok)


def lora_with_effect(model: Any, r: int = 4, seed: int = 1) -> Any:
    """LoRA adapters (``rmcore.models.modeling.apply_lora``) whose B matrices are random: they start at
    zero, and a comparison of gradients needs adapters that change the output."""
    import torch

    # torch: this module loads without it
    from rmcore.models.modeling import LoraSettings, apply_lora

    model = apply_lora(model, LoraSettings(r=r, dropout=0.0))
    torch.manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    return model
