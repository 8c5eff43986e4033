"""The ``lm_logit`` loader (Llama-3.1-Nemotron-70B-Reward's shape): a causal LM whose reward is the
logit of one token after the conversation, checked against the LM's own next-token logits; it is
chosen by name (the known model or --loader), never from a causal LM's config."""

from __future__ import annotations

import pytest
import torch

from rmcore.models.formatting import encode_example
from rmcore.models.tiny import CHAT_TEMPLATE, EOS, PAD, save_tiny, tiny_model, train_tokenizer
from rmeval.scoring.loaders import choose_loader, known_model, load_reward

TEXTS = ["how do I boil an egg", "put it in water for nine minutes", "no idea", "Paris is the capital of France."] * 3


@pytest.mark.parametrize("token", [None, "5"])
def test_the_reward_is_one_tokens_logit_after_the_conversation(tmp_path, token):
    tok = train_tokenizer(TEXTS, 300, chat_template=CHAT_TEMPLATE, eos_token=EOS, pad_token=PAD)
    lm = tiny_model(tok, "llama", max_position_embeddings=128).eval()
    save_tiny(tmp_path / "lm", lm, tok)
    rm = load_reward(tmp_path / "lm", loader="lm_logit", reward_head=token)
    k = 0 if token is None else int(token)
    msgs = [{"role": "user", "content": "how do I boil an egg"}]
    ids = encode_example(rm.tokenizer, msgs, "put it in water for nine minutes", 64).input_ids
    with torch.no_grad():
        got = rm.read(rm.model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long)))
        ref = lm(input_ids=torch.tensor([ids])).logits[0, -1, k]
    assert float(got[0]) == pytest.approx(float(ref), abs=1e-5)
    assert rm.loader == "lm_logit" and rm.prefix_head is None


def test_it_is_named_never_matched(tmp_path):
    assert known_model("nvidia/Llama-3.1-Nemotron-70B-Reward-HF").loader == "lm_logit"
    with pytest.raises(Exception, match="not a reward model"):
        choose_loader(str(tmp_path), {"architectures": ["LlamaForCausalLM"]})
