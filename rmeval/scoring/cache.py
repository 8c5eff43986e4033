"""Content-addressed score cache: the same model never scores the same text twice.

Key = sha256(scorer fingerprint + NUL + rendered item). Stored in one SQLite file (WAL mode; safe
for several readers and one writer, and a crash loses at most the chunk being scored -- every
scored chunk is committed before the next starts, which is what makes a scoring run resumable).
Truncation flags are stored beside each score, so counts stay right when scores come from the cache.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from rmeval.scoring.base import ScoreItem, Scorer


def cache_key(fingerprint: str, rendered: str) -> str:
    return hashlib.sha256(f"{fingerprint}\x00{rendered}".encode()).hexdigest()


class ScoreCache:
    """key -> (score, prompt_truncated, response_truncated) on disk."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(self.path), timeout=60)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, fingerprint TEXT, score REAL, "
                          "prompt_truncated INTEGER, response_truncated INTEGER)")
        self.conn.commit()

    def get_many(self, keys: list[str]) -> dict[str, tuple[float, bool, bool]]:
        out: dict[str, tuple[float, bool, bool]] = {}
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), 500):  # SQLite's bound-parameter limit
            chunk = uniq[i:i + 500]
            q = f"SELECT key, score, prompt_truncated, response_truncated FROM scores WHERE key IN ({','.join('?' * len(chunk))})"
            for k, s, p, r in self.conn.execute(q, chunk):
                out[k] = (float(s) if s is not None else float("nan"), bool(p), bool(r))
        return out

    def put_many(self, fingerprint: str, rows: list[tuple[str, float, bool, bool]]) -> None:
        self.conn.executemany(
            "INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?)",
            [(k, fingerprint, None if np.isnan(s) else float(s), int(p), int(r)) for k, s, p, r in rows])
        self.conn.commit()

    def __len__(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


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
    def name(self) -> str:
        return self.inner.name

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def render(self, item: ScoreItem) -> str:
        return self.inner.render(item)

    def score(self, items: list[ScoreItem]) -> np.ndarray:
        fp = self.fingerprint
        keys = [cache_key(fp, self.render(it)) for it in items]
        found = self.cache.get_many(keys)
        todo: dict[str, ScoreItem] = {}
        for k, it in zip(keys, items):
            if k not in found and k not in todo:
                todo[k] = it
        self.hits += sum(1 for k in keys if k in found)
        todo_keys = list(todo)
        for i in range(0, len(todo_keys), self.chunk_size):
            chunk = todo_keys[i:i + self.chunk_size]
            scores = self.inner.score([todo[k] for k in chunk])
            flags = self.inner.last_flags if len(self.inner.last_flags) == len(chunk) else np.zeros((len(chunk), 2), bool)
            rows = [(k, float(s), bool(f[0]), bool(f[1])) for k, s, f in zip(chunk, scores, flags)]
            self.cache.put_many(fp, rows)  # committed per chunk: an interrupted run resumes here
            found.update({k: (s, p, r) for k, s, p, r in rows})
            self.misses += len(chunk)
        out = np.array([found[k][0] for k in keys], dtype=np.float64)
        self._record_flags(np.array([[found[k][1], found[k][2]] for k in keys], dtype=bool).reshape(-1, 2))
        return out

    def close(self) -> None:
        self.inner.close()
        self.cache.close()

    def __getattr__(self, name: str) -> Any:  # tokenizer, model, ... of the wrapped scorer
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
