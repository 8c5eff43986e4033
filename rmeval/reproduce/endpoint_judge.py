"""A generative judge behind an OpenAI-compatible endpoint (a vLLM server holding a 70B judge),
scored as the local judge is (``rmeval.scoring.judge``): the same prompt (``JUDGE_TEMPLATE``, sent
as the user turn; the server applies the chat template) and the expected digit ``sum_d d p(d)``,
with p the renormalised probabilities of the digits 1..5 among the top log-probabilities of the
first reply token (the ``openai_logprobs`` backend, ``rmeval.backends.logprobs``: every listed token
that spells a digit, spaces and BPE markers stripped, log-sum-exp'd). A reply whose listed
tokens spell no digit scores NaN (counted in ``n_malformed``; the audit's statistics drop it).
The endpoint sees whole texts: nothing is truncated here (the server refuses what it cannot fit)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rmcore.errors import ConfigError
from rmeval.backends.logprobs import LogprobEndpointBackend
from rmeval.scoring.base import ScoreItem, Scorer, fingerprint_of
from rmeval.scoring.judge import DIGITS, JUDGE_TEMPLATE, conversation_text


class EndpointJudgeScorer(Scorer):
    kind = "generative_judge_endpoint"

    def __init__(self, model: str, *, base_url: str, api_key_env: str = "OPENAI_API_KEY", top_logprobs: int = 20,
                 concurrency: int = 8, template: str = JUDGE_TEMPLATE) -> None:
        super().__init__()
        self.model_name, self.base_url, self.template = model, base_url, template
        self.backend = LogprobEndpointBackend(model, base_url=base_url, api_key_env=api_key_env,
                                              top_logprobs=top_logprobs, concurrency=concurrency)
        self.tokenizer = None
        self.n_malformed = 0

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.kind, {"model": self.model_name, "template": self.template})

    def describe(self) -> dict[str, Any]:
        return {"endpoint": self.base_url, "model": self.model_name}

    def suitability_scorer(self, **_: Any) -> Scorer:
        """None: the suitability audit asks a judge for its verdict on a pair, which an endpoint read
        at one digit does not give."""
        raise ConfigError(f"no suitability confidence for scorer kind '{self.kind}'")

    def text(self, item: ScoreItem) -> str:
        messages, response = item
        return self.template.format(conversation=conversation_text(messages), response=response)

    def score(self, items: list[ScoreItem]) -> np.ndarray:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, self.backend.concurrency)) as pool:
            rows = list(pool.map(lambda it: self.backend.scores(self.text(it), DIGITS), items))
        out = np.array([expected_digit(r) for r in rows], dtype=float)
        self.n_malformed += int(np.isnan(out).sum())
        self._record_flags(np.zeros((len(items), 2), dtype=bool))
        return out


def expected_digit(log_scores: list[float]) -> float:
    """sum_d d p(d) from per-digit log-scores (-inf: not listed; all NaN: no digit)."""
    z = np.array(log_scores, dtype=float)
    if np.isnan(z).all() or not np.isfinite(z).any():
        return math.nan
    p = np.exp(z - np.max(z[np.isfinite(z)]))
    p = np.where(np.isfinite(z), p, 0.0)
    p /= p.sum()
    return float(p @ np.arange(1, len(z) + 1))
