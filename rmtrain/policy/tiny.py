"""The policy demo's tiny causal LM, built locally (no download) by ``rmcore.models.tiny``:
``python -m rmtrain.policy.tiny OUT``.

Qwen2 architecture (hidden 32, 2 layers, 1024 positions) with a byte-level BPE tokenizer trained
on the given texts, an EOS and a dedicated pad token, and the minimal chat template whose turns
end in EOS. The embeddings are initialised wider than transformers' default
(``initializer_range``): with the default 0.02 every logit is ~0, the policy is uniform over the
vocabulary, and no LoRA update of the hidden states can make it prefer anything."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rmcore.console.quiet import quiet_libraries
from rmcore.data.loading import load_rating_set
from rmcore.models.tiny import PAD, tiny_causal_lm
from rmcore.settings.fields import Parser, add_options, from_args, option

DEFAULT_OUT = "outputs/demo/tiny_policy"


@dataclass
class TinyPolicyCommand:
    """``python -m rmtrain.policy.tiny``'s settings."""

    out: str = option(DEFAULT_OUT, positional=True, nargs="?", help=f"output directory (default {DEFAULT_OUT})")


def build_tiny_policy(texts: list[str], out: str | os.PathLike, *, seed: int = 0, initializer_range: float = 0.5,
                      vocab_size: int = 300, chat_template: bool = True) -> Path:
    """The demo policy and its tokenizer trained on ``texts``, saved under ``out``."""
    return tiny_causal_lm(out, texts, "qwen2", vocab_size=vocab_size, pad_token=PAD, chat_template=chat_template,
                          seed=seed, max_position_embeddings=1024, initializer_range=initializer_range)


def main(argv: list[str] | None = None) -> None:
    """The demo's policy, its tokenizer trained on the simulated set."""
    ap = Parser(prog="python -m rmtrain.policy.tiny", description=main.__doc__)
    add_options(ap, TinyPolicyCommand)
    args = from_args(TinyPolicyCommand, ap.parse_args(argv))
    quiet_libraries()  # stdout: the model's path alone (DeepSpeed logs to stdout when transformers imports it)

    rs = load_rating_set({"name": "simulated", "n_prompts": 400, "responses_per_prompt": 4, "seed": 0})
    texts = [m["content"] for p in rs.prompts for m in p.messages] + [r.text for p in rs.prompts for r in p.responses]
    print(build_tiny_policy(texts, args.out))


if __name__ == "__main__":
    main()
