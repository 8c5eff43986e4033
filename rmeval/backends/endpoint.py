"""A pairwise judge behind an OpenAI-compatible chat endpoint (OpenAI, vLLM, TGI, llama.cpp...).

Each item's prompt (``Question.text``) is sent as one user message through the ``openai`` client,
which retries 408/409/429/5xx answers and connection errors with exponential backoff. Greedy
(temperature 0, and ``seed`` when given), at most ``max_tokens`` tokens, ``concurrency`` requests
at a time; answers come back in input order. The question parses each reply into the letter it
names: that letter scores 0 and the others −inf, a tie scores 0 for every letter, and a reply
naming none is a row of NaN -- counted in ``n_malformed``, never read as a direction.

A judge that reasons before it answers (``reasoning=True``: DeepSeek-R1, with ``max_tokens`` the
budget of its reasoning and answer) is read at its answer (``reasoning_answer``): a server with a
reasoning parser (vLLM's ``--reasoning-parser deepseek_r1``) returns the reasoning in its own field
(``reasoning``; ``reasoning_content`` in vLLM before 0.11) and the answer as ``content``; without
one, the reply is ``<think>...</think>`` then the answer (the opening tag may be the chat
template's, not the reply's), read after the last ``</think>``. A reply whose reasoning the budget
cut off is no answer (None). ``n_generated`` counts the tokens generated (the server's
``usage.completion_tokens``): what a reasoning judge's GPU hours are mostly made of.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from rmeval.backends import JudgeBackend, Question, named_scores
from rmeval.backends.generators import openai_client

THINK_START, THINK_END = "<think>", "</think>"


def reasoning_answer(content: str | None, *, separated: bool, cut: bool) -> str | None:
    """The answer of a reasoning judge's reply: ``content`` after the last ``</think>``; else
    ``content`` itself when the server separated the reasoning (``separated``) or the reply ended
    on its own; None when the reasoning never closed (an open ``<think>``, or a reply ``cut`` by
    the token budget with nothing separated: the chat template opened the reasoning)."""
    text = content or ""
    if THINK_END in text:
        return text.rsplit(THINK_END, 1)[1]
    if THINK_START in text or (cut and not separated):
        return None
    return text


class EndpointBackend(JudgeBackend):
    kind = "openai"

    def __init__(self, model: str, *, base_url: str, api_key_env: str = "OPENAI_API_KEY", max_tokens: int = 4,
                 timeout: float = 60.0, max_retries: int = 5, concurrency: int = 8, seed: int | None = None,
                 reasoning: bool = False) -> None:
        super().__init__()
        self.model, self.base_url, self.max_tokens, self.concurrency, self.seed = (model, base_url, max_tokens,
                                                                                   concurrency, seed)
        self.reasoning = reasoning
        self.client = openai_client(base_url, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries)
        self.n_malformed = self.n_generated = 0

    def identity(self, model_id: Callable[[str], str] = str) -> dict[str, Any]:
        reasoning = {"reasoning": True} if self.reasoning else {}  # (the key only then: old caches stay valid)
        return {"model": self.model, "base_url": self.base_url, "max_tokens": self.max_tokens, **reasoning}

    def reply(self, text: str) -> str | None:
        """The endpoint's answer to ``text`` as the user turn (None when the response has none; a
        reasoning judge's: the answer after its reasoning, ``reasoning_answer``)."""
        kw: dict[str, Any] = {"seed": self.seed} if self.seed is not None else {}
        resp = self.client.chat.completions.create(model=self.model, temperature=0.0, max_tokens=self.max_tokens,
                                                   messages=[{"role": "user", "content": text}], **kw)
        self.n_generated += int(getattr(getattr(resp, "usage", None), "completion_tokens", None) or 0)
        try:
            choice = resp.choices[0]
            content = choice.message.content
        except (AttributeError, IndexError, TypeError):
            return None
        if not self.reasoning:
            return content
        separated = any(getattr(choice.message, k, None) for k in ("reasoning", "reasoning_content"))
        return reasoning_answer(content, separated=separated, cut=choice.finish_reason == "length")

    def letter_scores(self, question: Question, items: Sequence[Any]) -> torch.Tensor:
        texts = [question.text(it) for it in items]
        with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
            named = [question.parse(r) for r in pool.map(self.reply, texts)]
        self.n_calls += len(items)
        rows = [named_scores(letter, question.letters) for letter in named]
        out = torch.tensor(rows, dtype=torch.float32).reshape(len(items), len(question.letters))
        self.n_malformed += int(out.isnan().all(dim=-1).sum())
        return out


def make_endpoint_judge(spec: Any, *, reply_tokens: int = 4, timeout: float = 60.0, max_retries: int = 5,
                        concurrency: int = 8, seed: int | None = None, reasoning: bool = False,
                        **_: Any) -> EndpointBackend:
    """The ``openai`` kind's judge (``rmeval.backends.spec``): ``spec.value`` the served model's name,
    at ``base_url`` (the key from ``api_key_env``); ``reply_tokens`` the reply's budget."""
    return EndpointBackend(spec.value, base_url=spec.need("base_url"),
                           api_key_env=spec.setting("api_key_env", "OPENAI_API_KEY"), max_tokens=reply_tokens,
                           timeout=timeout, max_retries=max_retries, concurrency=concurrency, seed=seed,
                           reasoning=reasoning)
