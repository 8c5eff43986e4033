"""A judge behind an OpenAI-compatible endpoint read at the log-probabilities of its first reply
token (the ``openai_logprobs`` kind of ``rmeval.backends.spec``): what a vLLM server of a judge too
large for one device gives a helpfulness judge (``rmeval.experiments.comparisons``) or a digit judge
(``rmeval.reproduce.endpoint_judge``). Each letter's score is the log-sum-exp over the listed top
tokens that spell it (spaces and the BPE / SentencePiece space markers stripped); a reply whose
listed tokens spell no letter is a row of NaN, counted in ``n_malformed``, never a direction."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from rmeval.backends import JudgeBackend, Question
from rmeval.backends.generators import openai_client


class LogprobEndpointBackend(JudgeBackend):
    """A judge behind an OpenAI-compatible endpoint read from the log-probabilities of its first
    reply token (``logprobs``, ``top_logprobs``; vLLM's server and OpenAI's API return them): each
    letter's score is the log-sum-exp over the listed tokens that spell it (spaces and the BPE /
    SentencePiece space markers stripped). A reply whose listed tokens spell neither letter is a
    row of NaN (counted in ``n_malformed``)."""

    kind = "openai_logprobs"
    graded = True

    def __init__(self, model: str, *, base_url: str, api_key_env: str = "OPENAI_API_KEY", top_logprobs: int = 20,
                 timeout: float = 120.0, max_retries: int = 5, concurrency: int = 8) -> None:
        super().__init__()
        self.model, self.base_url, self.top_logprobs, self.concurrency = model, base_url, top_logprobs, concurrency
        self.client = openai_client(base_url, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries)
        self.n_malformed = 0

    def identity(self, model_id: Callable[[str], str] = str) -> dict[str, Any]:
        return {"model": self.model, "base_url": self.base_url, "top_logprobs": self.top_logprobs}

    def scores(self, text: str, letters: Sequence[str]) -> list[float]:
        resp = self.client.chat.completions.create(model=self.model, temperature=0.0, max_tokens=1, logprobs=True,
                                                   top_logprobs=self.top_logprobs,
                                                   messages=[{"role": "user", "content": text}])
        try:
            top = resp.choices[0].logprobs.content[0].top_logprobs
        except (AttributeError, IndexError, TypeError):
            top = []
        per: dict[str, list[float]] = {c: [] for c in letters}
        for t in top:
            spelled = t.token.replace("Ġ", "").replace("▁", "").strip()
            if spelled in per:
                per[spelled].append(float(t.logprob))
        if not any(per.values()):
            return [math.nan] * len(letters)
        return [float(np.logaddexp.reduce(v)) if v else -math.inf for v in per.values()]

    def letter_scores(self, question: Question, items: Sequence[Any]) -> Any:
        import torch

        texts = [question.text(it) for it in items]
        with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
            rows = list(pool.map(lambda x: self.scores(x, question.letters), texts))
        self.n_calls += len(items)
        out = torch.tensor(rows, dtype=torch.float32).reshape(len(items), len(question.letters))
        self.n_malformed += int(out.isnan().all(dim=-1).sum())
        return out


def make_logprob_judge(spec: Any, *, top_logprobs: int = 20, timeout: float = 120.0, max_retries: int = 5,
                       concurrency: int = 8, **_: Any) -> LogprobEndpointBackend:
    """The ``openai_logprobs`` kind's judge (``rmeval.backends.spec``): ``spec.value`` the served
    model's name, at ``base_url`` (the key from ``api_key_env``)."""
    return LogprobEndpointBackend(spec.value, base_url=spec.need("base_url"),
                                  api_key_env=spec.setting("api_key_env", "OPENAI_API_KEY"),
                                  top_logprobs=top_logprobs, timeout=timeout, max_retries=max_retries,
                                  concurrency=concurrency)
