"""LLM text backends: the pairwise-judge protocol (here), its local (``local``) and endpoint
(``endpoint``) backends, and the policy generators (``generators``).

One protocol for pairwise judges (the kinds that offer one, and the spec that names them:
``rmeval.backends.spec``): the win rate of ``rmtrain policy-eval`` (``rmeval.experiments.winrate``),
judge elicitation (``rmeval.judges.elicit``) and a generative judge's suitability confidence
(``rmeval.scoring.pairwise_judge``) all ask a judge which of two responses it names, and get the
answer from the same backends.

A user states its comparison as a ``Question``: the letters the judge may name, the prompt of an
item as text (what an endpoint receives), as token ids (what a local model reads; the user's own
layout and truncation), and how a text reply names a letter. A backend (``JudgeBackend``) answers a
question on a batch of items with one log-score per letter (``letter_scores``, an (n, letters)
float32 tensor):

- ``rmeval.backends.local.LocalBackend``: a Hugging Face causal LM read from the next-token logits
  after the prompt: the log-sum-exp of the logits of every single-token spelling of each letter
  (nothing is sampled). Items of one ``Tokens.group`` can share the KV cache of their common
  prefix (``prefix_reuse``);
- ``rmeval.backends.endpoint.EndpointBackend``: an OpenAI-compatible chat endpoint through the
  ``openai`` client (retries with backoff on 429/5xx), greedy. The letter its reply names scores 0
  and the others −inf; a tie scores 0 for every letter; a reply naming none is a row of NaN, never
  a direction, and is counted (``n_malformed``).

Each user reads the scores its own way: the win rate takes the arg-max letter, elicitation
p(A | A or B) = σ(s_A − s_B) against a margin, suitability the verdict log-odds s_A − s_B.

A question whose judge writes an explanation before its verdict (``[[A]]``, ``[[B]]``, ``[[C]]``)
parses a reply with ``read_bracket_verdict``: the last bracketed letter of the reply.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

TIE = "="  # what ``Question.parse`` returns for a reply that names no winner on purpose ("tie", "equal")


@dataclass(frozen=True)
class Tokens:
    """An item's prompt as token ids for a local model: ``prefix`` then ``suffix``. Items of one
    ``group`` (not None) may be run on the KV cache of the first one's prefix."""

    prefix: list[int]
    suffix: list[int] = field(default_factory=list)
    group: Hashable | None = None


# the letter itself is case-sensitive ("a lot of..." is not an answer); the words around it are not
_LETTER = re.compile(r"^[\s\*\"'\(\[]*(?:(?i:response|answer|option)\s*[:\-]?\s*)?\(?([AB])\b")
_TIE = re.compile(r"^\W*(tie|equal|same|neither|both|no difference)\b", re.IGNORECASE)
_BOTH_LETTERS = re.compile(r"^\W*A\s*(or|/|and)\s*B\b")


_BRACKET = re.compile(r"\[\[\s*([A-Z])\s*\]\]")


def read_bracket_verdict(text: str | None, letters: Sequence[str] = ("A", "B", "C")) -> str | None:
    """The last ``[[X]]`` of a reply with X one of ``letters``, or None."""
    found = [x for x in _BRACKET.findall(text or "") if x in letters]
    return found[-1] if found else None


def read_letter(text: str | None) -> str | None:
    """A reply to "answer with a single letter, A or B" -> "A", "B", ``TIE`` (an explicit tie / no
    difference) or None (malformed)."""
    if not text or _BOTH_LETTERS.match(text.strip()):  # "A or B" names no answer
        return None
    m = _LETTER.match(text.strip())
    if m:
        return m.group(1)
    if _TIE.match(text.strip()):
        return TIE
    return None


class Question(ABC):
    """A user's comparison: the ``letters`` a judge may name and how an item becomes a prompt."""

    letters: tuple[str, ...] = ("A", "B")

    @abstractmethod
    def text(self, item: Any) -> str:
        """The prompt of ``item`` as one user turn (an endpoint applies its own chat template)."""

    @abstractmethod
    def encode(self, backend: Any, items: Sequence[Any]) -> list[Tokens]:
        """The prompts of ``items`` as token ids for a local backend (its ``tokenizer``, ``ids``,
        ``user_turn`` and ``chat_parts``), truncated as this question needs."""

    def parse(self, reply: str | None) -> str | None:
        """The letter a text reply names, ``TIE``, or None; by default a bare "A" or "B" answer."""
        return read_letter(reply)


class JudgeBackend(ABC):
    """Where a judge runs; ``n_calls`` counts the items asked. ``reads_tokens``: a question encodes
    token ids for it (``Question.encode``; a prompt's token budget then changes its answers);
    ``graded``: its scores are log-probabilities (a margin on them changes a verdict), not only the
    letter a reply names."""

    kind = "judge"
    reads_tokens = False
    graded = False

    def __init__(self) -> None:
        self.n_calls = 0

    @property
    def label(self) -> str:
        """The judge's default name in a table (its model's)."""
        return str(getattr(self, "model", self.kind)).replace("/", "_")

    def identity(self, model_id: Callable[[str], str] = str) -> dict[str, Any]:
        """What its answers depend on besides the question: the model and every setting (a cache's
        key space; ``rmeval.judges.elicit``). ``model_id`` says how a model loaded from a path is
        identified (``rmeval.scoring.base.model_identity``: by its files)."""
        return {"model": str(getattr(self, "model", ""))}

    @abstractmethod
    def letter_scores(self, question: Question, items: Sequence[Any]) -> Any:
        """(len(items), len(question.letters)) float32 torch tensor of log-scores (NaN rows: no
        letter named)."""

    def close(self) -> None:  # noqa: B027 -- optional hook: a backend holding a model releases it
        """Release resources (a loaded model)."""


def named_scores(letter: str | None, letters: Sequence[str]) -> list[float]:
    """Log-scores of a text answer: 0 for the named letter and −inf for the others, 0 for all on a
    tie, NaN for all when nothing is named."""
    if letter is None or (letter != TIE and letter not in letters):
        return [math.nan] * len(letters)
    return [0.0 if letter in (TIE, lt) else -math.inf for lt in letters]
