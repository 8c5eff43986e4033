"""Every count the agreement analyses need, for all judge pairs at once, as Gram matrices.

Under a read protocol (``Panel.reads``) judge j has a direction d_j(i, a) in {-1, 0, +1} and a
read mark p_j(i, a) in {0, 1} per item i and attribute a (the overall verdict left out); d_j != 0
implies p_j = 1. For two judges j, k and one cell:

    |d_j| |d_k| = 1  iff the cell is jointly resolved,
    d_j d_k     = +1 where they agree, -1 where they disagree (jointly resolved), 0 otherwise,
    p_j p_k     = 1  iff both read it,
    d_j |d_k|   = +1 / -1 where jointly resolved and j says +1 / -1.

Summed over a set of cells: joint = sum |d_j||d_k|, agree = (joint + sum d_j d_k) / 2, cells read
by both = sum p_j p_k, jointly resolved with j at +1 = (joint + sum d_j |d_k|) / 2. Stack the
judges' rows z_j(i, .) of an item into Z_i (J x A): the sums over its attributes for all (j, k)
are the J x J Gram matrix Z_i Z_i^T (or Z_i W_i^T for two kinds of rows), so one batched matrix
product gives them for every pair and item (``protocol_counts``: (J, J, I)). Summed over items for
each attribute instead, they are the Gram matrices of the columns (``attribute_counts``: (A, J, J)).
An item weight that factors over the two judges goes into the rows: the same-winner items of a pair
are [v_j = +1][v_k = +1] + [v_j = -1][v_k = -1] (v the stable verdicts), so their jointly resolved
cells are G(V+ |D|) + G(V- |D|) with V+ = [v = +1] multiplying each judge's rows; the
opposite-winner items are [v_j = +1][v_k = -1] + [v_j = -1][v_k = +1], the cross product
C = (V+ |D|)(V- |D|)^T plus its transpose.

The products run in float32 on items in chunks of ``CHUNK``: every entry is an integer of at most
A (per item) or CHUNK (per attribute and chunk), below 2^24, so float32 holds it exactly whatever
the order of summation; chunks accumulate in int64. Cost: about J^2 I A multiply-adds per Gram
matrix, a second or two for the published panel (21 judges, 50,013 items, 87 attributes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rmcore.console.progress import Progress

# ``panel`` below is a rmeval.judges.panel.Panel (not imported: the panel imports this module)
Panel = Any

CHUNK = 2048  # items per batched product: (J, CHUNK, A) float32 rows, a few MB


@dataclass
class PairCounts:
    """Per-item counts of one judge pair (int64 vectors over items)."""

    joint: np.ndarray  # jointly resolved attributes
    agree: np.ndarray  # jointly resolved and equal
    cells: np.ndarray | None = None  # read by both
    j_positive: np.ndarray | None = None  # jointly resolved, judge j at +1
    k_positive: np.ndarray | None = None  # jointly resolved, judge k at +1


@dataclass
class ProtocolCounts:
    """Per-item sums over attributes for every ordered judge pair, (J, J, I) int16:
    ``signed`` sum d_j d_k, ``joint`` sum |d_j||d_k|, ``cells`` sum p_j p_k, ``lead`` sum d_j |d_k|;
    and over all cells, (J, J) int64: ``total_dp`` sum d_j p_k, ``total_ap`` sum |d_j| p_k."""

    signed: np.ndarray
    joint: np.ndarray
    cells: np.ndarray | None = None
    lead: np.ndarray | None = None
    total_dp: np.ndarray | None = None
    total_ap: np.ndarray | None = None

    def pair(self, j: int, k: int) -> PairCounts:
        joint = self.joint[j, k].astype(np.int64)
        agree = (joint + self.signed[j, k]) // 2
        if self.cells is None:
            return PairCounts(joint, agree)
        return PairCounts(joint, agree, self.cells[j, k].astype(np.int64), (joint + self.lead[j, k]) // 2,
                          (joint + self.lead[k, j]) // 2)


def _bar(progress: bool, total: int, desc: str) -> Progress:
    return Progress(desc, total, unit="item", enabled=progress)


def _per_item(z: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """(J, b, A) rows -> (J, J, b): per item, Z_i Z_i^T (or Z_i W_i^T)."""
    zt = np.ascontiguousarray(z.transpose(1, 0, 2))
    wt = zt if w is None else np.ascontiguousarray(w.transpose(1, 0, 2))
    return np.matmul(zt, wt.transpose(0, 2, 1)).transpose(1, 2, 0)


def protocol_counts(panel: Panel, protocol: str, *, columns: np.ndarray | None = None,
                    progress: bool = False) -> ProtocolCounts:
    """``ProtocolCounts`` of every judge pair under ``protocol`` over the attributes (or only the
    attribute positions ``columns``: then ``signed`` and ``joint`` only)."""
    s, p = panel.reads(protocol)
    n_j, n_i = s.shape[0], s.shape[1]
    full = columns is None
    cols = slice(0, s.shape[2] - 1) if full else np.asarray(columns)
    shape = (n_j, n_j, n_i)
    out = ProtocolCounts(np.zeros(shape, np.int16), np.zeros(shape, np.int16))
    if full:
        out.cells, out.lead = np.zeros(shape, np.int16), np.zeros(shape, np.int16)
        out.total_dp, out.total_ap = np.zeros((n_j, n_j), np.int64), np.zeros((n_j, n_j), np.int64)
    with _bar(progress and full, n_i, f"pair statistics ({protocol})") as bar:
        for start in range(0, n_i, CHUNK):
            sl = slice(start, min(start + CHUNK, n_i))
            d = s[:, sl][:, :, cols].astype(np.float32)
            a = np.abs(d)
            out.signed[:, :, sl] = _per_item(d)
            out.joint[:, :, sl] = _per_item(a)
            if full:
                r = p[:, sl][:, :, cols].astype(np.float32)
                out.cells[:, :, sl] = _per_item(r)
                out.lead[:, :, sl] = _per_item(d, a)
                flat = (n_j, -1)
                out.total_dp += (d.reshape(flat) @ r.reshape(flat).T).astype(np.int64)
                out.total_ap += (a.reshape(flat) @ r.reshape(flat).T).astype(np.int64)
            bar.update(sl.stop - sl.start)
    return out


@dataclass
class AttributeCounts:
    """Per-attribute sums over items for every ordered judge pair, (A, J, J) int64, stable
    protocol: over all items (``signed``, ``joint``, ``cells``), over the pair's same-winner items
    (``same_signed``, ``same_joint``) and over its opposite-winner items (``opp_signed``,
    ``opp_joint``, ``opp_cells``)."""

    signed: np.ndarray
    joint: np.ndarray
    cells: np.ndarray
    same_signed: np.ndarray
    same_joint: np.ndarray
    opp_signed: np.ndarray
    opp_joint: np.ndarray
    opp_cells: np.ndarray

    def agree(self, stratum: str = "") -> np.ndarray:
        """(A, J, J) jointly resolved and equal cells over all items, ``same`` or ``opp`` items."""
        pre = f"{stratum}_" if stratum else ""
        return (getattr(self, f"{pre}joint") + getattr(self, f"{pre}signed")) // 2


def _per_attribute(z: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """(J, b, A) rows -> (A, J, J): per attribute, sum over the chunk's items of z_j w_k."""
    za = np.ascontiguousarray(z.transpose(2, 0, 1))
    wa = za if w is None else np.ascontiguousarray(w.transpose(2, 0, 1))
    return np.matmul(za, wa.transpose(0, 2, 1)).astype(np.int64)


def attribute_counts(panel: Panel, *, progress: bool = False) -> AttributeCounts:
    """``AttributeCounts`` of every judge pair (module doc: the same- and opposite-winner items
    through the verdict-weighted rows)."""
    s, p = panel.stable, panel.present
    n_j, n_i, n_c = s.shape
    acc = {k: np.zeros((n_c - 1, n_j, n_j), np.int64)
           for k in ("signed", "joint", "cells", "same_signed", "same_joint", "cross_signed", "cross_joint",
                     "cross_cells")}
    with _bar(progress, n_i, "pair statistics (per attribute)") as bar:
        for start in range(0, n_i, CHUNK):
            sl = slice(start, min(start + CHUNK, n_i))
            d = s[:, sl, :-1].astype(np.float32)
            a = np.abs(d)
            r = p[:, sl, :-1].astype(np.float32)
            v = s[:, sl, -1]
            pos = (v == 1).astype(np.float32)[:, :, None]
            neg = (v == -1).astype(np.float32)[:, :, None]
            acc["signed"] += _per_attribute(d)
            acc["joint"] += _per_attribute(a)
            acc["cells"] += _per_attribute(r)
            acc["same_signed"] += _per_attribute(pos * d) + _per_attribute(neg * d)
            acc["same_joint"] += _per_attribute(pos * a) + _per_attribute(neg * a)
            acc["cross_signed"] += _per_attribute(pos * d, neg * d)
            acc["cross_joint"] += _per_attribute(pos * a, neg * a)
            acc["cross_cells"] += _per_attribute(pos * r, neg * r)
            bar.update(sl.stop - sl.start)

    def sym(c: np.ndarray) -> np.ndarray:  # opposite winners: (+1, -1) or (-1, +1)
        return c + c.transpose(0, 2, 1)

    return AttributeCounts(acc["signed"], acc["joint"], acc["cells"], acc["same_signed"], acc["same_joint"],
                           sym(acc["cross_signed"]), sym(acc["cross_joint"]), sym(acc["cross_cells"]))
