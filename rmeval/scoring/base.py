"""The scorer interface every backend implements, and a registry of backends by name.

A scorer maps (conversation, response) items to one number each. The interface is deliberately
small (lm-eval-harness style): ``name``, ``fingerprint`` (a stable id of model + settings, the key
space of the score cache), ``score`` and ``close``. Scorers also count how often the prompt or the
response had to be truncated, because a silently truncated prompt is a prompt the model never saw.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from rmcore.data.schema import Message
from rmcore.settings.registry import Registry

ScoreItem = tuple[list[Message], str]  # (conversation ending with a user turn, response)


def render_item(item: ScoreItem) -> str:
    """Canonical text of an item: the same conversation and response always render identically."""
    messages, response = item
    return json.dumps([[{"role": m["role"], "content": m["content"]} for m in messages], response],
                      ensure_ascii=False, separators=(",", ":"))


def model_identity(name_or_path: str | os.PathLike) -> str:
    """Stable id of a checkpoint: for a local directory its resolved path plus size and mtime of
    every weight/config file (so an overwritten checkpoint is a different model); a Hub id as is."""
    p = Path(name_or_path)
    if not p.exists():
        return str(name_or_path)
    files = [p] if p.is_file() else sorted(
        f for f in p.iterdir()
        if f.is_file() and (f.suffix in (".safetensors", ".bin", ".json", ".model", ".txt") or f.name == "merges.txt")
    )
    h = hashlib.sha256(str(p.resolve()).encode())
    for f in files:
        st = f.stat()
        h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return f"{p.resolve()}#{h.hexdigest()[:16]}"


def fingerprint_of(kind: str, settings: dict[str, Any]) -> str:
    payload = json.dumps({"kind": kind, **settings}, sort_keys=True, default=str)
    return f"{kind}:{hashlib.sha256(payload.encode()).hexdigest()[:24]}"


class Scorer(ABC):
    """Scores (messages, response) items. Subclasses set ``self.last_flags`` to an (n, 2) bool array
    (prompt_truncated, response_truncated) after each ``score`` call and keep ``truncation`` totals."""

    kind: str = "scorer"
    # how the suitability audit (rmeval.suitability.scoring) reads its scores: False, one response's
    # reward (the confidence in a pair is σ(r_chosen − r_rejected)); True, an item (messages,
    # (first, second)) scored as the log-odds that the first is the better (both orders are asked)
    scores_pairs: ClassVar[bool] = False
    # the settings of rmeval.scoring.ScorerSettings beyond the model and the batching ones that it
    # reads (``from_settings``); load_scorer refuses the others for it
    reads: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        self.truncation: dict[str, int] = {"n_scored": 0, "prompt_truncated": 0, "response_truncated": 0}
        self.last_flags: np.ndarray = np.zeros((0, 2), dtype=bool)

    @property
    def name(self) -> str:
        return self.kind

    @property
    @abstractmethod
    def fingerprint(self) -> str:
        """Stable id of model + every setting that changes a score."""

    @abstractmethod
    def score(self, items: list[ScoreItem]) -> np.ndarray:
        """One float per item, in input order."""

    def render(self, item: ScoreItem) -> str:
        """Text that determines the score of an item given this scorer (the cache key's content)."""
        return render_item(item)

    def describe(self) -> dict[str, Any]:
        """Where the model runs and how it is read, as reports record it (device, dtype,
        attn_implementation, and a reward model's loader and head); empty without a model."""
        return {}

    def close(self) -> None:  # noqa: B027 -- optional hook, most scorers have nothing to free
        """Free the model; the scorer must not be used afterwards."""

    @classmethod
    def from_settings(cls, settings: Any, **common: Any) -> Scorer:
        """The scorer ``settings`` (``rmeval.scoring.ScorerSettings``) describe: its ``model`` and
        the batching settings every scorer gets (``common``: max_length, batch_size, max_tokens,
        placement). A scorer that reads more of them (``reads``) builds itself from them."""
        return cls(model=settings.model, **common)

    def suitability_scorer(self, **options: Any) -> Scorer:
        """The scorer the suitability confidence is computed with: this one, a reward (a judge
        gives its pairwise-verdict form; ``options``: how a judge is asked, ignored by a reward)."""
        return self

    def input_keys(self, items: list[Any]) -> list[Hashable]:
        """What this scorer reads of each item, as something comparable: its rendered text (a scorer
        that tokenises gives its token ids, so a perturbation its tokenizer normalises away leaves
        the input unchanged)."""
        return [self.render(it) for it in items]

    def _record_flags(self, flags: np.ndarray) -> None:
        self.last_flags = flags
        self.truncation["n_scored"] += len(flags)
        self.truncation["prompt_truncated"] += int(flags[:, 0].sum()) if len(flags) else 0
        self.truncation["response_truncated"] += int(flags[:, 1].sum()) if len(flags) else 0

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# name -> "module:Class" (imported lazily so the registry costs nothing until a backend is used) or a
# callable returning a Scorer. `--scorer` offers these names; plugins: entry points of matchrm.scorers
SCORERS: Registry[str | Callable[..., Scorer]] = Registry("scorer", {
    "seq_classifier": "rmeval.scoring.seq_classifier:SeqClassifierScorer",
    "generative_judge": "rmeval.scoring.judge:GenerativeJudgeScorer",
    "dpo_implicit": "rmeval.scoring.dpo:DPOImplicitScorer",
}, sort_known=True, group="matchrm.scorers")


def register_scorer(kind: str, factory: str | Callable[..., Scorer], *, replace: bool = False) -> None:
    """Add a backend: a callable ``factory(**kwargs) -> Scorer`` or a 'module:Class' path. A kind
    already registered is an error unless ``replace``."""
    SCORERS.register(kind, factory, replace=replace)


def scorer_factory(kind: str) -> Callable[..., Scorer]:
    """The class (or callable) registered as scorer ``kind``, its module imported."""
    factory = SCORERS.lookup(kind)
    if isinstance(factory, str):
        mod, cls = factory.split(":")
        factory = getattr(importlib.import_module(mod), cls)
    return factory


def make_scorer(kind: str, **kwargs: Any) -> Scorer:
    """Build a scorer backend by name, e.g. ``make_scorer("seq_classifier", model="out/ckpt")``."""
    return scorer_factory(kind)(**kwargs)
