"""Generative judge: a causal LM asked to rate the response from 1 to 5.

The score is the *expected* rating ``sum_d d * p(d)``, where ``p`` is the softmax of the
next-token logits restricted to the digit tokens "1".."5" -- a continuous score that does not
throw away the judge's uncertainty, as reading off the argmax digit would. Tokenizers that encode
a digit after "Rating:" with a leading space (" 3", "Ġ3", "▁3") are handled: every single-token
spelling of a digit is collected and its probabilities summed (log-sum-exp of the logits).

Judge prompt (``JUDGE_TEMPLATE``): the conversation in plain layout (``User: ...``), the response,
and an instruction to answer with one digit. With a chat template the text is the user turn and
the generation prompt is added; without one the text ends with ``Rating:``. When it is too long,
the conversation is cut from the left (then the response from the right); cuts are counted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rmcore import prefix_scoring as prefix
from rmcore.data.schema import Message
from rmcore.device import Placement, describe
from rmcore.formatting import ROLE_NAMES
from rmcore.modeling import resolve_max_length
from rmeval.judging.local import LocalBackend, single_token_ids
from rmeval.scoring.base import ScoreItem, Scorer, fingerprint_of, model_identity

JUDGE_TEMPLATE = (
    "You are an impartial judge. Rate how good the assistant's response is as a reply to the "
    "conversation below: helpful, correct and clear. Use a scale from 1 (very poor) to 5 (excellent).\n\n"
    "[Conversation]\n{conversation}\n\n[Response]\n{response}\n\n"
    "Answer with a single digit from 1 to 5.\nRating:"
)
DIGITS = ("1", "2", "3", "4", "5")


def conversation_text(messages: list[Message]) -> str:
    return "\n\n".join(f"{ROLE_NAMES.get(m['role'], m['role'].title())}: {m['content']}" for m in messages)


def digit_token_ids(tokenizer: Any, labels: tuple[str, ...] = DIGITS) -> list[list[int]]:
    """For each digit 1..5 (or each of ``labels``, e.g. verdicts "A", "B") the ids of every
    single-token spelling of it (bare or after a space)."""
    out: list[list[int]] = []
    for d in labels:
        ids = single_token_ids(tokenizer, d)
        if not ids:
            raise ValueError(f"tokenizer {getattr(tokenizer, 'name_or_path', '?')} has no single token for '{d}'")
        out.append(ids)
    seen = [i for ids in out for i in ids]
    if len(seen) != len(set(seen)):
        raise ValueError(f"tokens of {labels} overlap")
    return out


def expected_rating(next_logits: torch.Tensor, digit_ids: list[list[int]]) -> torch.Tensor:
    """(B, V) next-token logits -> (B,) expected rating over digits 1..5."""
    per_digit = torch.stack([torch.logsumexp(next_logits[:, ids].float(), dim=-1) for ids in digit_ids], dim=-1)
    p = torch.softmax(per_digit, dim=-1)
    return p @ torch.arange(1, len(digit_ids) + 1, dtype=p.dtype, device=p.device)


def fit_judge_prompt(tokenizer: Any, max_length: int, ids_of: Callable[[str], list[int]],
                     render: Callable[[str, list[str]], str], conv: str,
                     responses: list[str]) -> tuple[list[int], bool, bool]:
    """Token ids of ``render(conv, responses)`` within ``max_length``: the conversation is cut from
    the left, then each response from the right. Returns (ids, prompt cut, responses cut)."""
    ids = ids_of(render(conv, responses))
    p_cut = r_cut = False
    for _ in range(8):  # re-tokenising after a cut can shift a boundary token: iterate
        excess = len(ids) - max_length
        if excess <= 0:
            break
        conv_ids = tokenizer(conv, add_special_tokens=False)["input_ids"]
        if conv_ids:
            p_cut = True
            conv = tokenizer.decode(conv_ids[excess + 1:]) if excess + 1 < len(conv_ids) else ""
        else:
            r_cut = True
            n = excess // len(responses) + 1  # shared between the responses
            cut = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in responses]
            responses = [tokenizer.decode(r[: max(len(r) - n, 0)]) for r in cut]
        ids = ids_of(render(conv, responses))
    return ids[-max_length:], p_cut, r_cut


class GenerativeJudgeScorer(Scorer):
    kind = "generative_judge"

    def __init__(self, model: str | os.PathLike | Any, *, tokenizer: Any | None = None, max_length: int | None = None,
                 batch_size: int = 8, max_tokens: int | None = None, device: str | None = None, dtype: str | None = None,
                 template: str = JUDGE_TEMPLATE, trust_remote_code: bool = False, shared_prompt: bool = True,
                 placement: Placement | None = None) -> None:
        """``shared_prompt``: a conversation's judge prefix is encoded once for all its responses
        (rmcore.prefix_scoring); same scores. ``placement`` (else ``device``/``dtype``, ``auto``
        when None): where a model loaded from a path runs (rmcore.device)."""
        super().__init__()
        # the local judge backend (rmeval.judging.local): model loading, tokenisation, batched logits
        self.backend = LocalBackend(model, tokenizer=tokenizer, batch_size=batch_size, max_tokens=max_tokens,
                                    device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                                    placement=placement)
        self.model, self.tokenizer, self.model_id = self.backend.model, self.backend.tokenizer, self.backend.model_id
        self.device, self.pad_id = self.backend.device, self.backend.pad_id
        # None: the model's own limit; a longer prompt would overrun the position embeddings
        self.max_length = resolve_max_length(max_length, self.model, self.tokenizer)
        self.batch_size, self.max_tokens, self.template = batch_size, max_tokens, template
        self.dtype = self.backend.dtype  # the dtype it runs in: "float32" for auto on the CPU
        self.shared_prompt = shared_prompt
        self.digit_ids = digit_token_ids(self.tokenizer)

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.kind, {"model": model_identity(self.model_id), "max_length": self.max_length,
                                          "template": self.template, "dtype": self.dtype})

    def describe(self) -> dict[str, Any]:
        return describe(self.model) if self.model is not None else {}

    def judge_text(self, messages: list[Message], response: str) -> str:
        return self._render(conversation_text(messages), [response])

    def _render(self, conv: str, responses: list[str]) -> str:
        return self.backend.user_turn(self.template.format(conversation=conv, response=responses[0]))

    def encode(self, messages: list[Message], response: str) -> tuple[list[int], bool, bool]:
        """Token ids of the judge prompt; conversation cut from the left, then response from the right."""
        return fit_judge_prompt(self.tokenizer, self.max_length, self.backend.ids, self._render,
                                conversation_text(messages), [response])

    def next_token_logits(self, seqs: list[list[int]]) -> torch.Tensor:
        return self.backend.next_token_logits(seqs)

    def score(self, items: list[ScoreItem]) -> np.ndarray:
        if not items:
            return np.zeros(0)
        enc = [self.encode(list(m), r) for m, r in items]
        seqs = [e[0] for e in enc]
        if self.shared_prompt:
            logits = prefix.next_token_logits(self.model, seqs, [prefix.conversation_key(m) for m, _ in items],
                                              batch_size=self.batch_size, pad_id=self.pad_id, device=self.device,
                                              plain=self.next_token_logits)
        else:
            logits = self.next_token_logits(seqs)
        self._record_flags(np.array([[e[1], e[2]] for e in enc], dtype=bool))
        return expected_rating(logits, self.digit_ids).double().numpy()

    def close(self) -> None:
        self.backend.close()
        self.model = None
