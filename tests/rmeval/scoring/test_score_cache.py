"""Score cache: a second pass never reaches the model; another fingerprint never hits."""

from __future__ import annotations

import numpy as np

from rmeval.scoring.base import Scorer
from rmeval.scoring.cache import CachedScorer, ScoreCache


class CountingScorer(Scorer):
    """Score = number of characters of the response (+ offset); counts items sent to the model."""

    kind = "counting"

    def __init__(self, offset: float = 0.0, fp: str = "model-a") -> None:
        super().__init__()
        self.offset, self.fp, self.calls, self.items_seen = offset, fp, 0, 0

    @property
    def fingerprint(self) -> str:
        return self.fp

    def score(self, items):
        self.calls += 1
        self.items_seen += len(items)
        self._record_flags(np.array([[len(m[0]["content"]) > 20, False] for m, _ in items], bool).reshape(-1, 2))
        return np.array([len(r) + self.offset for _, r in items], float)


ITEMS = [([{"role": "user", "content": f"question {i} " + "x" * (i * 5)}], "answer " * (i + 1)) for i in range(6)]


def test_second_pass_calls_model_zero_times(tmp_path):
    inner = CountingScorer()
    cached = CachedScorer(inner, tmp_path / "c.sqlite", chunk_size=4)
    first = cached.score(ITEMS + ITEMS[:2])  # duplicates within a call are scored once
    assert inner.items_seen == 6
    np.testing.assert_array_equal(first, [len(r) for _, r in ITEMS + ITEMS[:2]])
    flags_first = cached.last_flags.copy()
    inner.calls = inner.items_seen = 0
    reopened = CachedScorer(inner, tmp_path / "c.sqlite")  # persists on disk
    second = reopened.score(ITEMS)
    assert inner.calls == 0 and inner.items_seen == 0
    np.testing.assert_array_equal(second, first[:6])
    np.testing.assert_array_equal(reopened.last_flags, flags_first[:6])  # truncation flags survive
    assert reopened.hits == 6 and reopened.misses == 0


def test_partial_hit_scores_only_missing(tmp_path):
    inner = CountingScorer()
    cached = CachedScorer(inner, tmp_path / "c.sqlite")
    cached.score(ITEMS[:3])
    inner.items_seen = 0
    out = cached.score(ITEMS)
    assert inner.items_seen == 3
    np.testing.assert_array_equal(out, [len(r) for _, r in ITEMS])


def test_different_fingerprint_misses(tmp_path):
    cache = ScoreCache(tmp_path / "c.sqlite")
    a, b = CountingScorer(0.0, "model-a"), CountingScorer(100.0, "model-b")
    CachedScorer(a, cache).score(ITEMS)
    out_b = CachedScorer(b, cache).score(ITEMS)
    assert b.items_seen == len(ITEMS)
    np.testing.assert_array_equal(out_b, [len(r) + 100.0 for _, r in ITEMS])
    assert len(cache) == 2 * len(ITEMS)
