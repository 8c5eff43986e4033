"""Pairwise verdict of a generative judge: the probability that response A is the better one.

Wraps a ``GenerativeJudgeScorer`` (its model, tokenizer, chat-template handling and left-padded
next-token logits) with a comparison prompt (``PAIRWISE_TEMPLATE``) ending in "Verdict:". The score
of an item ``(messages, (response_a, response_b))`` is softmax over the verdict tokens "A" and "B"
(every single-token spelling, bare or after a space), taken at "A": p(A better). The suitability
confidence of a (chosen, rejected) pair averages the two presentation orders,
M = ½·[p_A(chosen, rejected) + 1 − p_A(rejected, chosen)], which cancels a judge's position bias.

When the prompt is too long the conversation is cut from the left, then both responses from the
right by the same number of tokens; cuts are counted like every other scorer's.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch

from rmcore.data.schema import Message
from rmeval.scoring.base import Scorer, fingerprint_of
from rmeval.scoring.judge import (
    GenerativeJudgeScorer,
    as_user_turn,
    conversation_text,
    digit_token_ids,
    fit_judge_prompt,
)

PAIRWISE_TEMPLATE = (
    "You are an impartial judge. Compare the two assistant responses to the conversation below and "
    "decide which one is better: more helpful, correct and clear.\n\n"
    "[Conversation]\n{conversation}\n\n[Response A]\n{a}\n\n[Response B]\n{b}\n\n"
    "Answer with a single letter, A or B.\nVerdict:"
)
VERDICTS = ("A", "B")

PairItem = tuple[list[Message], tuple[str, str]]


class PairwiseJudgeScorer(Scorer):
    kind = "pairwise_judge"

    def __init__(self, judge: GenerativeJudgeScorer, template: str = PAIRWISE_TEMPLATE) -> None:
        super().__init__()
        self.judge, self.template = judge, template
        self.tokenizer = judge.tokenizer
        self.verdict_ids = digit_token_ids(self.tokenizer, VERDICTS)

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.kind, {"judge": self.judge.fingerprint, "template": self.template})

    def render(self, item: Any) -> str:
        messages, (a, b) = item
        return json.dumps([[{"role": m["role"], "content": m["content"]} for m in messages], a, b],
                          ensure_ascii=False, separators=(",", ":"))

    def _render(self, conv: str, responses: list[str]) -> str:
        a, b = responses
        return as_user_turn(self.tokenizer, self.template.format(conversation=conv, a=a, b=b))

    def encode(self, messages: list[Message], a: str, b: str) -> tuple[list[int], bool, bool]:
        """Token ids of the pairwise prompt; conversation cut from the left, then both answers from the right."""
        return fit_judge_prompt(self.tokenizer, self.judge.max_length, self.judge._ids, self._render,
                                conversation_text(messages), [a, b])

    def score(self, items: list[Any]) -> np.ndarray:
        """p(A is better) per (messages, (a, b))."""
        if not items:
            return np.zeros(0)
        enc = [self.encode(list(m), a, b) for m, (a, b) in items]
        logits = self.judge.next_token_logits([e[0] for e in enc])
        self._record_flags(np.array([[e[1], e[2]] for e in enc], dtype=bool))
        per = torch.stack([torch.logsumexp(logits[:, ids].float(), dim=-1) for ids in self.verdict_ids], dim=-1)
        return torch.softmax(per, dim=-1)[:, 0].double().numpy()

    def close(self) -> None:
        self.judge.close()
