"""Implicit reward of a DPO policy: ``beta * (log pi(y|x) - log pi_ref(y|x))``; without a reference
model (``reference=None``, ``--reference none``) pi_ref = 1 and the reward is ``beta * log pi(y|x)``,
as Reward Auditor scores a DPO model whose reference is not available (appendix A.1.2). The
partition function Z(x) depends on the prompt only, so either reward compares responses to the same
prompt; without the reference a longer response loses log-probability for its length alone.

``log pi(y|x)`` is the sum of the log-probabilities of the *response* tokens only; prompt tokens
are context, masked out of the sum (as in DPO training). Text layout: the chat template where the
tokenizer has one (the response is the assistant turn including its end-of-turn tokens, as TRL
trains it); otherwise the plain layout ``User: ...\\n\\nAssistant: <response>`` of
``rmcore.models.formatting``. A long prompt is cut from the left so the response keeps its context.
Policy and reference must share a tokenizer (the policy's is used for both).
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from typing import Any

import numpy as np
import torch

from rmcore.data.schema import Message
from rmcore.errors import ConfigError
from rmcore.io.files import check_path
from rmcore.models import prefix_scoring as prefix
from rmcore.models.batching import length_sorted_batches
from rmcore.models.device import Placement, describe, dtype_name, input_device
from rmcore.models.formatting import plain_prompt, split_chat
from rmcore.models.modeling import load_causal_lm, load_tokenizer, model_max_length, resolve_max_length
from rmeval.scoring.base import ScoreItem, Scorer, fingerprint_of, model_identity

NO_REFERENCE = "none"  # --reference none: pi_ref = 1


def _load_causal(model: str | os.PathLike | Any, placement: Placement) -> tuple[Any, str]:
    if isinstance(model, (str, os.PathLike)):
        return load_causal_lm(model, placement)[0], str(model)
    return model, getattr(model.config, "_name_or_path", "") or "<in-memory>"


class DPOImplicitScorer(Scorer):
    kind = "dpo_implicit"
    reads = frozenset({"reference", "beta"})

    def __init__(self, policy: str | os.PathLike | Any, reference: str | os.PathLike | Any | None, *, beta: float = 0.1,
                 tokenizer: Any | None = None, max_length: int | None = None, batch_size: int = 8,
                 max_tokens: int | None = None, device: str | None = None, dtype: str | None = None,
                 trust_remote_code: bool = False, shared_prompt: bool = True,
                 placement: Placement | None = None) -> None:
        """``shared_prompt``: each prompt is encoded once for all its responses (rmcore.models.prefix_scoring).
        ``placement`` (else ``device``/``dtype``, ``auto`` when None): where models loaded from
        paths run (rmcore.models.device); in-memory models are moved only when ``device`` is given."""
        super().__init__()
        self.shared_prompt = shared_prompt
        load_as = placement or Placement(device=device or "auto", dtype=dtype or "auto",
                                         trust_remote_code=trust_remote_code)
        self.policy, self.policy_id = _load_causal(policy, load_as)
        if reference is None or (isinstance(reference, str) and reference.lower() == NO_REFERENCE):
            self.reference, self.reference_id = None, NO_REFERENCE  # pi_ref = 1
        elif isinstance(reference, (str, os.PathLike)) and str(reference) == self.policy_id:
            self.reference, self.reference_id = self.policy, self.policy_id  # one copy is enough
        else:
            self.reference, self.reference_id = _load_causal(reference, load_as)
        if tokenizer is None:
            if not isinstance(policy, (str, os.PathLike)):
                raise ValueError("an in-memory policy needs its tokenizer")
            tokenizer = load_tokenizer(self.policy_id, trust_remote_code)
        self.tokenizer = tokenizer
        if self.reference is not None and (self.policy.get_input_embeddings().num_embeddings
                                           != self.reference.get_input_embeddings().num_embeddings):
            raise ValueError("policy and reference have different vocabularies; they must share a tokenizer")
        for m in (self.policy, self.reference) if self.reference is not None else (self.policy,):
            if device is not None:
                m.to(device)
            m.eval()
        self.device = input_device(self.policy)
        # None: the shorter of the two models' limits (both read the same ids)
        self.max_length = resolve_max_length(max_length, self.policy, tokenizer)
        ref_limit = model_max_length(self.reference) if self.reference is not None else None
        if ref_limit is not None:
            self.max_length = min(self.max_length, ref_limit)
        self.beta, self.batch_size, self.max_tokens = beta, batch_size, max_tokens
        self.dtype = dtype_name(next(self.policy.parameters()).dtype)  # "float32" for auto on the CPU
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    @property
    def fingerprint(self) -> str:
        ref = NO_REFERENCE if self.reference is None else model_identity(self.reference_id)
        return fingerprint_of(self.kind, {"policy": model_identity(self.policy_id), "reference": ref, "beta": self.beta,
                                          "max_length": self.max_length, "dtype": self.dtype})

    def describe(self) -> dict[str, Any]:
        return describe(self.policy) if self.policy is not None else {}

    @classmethod
    def from_settings(cls, settings: Any, **common: Any) -> DPOImplicitScorer:
        if not settings.reference:
            raise ConfigError("--scorer dpo_implicit needs --reference (the DPO reference model, or 'none' for "
                              "pi_ref = 1)")
        if settings.reference.lower() != NO_REFERENCE:
            check_path(settings.reference, "--reference", kind="dir", hub_ok=True)
        return cls(policy=settings.model, reference=settings.reference, beta=settings.beta, **common)

    def input_keys(self, items: list[Any]) -> list[Hashable]:
        """The prompt and response token ids it reads of each item."""
        return [tuple(map(tuple, self.split(list(m), r)[:2])) for m, r in items]

    def split(self, messages: list[Message], response: str) -> tuple[list[int], list[int], bool, bool]:
        """(prompt ids, response ids, prompt truncated, response truncated)."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            p_text, r_text = split_chat(tok, messages, response)
            p_ids = tok(p_text, add_special_tokens=False)["input_ids"]
        else:
            p_text, r_text = plain_prompt(messages), " " + response
            p_ids = tok(p_text, add_special_tokens=False)["input_ids"]
            if tok.bos_token_id is not None and tok.num_special_tokens_to_add() > 0:
                p_ids = [tok.bos_token_id] + p_ids
        r_ids = tok(r_text, add_special_tokens=False)["input_ids"]
        r_cut = len(r_ids) > self.max_length - 1
        r_ids = r_ids[: self.max_length - 1]  # at least one context token predicts the first response token
        keep = self.max_length - len(r_ids)
        p_cut = len(p_ids) > keep
        return p_ids[len(p_ids) - keep:] if p_cut else p_ids, r_ids, p_cut, r_cut

    @torch.inference_mode()
    def response_logprobs(self, model: Any, pairs: list[tuple[list[int], list[int]]]) -> np.ndarray:
        """Sum of log p(response token | everything before it), per (prompt ids, response ids)."""
        out = np.zeros(len(pairs))
        seqs = [p + r for p, r in pairs]
        for idx in length_sorted_batches([len(s) for s in seqs], self.batch_size, self.max_tokens):
            width = max(len(seqs[i]) for i in idx)
            # right padding: causal attention never lets a real token see a pad to its right
            ids = torch.full((len(idx), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            resp = torch.zeros((len(idx), width), dtype=torch.bool)
            for row, i in enumerate(idx):
                n_p, n = len(pairs[i][0]), len(seqs[i])
                ids[row, :n] = torch.tensor(seqs[i])
                mask[row, :n] = 1
                resp[row, n_p:n] = True
            logits = model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits.float()
            logp = torch.log_softmax(logits[:, :-1], dim=-1)
            tok_logp = logp.gather(-1, ids[:, 1:, None].to(logp.device)).squeeze(-1)
            # float64 sum: long responses add hundreds of terms (and the shared path sums in another order)
            summed = (tok_logp.double() * resp[:, 1:].to(logp.device)).sum(-1)
            out[idx] = summed.double().cpu().numpy()
        return out

    def score(self, items: list[ScoreItem]) -> np.ndarray:
        if not items:
            return np.zeros(0)
        enc = [self.split(list(m), r) for m, r in items]
        pairs = [(e[0], e[1]) for e in enc]
        logprobs = self.response_logprobs
        if self.shared_prompt:
            keys = [prefix.conversation_key(m) for m, _ in items]

            def logprobs(model: Any, pairs: list[tuple[list[int], list[int]]]) -> np.ndarray:
                return prefix.response_logprobs(model, pairs, keys, batch_size=self.batch_size, pad_id=self.pad_id,
                                                device=self.device,
                                                plain=lambda sub: self.response_logprobs(model, sub))
        pol = logprobs(self.policy, pairs)
        if self.reference is None:  # pi_ref = 1: log pi_ref = 0
            ref = np.zeros_like(pol)
        else:
            ref = pol if self.reference is self.policy else logprobs(self.reference, pairs)
        self._record_flags(np.array([[e[2], e[3]] for e in enc], dtype=bool))
        return self.beta * (pol - ref)

    def close(self) -> None:
        self.policy = self.reference = None
