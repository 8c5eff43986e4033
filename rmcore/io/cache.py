"""Content-addressed SQLite cache: a result computed once is never computed again.

Key = sha256 of its parts joined by NUL (``content_key``): the fingerprint of whatever computes the
value (a scorer, a rewriter, a judge: every setting that changes the result) and the rendered
input, so a changed setting is a different key rather than a stale hit. One SQLite file in WAL
mode, safe for several readers and several writers on one machine (the processes of a sharded
audit): each write takes the write lock up front (``BEGIN IMMEDIATE``), waits for it, and is retried
when SQLite still reports the database busy; two writers of one key write the same value. ``fill`` computes
the missing values chunk by chunk and commits every chunk before the next starts: a crash loses at most the
chunk being computed, which is what makes a long run resumable. A value the computation marks as failed (None)
is not stored, so a later run asks for it again.

Used by the score cache (``rmeval.scoring.cache``: table ``scores``), the rewrite cache
(``rmeval.perturbations.rewriters``: table ``rewrites``) and judge elicitation
(``rmeval.judges.elicit``, through the score cache).
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
_MAX_PARAMS = 500  # below SQLite's limit on bound parameters per statement
_RETRIES = 20  # of a write SQLite reports busy after its own 60 s wait


def _retry(fn: Callable[[], T]) -> T:
    """``fn()``, again after a short random pause while SQLite reports the database locked or busy."""
    for attempt in range(_RETRIES):
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if not any(w in str(e) for w in ("locked", "busy")) or attempt == _RETRIES - 1:
                raise
            time.sleep(random.uniform(0.05, 0.5))
    raise AssertionError("unreachable")


def content_key(*parts: str) -> str:
    """sha256 of ``parts`` joined by NUL (a separator no rendered text contains)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


class SqliteCache:
    """key -> one row of ``columns`` (SQL column definitions, e.g. ``"score REAL"``) in table
    ``table`` of the SQLite file at ``path``."""

    def __init__(self, path: str | os.PathLike, table: str, columns: Sequence[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.table, self.n_columns = table, len(columns)
        # autocommit mode: transactions are opened explicitly, so a write never upgrades a read lock
        self.conn = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
        _retry(lambda: self.conn.execute("PRAGMA journal_mode=WAL"))
        _retry(lambda: self.conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, "
                                         f"{', '.join(columns)})"))

    def get_many(self, keys: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """The stored row of each key present."""
        out: dict[str, tuple[Any, ...]] = {}
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), _MAX_PARAMS):
            chunk = uniq[i:i + _MAX_PARAMS]
            q = f"SELECT * FROM {self.table} WHERE key IN ({','.join('?' * len(chunk))})"
            out.update({row[0]: tuple(row[1:]) for row in self.conn.execute(q, chunk)})
        return out

    def put_many(self, rows: Sequence[Sequence[Any]]) -> None:
        """Store ``(key, *values)`` rows (replacing rows of the same key) and commit."""
        marks = ", ".join("?" * (self.n_columns + 1))
        values = [tuple(r) for r in rows]

        def write() -> None:
            self.conn.execute("BEGIN IMMEDIATE")  # the write lock first: waited for, never a deadlock
            try:
                self.conn.executemany(f"INSERT OR REPLACE INTO {self.table} VALUES ({marks})", values)
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

        if values:
            _retry(write)

    def fill(self, keys: Sequence[str], items: Sequence[T],
             compute: Callable[[list[T]], Sequence[Sequence[Any] | None]], *,
             chunk_size: int) -> tuple[dict[str, tuple[Any, ...]], set[str]]:
        """(row per key, the keys computed by this call). ``items[i]`` is what ``keys[i]`` stands for;
        each distinct missing key is computed once, ``chunk_size`` at a time, by ``compute(items)``
        -> a row of values per item, or None where it failed (not stored, so retried next time).
        Failed keys are absent from the rows and present in the computed set."""
        found = self.get_many(keys)
        todo: dict[str, T] = {}
        for k, it in zip(keys, items):
            if k not in found and k not in todo:
                todo[k] = it
        todo_keys = list(todo)
        for i in range(0, len(todo_keys), chunk_size):
            chunk = todo_keys[i:i + chunk_size]
            values = compute([todo[k] for k in chunk])
            rows = [(k, *v) for k, v in zip(chunk, values) if v is not None]
            self.put_many(rows)  # committed per chunk: an interrupted run resumes after it
            found.update({r[0]: tuple(r[1:]) for r in rows})
        return found, set(todo_keys)

    def __len__(self) -> int:
        return int(self.conn.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0])

    def close(self) -> None:
        self.conn.close()
