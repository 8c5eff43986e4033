"""Score cache: the same model never scores the same text twice.

Key = sha256(scorer fingerprint + NUL + rendered item), in the content-addressed SQLite cache of
``rmcore.io.cache`` (WAL mode; several readers and one writer; every scored chunk is committed before
the next starts, which is what makes a scoring run resumable). Truncation flags are stored beside
each score, so counts stay right when scores come from the cache.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from rmcore.io.cache import SqliteCache, content_key
from rmeval.scoring.base import ScoreItem, Scorer

SCORE_COLUMNS = ("fingerprint TEXT", "score REAL", "prompt_truncated INTEGER", "response_truncated INTEGER")


def cache_key(fingerprint: str, rendered: str) -> str:
    return content_key(fingerprint, rendered)


class ScoreCache(SqliteCache):
    """key -> (fingerprint, score, prompt_truncated, response_truncated): table ``scores``; a NaN
    score is stored as NULL."""

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__(path, "scores", SCORE_COLUMNS)

    @staticmethod
    def row(fingerprint: str, score: float, prompt_truncated: bool, response_truncated: bool) -> tuple[Any, ...]:
        return fingerprint, None if np.isnan(score) else float(score), int(prompt_truncated), int(response_truncated)

    @staticmethod
    def value(row: tuple[Any, ...]) -> tuple[float, bool, bool]:
        """(score, prompt truncated, response truncated) of a stored row."""
        _, s, p, r = row
        return float(s) if s is not None else float("nan"), bool(p), bool(r)


class CachedScorer(Scorer):
    """Wraps a scorer: items already in the cache are not scored again; duplicates within a call
    are scored once. ``hits``/``misses`` count items served from / sent to the model."""

    def __init__(self, scorer: Scorer, cache: ScoreCache | str | os.PathLike, *, chunk_size: int = 512) -> None:
        super().__init__()
        self.inner = scorer
        self.cache = cache if isinstance(cache, ScoreCache) else ScoreCache(cache)
        self.chunk_size = chunk_size
        self.hits = self.misses = 0

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.inner.kind

    @property
    def scores_pairs(self) -> bool:  # type: ignore[override]
        return self.inner.scores_pairs

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def render(self, item: ScoreItem) -> str:
        return self.inner.render(item)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def score(self, items: list[ScoreItem]) -> np.ndarray:
        fp = self.fingerprint
        keys = [cache_key(fp, self.render(it)) for it in items]

        def compute(chunk: list[ScoreItem]) -> list[tuple[Any, ...]]:
            scores = self.inner.score(chunk)
            flags = (self.inner.last_flags if len(self.inner.last_flags) == len(chunk)
                     else np.zeros((len(chunk), 2), bool))
            return [ScoreCache.row(fp, float(s), bool(f[0]), bool(f[1])) for s, f in zip(scores, flags)]

        rows, fresh = self.cache.fill(keys, items, compute, chunk_size=self.chunk_size)
        self.hits += sum(1 for k in keys if k not in fresh)
        self.misses += len(fresh)
        found = [ScoreCache.value(rows[k]) for k in keys]
        self._record_flags(np.array([[p, r] for _, p, r in found], dtype=bool).reshape(-1, 2))
        return np.array([s for s, _, _ in found], dtype=np.float64)

    def close(self) -> None:
        self.inner.close()
        self.cache.close()

    def __getattr__(self, name: str) -> Any:  # tokenizer, model, ... of the wrapped scorer
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
