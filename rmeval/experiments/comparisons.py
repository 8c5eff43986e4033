"""Head-to-head judgments of two responses to one prompt, in both presentation orders: the
helpfulness judge of the leaderboard and filtering experiments.

The judge sees the conversation and two responses labelled A and B and is asked "Which response is
more helpful to the user? Answer with the letter A or B only." Its answer is the probability of A
renormalised over the two letters, softmax(s_A, s_B)_A of the letters' log-scores from the
pairwise-judge protocol (``rmeval.backends``): a local causal LM's next-token logits (every
single-token spelling of each letter, ``hf``), an OpenAI-compatible endpoint's first-token
log-probabilities (``openai_logprobs``: the top log-probabilities of one generated token, each
letter's spellings summed; neither letter among them is missing and counted -- a vLLM server of a
judge too large for one device), or an endpoint's greedy reply (``openai``: 1 for A, 0 for B, 1/2
for an explicit tie; a reply naming neither is missing and counted) -- or any other kind of
``rmeval.backends.spec`` that judges (the ``backend`` of a recipe's judge). Every pair is judged
in both orders (x as A, then y as A); ``rmeval.stats.ranking.head_to_head`` turns the two into
P(x better) and the judge's self-agreement across orders.

A local judge reads the prompt as one user turn of its chat template; a prompt longer than
``max_length`` loses the start of its conversation first, then the ends of both responses by the
same number of tokens (``rmeval.scoring.judge.fit_judge_prompt``), and is counted. Judgments are
cached in SQLite (``rmcore.io.cache``) under (judge fingerprint, the item as text), committed chunk by
chunk, so an interrupted run resumes and a rerun asks the judge nothing; the judge is loaded only
when something is missing.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from rmcore.data.schema import Message
from rmcore.io.cache import SqliteCache, content_key
from rmcore.models.device import Placement, dtype_name, resolve_device, resolve_dtype
from rmeval.backends import Question, Tokens
from rmeval.backends.spec import make_backend
from rmeval.experiments.responses import resolve_model
from rmeval.experiments.settings import JudgeSpec
from rmeval.scoring.base import model_identity

QUESTION = "Which response is more helpful to the user? Answer with the letter A or B only."
TEMPLATE = "[Conversation]\n{conversation}\n\n[Response A]\n{a}\n\n[Response B]\n{b}\n\n" + QUESTION

Item = tuple[list[Message], str, str]  # (conversation, response shown as A, response shown as B)


class HelpfulnessQuestion(Question):
    """The study's A/B helpfulness question as a question of the pairwise-judge protocol."""

    letters = ("A", "B")

    def __init__(self, max_length: int | None = None) -> None:
        self.max_length = max_length
        self.n_truncated = 0

    def text(self, item: Item) -> str:
        # torch: this module loads without it
        from rmeval.scoring.judge import conversation_text

        messages, a, b = item
        return TEMPLATE.format(conversation=conversation_text(list(messages)), a=a, b=b)

    def encode(self, backend: Any, items: Sequence[Item]) -> list[Tokens]:
        # torch: this module loads without it
        from rmeval.scoring.judge import conversation_text, fit_judge_prompt

        limit = backend.fit_length(self.max_length)

        def render(conv: str, responses: list[str]) -> str:
            return backend.user_turn(TEMPLATE.format(conversation=conv, a=responses[0], b=responses[1]))

        out = []
        for messages, a, b in items:
            ids, p_cut, r_cut = fit_judge_prompt(backend.tokenizer, limit, backend.ids, render,
                                                 conversation_text(list(messages)), [a, b])
            self.n_truncated += int(p_cut or r_cut)
            out.append(Tokens(ids))
        return out


class HelpfulnessJudge:
    """p(A) of items under one judge, cached in ``cache`` (SQLite). ``texts`` and ``build_dir``
    serve a ``tiny:SEED`` judge (``rmeval.experiments.responses.resolve_model``)."""

    def __init__(self, spec: JudgeSpec, *, cache: str | os.PathLike, texts: Sequence[str] | None = None,
                 build_dir: str | os.PathLike | None = None, chunk_size: int = 64) -> None:
        spec.validate()
        self.spec, self.chunk_size = spec, chunk_size
        local = spec.backend_spec().backend.local  # a local model: tiny:SEED built, pkg: resolved
        self.model = resolve_model(spec.model, texts=texts, build_dir=build_dir) if local else spec.model
        self.question = HelpfulnessQuestion(spec.max_length)
        self.store = SqliteCache(cache, "judgments", ("p_a REAL",))
        self.backend: Any = None
        self.n_asked = self.n_cached = 0

    @property
    def fingerprint(self) -> str:
        return json.dumps({"backend": self.spec.backend, "model": model_identity(self.model),
                           "base_url": self.spec.base_url, "max_length": self.spec.max_length,
                           "template": TEMPLATE}, sort_keys=True)

    @property
    def n_truncated(self) -> int:
        return self.question.n_truncated

    def _load(self) -> Any:
        if self.backend is None:
            placement = None
            if self.spec.backend_spec().backend.local:
                device = resolve_device(self.spec.device)
                placement = Placement(device=str(device), dtype=dtype_name(resolve_dtype(self.spec.dtype, device)),
                                      trust_remote_code=self.spec.trust_remote_code)
            spec = replace(self.spec.backend_spec(), value=self.model)
            self.backend = make_backend("judge", spec, placement=placement, batch_size=self.spec.batch_size,
                                        concurrency=self.spec.concurrency, seed=0)
        return self.backend

    def p_a(self, items: Sequence[Item]) -> np.ndarray:
        """p(A) per item, renormalised over A and B (NaN: the endpoint named neither)."""
        import torch

        fp = self.fingerprint
        keys = [content_key(fp, json.dumps([list(m), a, b], ensure_ascii=False)) for m, a, b in items]

        def compute(chunk: list[Item]) -> list[tuple[float | None]]:
            scores = self._load().letter_scores(self.question, chunk)
            p = torch.softmax(scores.float(), dim=-1)[:, 0].tolist()
            return [(None if math.isnan(v) else float(v),) for v in p]  # unreadable: stored as NULL

        rows, fresh = self.store.fill(keys, list(items), compute, chunk_size=self.chunk_size)
        self.n_asked += len({k for k in keys if k in fresh})
        self.n_cached += sum(1 for k in keys if k not in fresh)
        return np.array([np.nan if rows.get(k, (None,))[0] is None else rows[k][0] for k in keys], dtype=float)

    def both_orders(self, messages: Sequence[list[Message]], x: Sequence[str],
                    y: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(p_xy, p_yx): p(A) with x shown as A, and with y shown as A."""
        items = [(m, a, b) for m, a, b in zip(messages, x, y)] + [(m, b, a) for m, a, b in zip(messages, x, y)]
        p = self.p_a(items)
        return p[: len(messages)], p[len(messages):]

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None
        self.store.close()
