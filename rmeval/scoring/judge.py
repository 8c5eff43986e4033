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

Diagnostics (the study's Table 5): every scored text also leaves its digit distribution, the
columns ``DIGIT_COLUMNS``: ``digit_mass`` = sum over the digit tokens of the softmax over the WHOLE
vocabulary (how much of the judge's next-token belief is a rating at all; a judge that wants to
write "The response..." puts little mass on the digits, and its expected digit then rests on a
small, renormalised remainder), and ``log_p_1..log_p_5``, the log of the renormalised digit
distribution p(d) the score is the mean of (log space, so the logit of p(5) stays exact near 0 and
1). ``digit_rows(items)`` returns them; ``keep_digits(path)`` also stores them in the score cache's
SQLite file (table ``judge_digits``, the score cache's keys), so a resumed audit whose scores come
from the cache still has them. ``rmeval.stats.judge_diagnostics`` summarises them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import torch

from rmcore.data.schema import Message
from rmcore.io.cache import SqliteCache
from rmcore.models import prefix_scoring as prefix
from rmcore.models.device import Placement, describe
from rmcore.models.formatting import ROLE_NAMES
from rmcore.models.modeling import resolve_max_length
from rmcore.settings.registry import Deferred
from rmeval.backends.local import LocalBackend, single_token_ids
from rmeval.scoring.base import ScoreItem, Scorer, fingerprint_of, model_identity
from rmeval.scoring.cache import cache_key
from rmeval.scoring.run import KEY_COLUMNS, build_items
from rmeval.stats.judge_diagnostics import DIGIT_COLUMNS  # the per-row table's schema

JUDGE_TEMPLATE = (
    "You are an impartial judge. Rate how good the assistant's response is as a reply to the "
    "conversation below: helpful, correct and clear. Use a scale from 1 (very poor) to 5 (excellent).\n\n"
    "[Conversation]\n{conversation}\n\n[Response]\n{response}\n\n"
    "Answer with a single digit from 1 to 5.\nRating:"
)
DIGITS = ("1", "2", "3", "4", "5")
DIGIT_TABLE = "judge_digits"  # the table of the score cache's SQLite file that keeps them


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


def digit_log_probs(next_logits: torch.Tensor, digit_ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, V) next-token logits -> (log digit mass (B,), log p(d) over the digits (B, D)), float64.

    log mass = logsumexp(logits of every digit spelling) - logsumexp(all logits); log p(d) = the
    log-softmax of each digit's log-sum-exp over its spellings."""
    z = next_logits.double()
    per_digit = torch.stack([torch.logsumexp(z[:, ids], dim=-1) for ids in digit_ids], dim=-1)
    log_mass = torch.logsumexp(per_digit, dim=-1) - torch.logsumexp(z, dim=-1)
    return log_mass, torch.log_softmax(per_digit, dim=-1)


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

    def __init__(self, model: str | os.PathLike | Any, *, tokenizer: Any | None = None,
                 max_length: int | None = None, batch_size: int = 8, max_tokens: int | None = None,
                 device: str | None = None, dtype: str | None = None, template: str = JUDGE_TEMPLATE,
                 trust_remote_code: bool = False, shared_prompt: bool = True,
                 placement: Placement | None = None) -> None:
        """``shared_prompt``: a conversation's judge prefix is encoded once for all its responses
        (rmcore.models.prefix_scoring); same scores. ``placement`` (else ``device``/``dtype``, ``auto``
        when None): where a model loaded from a path runs (rmcore.models.device)."""
        super().__init__()
        # the local judge backend (rmeval.backends.local): model loading, tokenisation, batched logits
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
        self.last_digits = np.zeros((0, len(DIGIT_COLUMNS)))  # DIGIT_COLUMNS of the last score() call
        self._digits: dict[str, np.ndarray] = {}  # score-cache key -> DIGIT_COLUMNS, this process
        self._digit_store: SqliteCache | None = None

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.kind, {"model": model_identity(self.model_id), "max_length": self.max_length,
                                          "template": self.template, "dtype": self.dtype})

    def describe(self) -> dict[str, Any]:
        return describe(self.model) if self.model is not None else {}

    def suitability_scorer(self, *, judge_style: str = "verdict", judge_explain_tokens: int = 256,
                           **_: Any) -> Scorer:
        """Its pairwise-verdict form (``rmeval.scoring.pairwise_judge``): a judge's confidence in a
        pair is that of its verdict in both orders, not a margin of two expected digits."""
        # named, not imported: rmeval.scoring.pairwise_judge builds on this module (no import circle)
        pairwise = Deferred("rmeval.scoring.pairwise_judge:PairwiseJudgeScorer").load()
        return pairwise(self, style=judge_style, max_new_tokens=judge_explain_tokens)

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
        log_mass, log_p = digit_log_probs(logits, self.digit_ids)
        self._record_digits(items, np.column_stack([log_mass.exp().numpy(), log_p.numpy()]))
        return (log_p.exp() @ torch.arange(1, len(DIGITS) + 1, dtype=log_p.dtype)).numpy()

    # -- diagnostics ---------------------------------------------------------------------------------

    def keep_digits(self, path: str | os.PathLike) -> None:
        """Store the digit distribution of every text scored from now on in the SQLite file at
        ``path`` (table ``judge_digits``; the score cache's file and keys), and read it back there."""
        self._digit_store = SqliteCache(path, DIGIT_TABLE, ["fingerprint TEXT", *(f"{c} REAL" for c in DIGIT_COLUMNS)])

    def _record_digits(self, items: list[ScoreItem], rows: np.ndarray) -> None:
        self.last_digits = rows
        fp = self.fingerprint
        keys = [cache_key(fp, self.render(it)) for it in items]
        self._digits.update(zip(keys, rows))
        if self._digit_store is not None:  # committed with each chunk, like the scores
            self._digit_store.put_many([(k, fp, *map(float, r)) for k, r in zip(keys, rows)])

    def digit_rows(self, items: list[ScoreItem]) -> np.ndarray:
        """(n, len(DIGIT_COLUMNS)): each item's digit mass and log p(d), as recorded when it was
        scored (by this scorer, or in the ``keep_digits`` store); items never recorded (scores from
        a cache written before the store existed) are scored now."""
        fp = self.fingerprint
        keys = [cache_key(fp, self.render(it)) for it in items]
        missing = [k for k in dict.fromkeys(keys) if k not in self._digits]
        if missing and self._digit_store is not None:
            for k, row in self._digit_store.get_many(missing).items():
                self._digits[k] = np.asarray(row[1:], dtype=float)
        todo = {k: it for k, it in zip(keys, items) if k not in self._digits}
        for i in range(0, len(todo), 512):
            self.score(list(todo.values())[i:i + 512])
        return np.array([self._digits[k] for k in keys], dtype=float).reshape(len(items), len(DIGIT_COLUMNS))

    def close(self) -> None:
        self.backend.close()
        self.model = None
        if self._digit_store is not None:
            self._digit_store.close()
            self._digit_store = None


def judge_digit_table(scorer: GenerativeJudgeScorer, rating_set: Any, conditions: list[str],
                      **opts: Any) -> pd.DataFrame:
    """The judge's per-row diagnostics beside an audit's scores: the scores table's key columns
    (prompt_id, response_id, condition, variant, donor_prompt_id) and ``DIGIT_COLUMNS``, one row
    per text of ``conditions`` built with ``opts`` (the items ``rmeval.scoring.run`` scored). Call
    it before the scorer is closed."""
    items = build_items(rating_set, conditions, **opts)
    rows = scorer.digit_rows([it.item for it in items])
    df = pd.DataFrame([it.key for it in items], columns=KEY_COLUMNS)
    for j, c in enumerate(DIGIT_COLUMNS):
        df[c] = rows[:, j]
    df["variant"] = df["variant"].astype(int)
    df["donor_prompt_id"] = df["donor_prompt_id"].astype(object).where(df["donor_prompt_id"].notna(), None)
    return df
