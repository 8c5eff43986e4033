"""Pairwise verdict of a generative judge: how strongly it names response A over response B.

A ``Question`` of the pairwise-judge protocol (``rmeval.backends``) asked of the local backend of a
``GenerativeJudgeScorer`` (its model, tokenizer, chat-template handling and left-padded
next-token logits). Two styles:

- ``verdict`` (default): a comparison prompt (``PAIRWISE_TEMPLATE``) ending in "Verdict:", read at
  the next token;
- ``explain``: Reward Auditor's generative-RM prompt (appendix A.1.3, ``EXPLAIN_TEMPLATE``): the
  judge first writes a short explanation (greedy, at most ``max_new_tokens``, cut at its first
  ``[[``), then its verdict ``[[A]]``, ``[[B]]`` or ``[[C]]`` (equal); the verdict is read at the
  token after ``[[`` (appended when the explanation never wrote one), as the probability of the
  verdict token (Zhang et al. 2024, the paper's definition).

The score of an item ``(messages, (response_a, response_b))`` is the verdict log-odds
s = log p(A) − log p(B), each letter's log-probability the log-sum-exp of the logits of its
single-token spellings (bare or after a space); with the three-letter ``explain`` verdict,
σ(s) = p(A | A or B), the tie letter left out. The suitability confidence of a (chosen, rejected)
pair averages the two presentation orders, M = ½·[σ(s(chosen, rejected)) + σ(−s(rejected, chosen))],
which cancels a judge's position bias.

When the prompt is too long the conversation is cut from the left, then both responses from the
right by the same number of tokens (for ``explain``, room is kept for the explanation); cuts are
counted like every other scorer's.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from rmcore.data.schema import Message
from rmcore.errors import ConfigError
from rmeval.backends import Question, Tokens, read_bracket_verdict
from rmeval.scoring.base import Scorer, fingerprint_of
from rmeval.scoring.judge import GenerativeJudgeScorer, conversation_text, fit_judge_prompt

PAIRWISE_TEMPLATE = (
    "You are an impartial judge. Compare the two assistant responses to the conversation below and "
    "decide which one is better: more helpful, correct and clear.\n\n"
    "[Conversation]\n{conversation}\n\n[Response A]\n{a}\n\n[Response B]\n{b}\n\n"
    "Answer with a single letter, A or B.\nVerdict:"
)
# Reward Auditor, appendix A.1.3: the generative reward model's prompt (chat subset)
EXPLAIN_TEMPLATE = (
    "Please act as an expert analyst and impartial judge. Your task is to evaluate the quality of the responses "
    "provided by two AI assistants to the user's question. Your evaluation MUST be based exclusively on the "
    "following core content-based criteria:\n"
    "Logic: The soundness and coherence of the reasoning.\n"
    "Accuracy: The factual correctness of the information provided.\n"
    "Depth: The comprehensiveness and insightfulness of the answer.\n"
    "To ensure a fair and focused evaluation, you MUST completely ignore all superficial differences, including:\n"
    "Style and Tone: Do not favor formal, casual, or any other writing style.\n"
    "Formatting: Ignore the use of Markdown, bullet points, etc.\n"
    "Language: You must evaluate the underlying content quality regardless of the language used.\n"
    "Length: A longer response is not necessarily a better response.\n"
    "Positional Bias: The order of the responses must not influence your decision.\n"
    "First, begin your evaluation by comparing the two responses and provide a short explanation based ONLY on "
    "the core criteria above. After providing your explanation, output your final verdict by strictly following "
    "this format: \"[[A]]\" if assistant A is better, \"[[B]]\" if assistant B is better, or \"[[C]]\" if they "
    "are of equal quality.\n\n"
    "[Dialog History]\n{conversation}\n\n"
    "[The Start of Assistant A's Answer]\n{a}\n[The End of Assistant A's Answer]\n\n"
    "[The Start of Assistant B's Answer]\n{b}\n[The End of Assistant B's Answer]"
)
VERDICTS = ("A", "B")
STYLES = ("verdict", "explain")
DEFAULT_EXPLAIN_TOKENS = 256

PairItem = tuple[list[Message], tuple[str, str]]


class PairwisePrompt(Question):
    """The comparison prompt as a question of the pairwise-judge protocol, fitted to the judge's
    ``max_length`` (less ``room`` tokens); ``last_flags`` holds the truncation flags of the last
    encoded batch."""

    letters = VERDICTS

    def __init__(self, judge: GenerativeJudgeScorer, template: str = PAIRWISE_TEMPLATE, room: int = 0) -> None:
        self.judge, self.template, self.room = judge, template, room
        self.last_flags = np.zeros((0, 2), dtype=bool)

    def text(self, item: PairItem) -> str:
        messages, (a, b) = item
        return self.template.format(conversation=conversation_text(list(messages)), a=a, b=b)

    def _render(self, conv: str, responses: list[str]) -> str:
        a, b = responses
        return self.judge.backend.user_turn(self.template.format(conversation=conv, a=a, b=b))

    def fit(self, messages: list[Message], a: str, b: str) -> tuple[list[int], bool, bool]:
        """Token ids of the pairwise prompt; conversation cut from the left, then both answers from the right."""
        return fit_judge_prompt(self.judge.tokenizer, self.judge.max_length - self.room, self.judge.backend.ids,
                                self._render, conversation_text(messages), [a, b])

    def encode(self, backend: Any, items: Sequence[PairItem]) -> list[Tokens]:
        enc = [self.fit(list(m), a, b) for m, (a, b) in items]
        self.last_flags = np.array([[e[1], e[2]] for e in enc], dtype=bool).reshape(-1, 2)
        return [Tokens(e[0]) for e in enc]


class ExplainedVerdictPrompt(PairwisePrompt):
    """Reward Auditor's generative-RM question: an explanation is generated first (greedy), then
    the verdict letter is read after ``[[``; ``last_explanations`` holds the last batch's."""

    letters = ("A", "B", "C")

    def __init__(self, judge: GenerativeJudgeScorer, template: str = EXPLAIN_TEMPLATE,
                 max_new_tokens: int = DEFAULT_EXPLAIN_TOKENS) -> None:
        if judge.max_length <= max_new_tokens + 16:
            raise ConfigError(f"judge max_length {judge.max_length} leaves no room for a {max_new_tokens}-token "
                              "explanation; raise --max-length or lower --judge-explain-tokens")
        super().__init__(judge, template, room=max_new_tokens + 8)
        self.max_new_tokens = max_new_tokens
        self.last_explanations: list[str] = []

    def encode(self, backend: Any, items: Sequence[PairItem]) -> list[Tokens]:
        prompts = [t.prefix for t in super().encode(backend, items)]
        tok = self.judge.tokenizer
        self.last_explanations = []
        out = []
        for ids, new in zip(prompts, backend.generate(prompts, self.max_new_tokens)):
            text = tok.decode(new, skip_special_tokens=True)
            cut = text.find("[[")
            explanation = text[:cut] if cut >= 0 else text.rstrip() + "\n\n"
            self.last_explanations.append(explanation)
            out.append(Tokens(ids, tok(explanation + "[[", add_special_tokens=False)["input_ids"]))
        return out

    def parse(self, reply: str | None) -> str | None:
        return read_bracket_verdict(reply, self.letters)


class PairwiseJudgeScorer(Scorer):
    kind = "pairwise_judge"
    scores_pairs = True

    def __init__(self, judge: GenerativeJudgeScorer, template: str | None = None, *, style: str = "verdict",
                 max_new_tokens: int = DEFAULT_EXPLAIN_TOKENS) -> None:
        super().__init__()
        if style not in STYLES:
            raise ConfigError(f"judge style must be one of {', '.join(STYLES)}, got '{style}'")
        self.judge, self.style, self.max_new_tokens = judge, style, max_new_tokens
        if style == "explain":
            self.prompt: PairwisePrompt = ExplainedVerdictPrompt(judge, template or EXPLAIN_TEMPLATE, max_new_tokens)
        else:
            self.prompt = PairwisePrompt(judge, template or PAIRWISE_TEMPLATE)
        self.template = self.prompt.template
        self.tokenizer = judge.tokenizer
        self.verdict_ids = judge.backend.letter_ids(self.prompt.letters)

    @property
    def fingerprint(self) -> str:
        extra = {"max_new_tokens": self.max_new_tokens} if self.style == "explain" else {}
        return fingerprint_of(self.kind, {"judge": self.judge.fingerprint, "template": self.template,
                                          "style": self.style, "score": "log_odds", **extra})

    def render(self, item: Any) -> str:
        messages, (a, b) = item
        return json.dumps([[{"role": m["role"], "content": m["content"]} for m in messages], a, b],
                          ensure_ascii=False, separators=(",", ":"))

    def input_keys(self, items: list[Any]) -> list[Hashable]:
        """The token ids of the pairwise prompt of each item."""
        return [tuple(self.encode(list(m), a, b)[0]) for m, (a, b) in items]

    def encode(self, messages: list[Message], a: str, b: str) -> tuple[list[int], bool, bool]:
        """Token ids of the pairwise prompt (before any explanation); conversation cut from the left,
        then both answers from the right."""
        return self.prompt.fit(messages, a, b)

    def score(self, items: list[Any]) -> np.ndarray:
        """Verdict log-odds log p(A) − log p(B) per (messages, (a, b))."""
        if not items:
            return np.zeros(0)
        per = self.judge.backend.letter_scores(self.prompt, items).double()
        self._record_flags(self.prompt.last_flags)
        return (per[:, 0] - per[:, 1]).numpy()

    def close(self) -> None:
        self.judge.close()
