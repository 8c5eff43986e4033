"""Length-aware batching shared by every forward pass (training, scoring, the packed encoder's
attention groups, prefix scoring).

Texts are sorted by length so a batch pads little; within one step a batch can be split further
into contiguous *buckets* of similar width. With n texts of descending lengths l_1 >= ... >= l_n,
a split into buckets B_1..B_k costs sum_j (|B_j| * max_{i in B_j} l_i + overhead): padded tokens
plus a fixed per-forward overhead (kernel launches, Python). ``length_buckets`` finds the exact
minimum by dynamic programming, O(n^2) for the few hundred texts of a batch."""

from __future__ import annotations

import numpy as np


def length_sorted_batches(lengths: list[int], max_batch: int, max_tokens: int | None = None) -> list[list[int]]:
    """Indices grouped into batches of similar length (longest first), so padding is small.
    With max_tokens, a batch holds at most that many padded tokens."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    batches: list[list[int]] = []
    cur: list[int] = []
    for i in order.tolist():
        width = lengths[cur[0]] if cur else lengths[i]
        if cur and (len(cur) >= max_batch or (max_tokens and width * (len(cur) + 1) > max_tokens)):
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    return batches


def length_buckets(sorted_lengths: list[int], overhead: int) -> list[tuple[int, int]]:
    """Split descending lengths into contiguous buckets minimising padded tokens + overhead per
    bucket (exact dynamic programme; a batch has at most a few hundred texts). Returns
    (bucket size, bucket width) pairs in order."""
    n = len(sorted_lengths)
    best = [0.0] + [float("inf")] * n  # best[j]: cost of the first j texts
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):  # bucket = texts i..j-1, width = sorted_lengths[i]
            c = best[i] + (j - i) * sorted_lengths[i] + overhead
            if c < best[j]:
                best[j], cut[j] = c, i
    spans = []
    j = n
    while j > 0:
        i = cut[j]
        spans.append((j - i, sorted_lengths[i]))
        j = i
    return spans[::-1]


def bucket_spans(buckets: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(start, end, width) of each bucket from :func:`length_buckets`."""
    out, start = [], 0
    for size, width in buckets:
        out.append((start, start + size, width))
        start += size
    return out
