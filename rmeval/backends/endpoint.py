"""A pairwise judge behind an OpenAI-compatible chat endpoint (OpenAI, vLLM, TGI, llama.cpp...).

Each item's prompt (``Question.text``) is sent as one user message through the ``openai`` client,
which retries 408/409/429/5xx answers and connection errors with exponential backoff. Greedy
(temperature 0, and ``seed`` when given), at most ``max_tokens`` tokens, ``concurrency`` requests
at a time; answers come back in input order. The question parses each reply into the letter it
names: that letter scores 0 and the others −inf, a tie scores 0 for every letter, and a reply
naming none is a row of NaN -- counted in ``n_malformed``, never read as a direction.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from rmeval.backends import JudgeBackend, Question, named_scores
from rmeval.backends.generators import openai_client


class EndpointBackend(JudgeBackend):
    kind = "openai"

    def __init__(self, model: str, *, base_url: str, api_key_env: str = "OPENAI_API_KEY", max_tokens: int = 4,
                 timeout: float = 60.0, max_retries: int = 5, concurrency: int = 8, seed: int | None = None) -> None:
        super().__init__()
        self.model, self.base_url, self.max_tokens, self.concurrency, self.seed = (model, base_url, max_tokens,
                                                                                   concurrency, seed)
        self.client = openai_client(base_url, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries)
        self.n_malformed = 0

    def reply(self, text: str) -> str | None:
        """The endpoint's answer to ``text`` as the user turn (None when the response has none)."""
        kw: dict[str, Any] = {"seed": self.seed} if self.seed is not None else {}
        resp = self.client.chat.completions.create(model=self.model, temperature=0.0, max_tokens=self.max_tokens,
                                                   messages=[{"role": "user", "content": text}], **kw)
        try:
            return resp.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            return None

    def letter_scores(self, question: Question, items: Sequence[Any]) -> torch.Tensor:
        texts = [question.text(it) for it in items]
        with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
            named = [question.parse(r) for r in pool.map(self.reply, texts)]
        self.n_calls += len(items)
        rows = [named_scores(letter, question.letters) for letter in named]
        out = torch.tensor(rows, dtype=torch.float32).reshape(len(items), len(question.letters))
        self.n_malformed += int(out.isnan().all(dim=-1).sum())
        return out
