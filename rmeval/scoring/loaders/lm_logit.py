"""The ``lm_logit`` loader: a causal LM whose reward is the logit of one vocabulary token at the
position after the whole conversation, response included (Llama-3.1-Nemotron-70B-Reward-HF: its card
generates one token after the chat-formatted conversation and reads ``scores[0][0][0]``, the logit of
token id 0). That is a linear head on the last real token's hidden state, the row of the LM head for
that token, so the model is loaded as a backbone with that one row as its value head
(``rmeval.scoring.loaders.value_head.ValueHeadModel``); the rest of the LM head is dropped.
``--reward-head`` is the token id (default 0). Never chosen from a checkpoint's config (every causal
LM would match): named by ``--loader lm_logit`` or by a known model."""

from __future__ import annotations

from typing import Any

import torch

from rmcore.errors import ConfigError
from rmcore.models.device import Placement
from rmcore.models.modeling import ensure_pad_token, load_tokenizer
from rmeval.scoring.loaders import KnownModel, RewardModel, parse_head
from rmeval.scoring.loaders.value_head import ValueHeadModel


def matches(path: str, config: dict[str, Any]) -> bool:
    return False


def load(path: str, config: dict[str, Any], placement: Placement, reward_head: str | int | None, *,
         known: KnownModel | None = None) -> RewardModel:
    from transformers import AutoModelForCausalLM

    head = parse_head(reward_head)
    if head == "score":
        raise ConfigError(f"--reward-head score: {path} (lm_logit) reads one token's logit; give its token id")
    token = 0 if head is None else int(head)
    tok = load_tokenizer(path, placement.trust_remote_code)
    lm = AutoModelForCausalLM.from_pretrained(path, **placement.load_kwargs())
    out_emb = lm.get_output_embeddings()
    if not 0 <= token < out_emb.weight.shape[0]:
        raise ConfigError(f"--reward-head {token}: {path} has {out_emb.weight.shape[0]} tokens")
    row = torch.nn.Linear(out_emb.weight.shape[1], 1, bias=getattr(out_emb, "bias", None) is not None)
    with torch.no_grad():
        row.weight.copy_(out_emb.weight[token: token + 1])
        if row.bias is not None:
            row.bias.copy_(out_emb.bias[token: token + 1])
    row.to(device=out_emb.weight.device, dtype=out_emb.weight.dtype)
    model = ValueHeadModel(lm.get_decoder(), row)
    del lm
    ensure_pad_token(tok, model)
    placement.place(model)
    return RewardModel(model, tok, "lm_logit", lambda out: out.logits[:, 0], head=None if head is None else str(token),
                       prefix_head=None, extra={"token_id": token})
