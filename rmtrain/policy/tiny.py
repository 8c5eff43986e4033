"""A tiny causal LM built locally (no download) for CPU demos and tests of policy training.

Qwen2 architecture (hidden 32, 2 layers) with a byte-level BPE tokenizer trained on the given
texts, an EOS and a dedicated pad token, and a minimal chat template whose turns end in EOS. The
embeddings are initialised wider than transformers' default (``initializer_range``): with the
default 0.02 every logit is ~0, the policy is uniform over the vocabulary, and no LoRA update of
the hidden states can make it prefer anything."""

from __future__ import annotations

import os
from pathlib import Path

EOS = "<|endoftext|>"
PAD = "<|pad|>"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}" + EOS + "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_tokenizer(texts: list[str], vocab_size: int = 300, chat_template: bool = True):  # noqa: ANN201
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS, PAD],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOS, pad_token=PAD)
    if chat_template:
        tok.chat_template = CHAT_TEMPLATE
    return tok


def build_tiny_causal_lm(texts: list[str], out: str | os.PathLike, *, seed: int = 0, initializer_range: float = 0.5,
                         vocab_size: int = 300, chat_template: bool = True) -> Path:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = build_tokenizer(texts, vocab_size, chat_template)
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True,
                      initializer_range=initializer_range)
    out = Path(out)
    Qwen2ForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def main() -> None:
    """``python -m rmtrain.policy.tiny OUT``: the demo's policy, tokenizer trained on the simulated set."""
    import sys

    from rmcore.data.registry import load_rating_set

    rs = load_rating_set({"name": "simulated", "n_prompts": 400, "responses_per_prompt": 4, "seed": 0})
    texts = [m["content"] for p in rs.prompts for m in p.messages] + [r.text for p in rs.prompts for r in p.responses]
    print(build_tiny_causal_lm(texts, sys.argv[1] if len(sys.argv) > 1 else "outputs/demo/tiny_policy"))


if __name__ == "__main__":
    main()
