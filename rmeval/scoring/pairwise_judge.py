"""Pairwise verdict of a generative judge: the probability that response A is the better one.

A ``Question`` of the pairwise-judge protocol (``rmeval.judging``) asked of the local backend of a
``GenerativeJudgeScorer`` (its model, tokenizer, chat-template handling and left-padded
next-token logits): a comparison prompt (``PAIRWISE_TEMPLATE``) ending in "Verdict:". The score of
an item ``(messages, (response_a, response_b))`` is softmax over the verdict tokens "A" and "B"
(every single-token spelling, bare or after a space), taken at "A": p(A better). The suitability
confidence of a (chosen, rejected) pair averages the two presentation orders,
M = ½·[p_A(chosen, rejected) + 1 − p_A(rejected, chosen)], which cancels a judge's position bias.

When the prompt is too long the conversation is cut from the left, then both responses from the
right by the same number of tokens; cuts are counted like every other scorer's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from rmcore.data.schema import Message
from rmeval.judging import Question, Tokens
from rmeval.scoring.base import Scorer, fingerprint_of
from rmeval.scoring.judge import GenerativeJudgeScorer, conversation_text, fit_judge_prompt

PAIRWISE_TEMPLATE = (
    "You are an impartial judge. Compare the two assistant responses to the conversation below and "
    "decide which one is better: more helpful, correct and clear.\n\n"
    "[Conversation]\n{conversation}\n\n[Response A]\n{a}\n\n[Response B]\n{b}\n\n"
    "Answer with a single letter, A or B.\nVerdict:"
)
VERDICTS = ("A", "B")

PairItem = tuple[list[Message], tuple[str, str]]


class PairwisePrompt(Question):
    """The comparison prompt as a question of the pairwise-judge protocol, fitted to the judge's
    ``max_length``; ``last_flags`` holds the truncation flags of the last encoded batch."""

    letters = VERDICTS

    def __init__(self, judge: GenerativeJudgeScorer, template: str = PAIRWISE_TEMPLATE) -> None:
        self.judge, self.template = judge, template
        self.last_flags = np.zeros((0, 2), dtype=bool)

    def text(self, item: PairItem) -> str:
        messages, (a, b) = item
        return self.template.format(conversation=conversation_text(list(messages)), a=a, b=b)

    def _render(self, conv: str, responses: list[str]) -> str:
        a, b = responses
        return self.judge.backend.user_turn(self.template.format(conversation=conv, a=a, b=b))

    def fit(self, messages: list[Message], a: str, b: str) -> tuple[list[int], bool, bool]:
        """Token ids of the pairwise prompt; conversation cut from the left, then both answers from the right."""
        return fit_judge_prompt(self.judge.tokenizer, self.judge.max_length, self.judge.backend.ids, self._render,
                                conversation_text(messages), [a, b])

    def encode(self, backend: Any, items: Sequence[PairItem]) -> list[Tokens]:
        enc = [self.fit(list(m), a, b) for m, (a, b) in items]
        self.last_flags = np.array([[e[1], e[2]] for e in enc], dtype=bool)
        return [Tokens(e[0]) for e in enc]


class PairwiseJudgeScorer(Scorer):
    kind = "pairwise_judge"

    def __init__(self, judge: GenerativeJudgeScorer, template: str = PAIRWISE_TEMPLATE) -> None:
        super().__init__()
        self.judge, self.template = judge, template
        self.prompt = PairwisePrompt(judge, template)
        self.tokenizer = judge.tokenizer
        self.verdict_ids = judge.backend.letter_ids(VERDICTS)

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.kind, {"judge": self.judge.fingerprint, "template": self.template})

    def render(self, item: Any) -> str:
        messages, (a, b) = item
        return json.dumps([[{"role": m["role"], "content": m["content"]} for m in messages], a, b],
                          ensure_ascii=False, separators=(",", ":"))

    def encode(self, messages: list[Message], a: str, b: str) -> tuple[list[int], bool, bool]:
        """Token ids of the pairwise prompt; conversation cut from the left, then both answers from the right."""
        return self.prompt.fit(messages, a, b)

    def score(self, items: list[Any]) -> np.ndarray:
        """p(A is better) per (messages, (a, b))."""
        if not items:
            return np.zeros(0)
        per = self.judge.backend.letter_scores(self.prompt, items)
        self._record_flags(self.prompt.last_flags)
        return torch.softmax(per, dim=-1)[:, 0].double().numpy()

    def close(self) -> None:
        self.judge.close()
