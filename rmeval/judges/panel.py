"""The judge panel: every judge's reads of every item-attribute cell as dense arrays, and the
primitives every JudgeProfile analysis shares (JudgeProfile, App. A.8-A.14).

A panel holds reads ``r^(o)`` in {-1, 0, +1} (+1: the original response A) per judge, item,
attribute and presentation order o in {AB, BA}, built from a judgment store
(``rmeval.judges.store``) or a long table. The *stable* direction is the one both orders agree on
(both resolved and equal), else 0; the *single read* is the order-AB read alone (the original A
shown first). ``Panel.reads(protocol)`` gives either with the cells it is defined on: a stable
direction needs both orders read, a single read the AB read.

Agreement of two judges on a set of cells is the share with equal directions, on the cells both
resolve (a 0 on either side leaves the cell out; coverage = resolved cells / cells both read).
Cohen's kappa is (p_o - p_e) / (1 - p_e) with p_e = sum_c p_j(c) p_k(c) from the two judges'
marginals over the categories present. A priority fit is an L2 logistic regression (C = 1, with
intercept, scikit-learn's lbfgs) of a verdict on attribute directions.

The attribute-level counts of every judge pair come from ``rmeval.judges.pairstats`` (Gram
matrices over all pairs at once), computed once per protocol and kept on the panel
(``Panel.counts``); the verdict-level figures, one value per item, are read from the arrays
directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rmcore.console.progress import Progress

from .inventory import OVERALL
from .pairstats import AttributeCounts, ProtocolCounts, attribute_counts, protocol_counts
from .store import MISSING, JudgmentStore, table_to_store

PROTOCOLS = ("stable", "single_read")


@dataclass
class Panel:
    """Stable directions as a dense array: ``stable[j, i, a]`` for judge j, item i, attribute a
    (the last attribute column is the overall verdict); ``present`` marks cells with both orders."""

    judges: list[str]
    items: list[str]
    attributes: list[str]  # without OVERALL
    stable: np.ndarray  # (J, I, A+1) int8
    present: np.ndarray  # (J, I, A+1) bool: both orders read
    consistent: np.ndarray  # (J, I, A+1) bool: both reads resolved and equal
    both_resolved: np.ndarray  # (J, I, A+1) bool: both reads non-zero
    first_reads: np.ndarray  # (J, 2) resolved attribute reads naming the first-shown response, all resolved
    first_reads_overall: np.ndarray  # (J, 2) the same for the overall verdict
    single: np.ndarray  # (J, I, A+1) int8: the read in order AB (0: unresolved or not read)
    single_seen: np.ndarray  # (J, I, A+1) bool: read in order AB
    progress: bool = field(default=False, compare=False)  # progress bars for the pair statistics
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def verdict(self) -> np.ndarray:
        return self.stable[:, :, -1]

    def reads(self, protocol: str = "stable") -> tuple[np.ndarray, np.ndarray]:
        """(directions, cells they are defined on) under ``stable`` (both orders) or ``single_read``
        (order AB only)."""
        if protocol == "stable":
            return self.stable, self.present
        if protocol == "single_read":
            return self.single, self.single_seen
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")

    def judge_index(self, judge: str) -> int:
        return self.judges.index(judge)

    def counts(self, protocol: str = "stable") -> ProtocolCounts:
        """Per-item attribute counts of every judge pair under ``protocol`` (computed once)."""
        key = ("counts", protocol)
        if key not in self._cache:
            self._cache[key] = protocol_counts(self, protocol, progress=self.progress)
        return self._cache[key]

    def core_counts(self, protocol: str, core: np.ndarray) -> ProtocolCounts:
        """The same over the attributes in the mask ``core`` only (computed once per mask)."""
        key = ("core", protocol, core.tobytes())
        if key not in self._cache:
            self._cache[key] = protocol_counts(self, protocol, columns=np.flatnonzero(core), progress=False)
        return self._cache[key]

    def attribute_counts(self) -> AttributeCounts:
        """Per-attribute counts of every judge pair (stable; computed once)."""
        if "attribute_counts" not in self._cache:
            self._cache["attribute_counts"] = attribute_counts(self, progress=self.progress)
        return self._cache["attribute_counts"]


def _columns(store: JudgmentStore, attributes: list[str] | None) -> list[str]:
    """The attributes a panel analyses: ``attributes``, else every attribute read by some judge
    (a long table names an attribute only where it has a row), sorted."""
    if attributes:
        return list(attributes)
    read = np.zeros(len(store.attributes), dtype=bool)
    for d in store.directions:
        read |= (np.asarray(d) != -128).any(axis=(0, 2))
    return sorted(a for a, r in zip(store.attributes, read) if r and a != OVERALL)


def _judge_cells(cells: np.ndarray, have: np.ndarray, src: np.ndarray, j: int, stable: np.ndarray,
                 single: np.ndarray, present: np.ndarray, consistent: np.ndarray, both: np.ndarray, seen: np.ndarray,
                 first: np.ndarray) -> None:
    """Fill judge ``j``'s rows of the panel's arrays from its store cells (items, attributes, orders)."""
    d = np.full((cells.shape[0], len(have), 2), MISSING, dtype=np.int8)
    d[:, have] = cells[:, src]
    ab, ba = d[..., 0], d[..., 1]
    seen[j] = ab != MISSING
    present[j] = seen[j] & (ba != MISSING)
    ab_res, ba_res = (ab == 1) | (ab == -1), (ba == 1) | (ba == -1)
    both[j] = ab_res & ba_res
    consistent[j] = both[j] & (ab == ba)
    stable[j] = np.where(consistent[j], ab, 0)
    single[j] = np.where(ab_res, ab, 0)
    # first-shown response: A in order AB (+1), B in order BA (-1)
    for k, sl in enumerate((np.s_[:, :-1], np.s_[:, -1])):
        first[j, k, 0] = np.count_nonzero(ab[sl] == 1) + np.count_nonzero(ba[sl] == -1)
        first[j, k, 1] = np.count_nonzero(ab_res[sl]) + np.count_nonzero(ba_res[sl])


def build_panel(judgments: pd.DataFrame | JudgmentStore, attributes: list[str] | None = None, *,
                progress: bool = False) -> Panel:
    """Judgment store (or a long judgments table, converted) -> Panel. Judges sorted, items in the
    store's order (a table's: order of first appearance). A cell read in only one order has no
    stable direction and is not ``present`` (it counts toward neither agreement nor coverage)."""
    store = judgments if isinstance(judgments, JudgmentStore) else table_to_store(judgments)
    judges = sorted(store.judges)
    attrs = _columns(store, attributes)
    cols = attrs + [OVERALL]
    pos = {a: n for n, a in enumerate(store.attributes)}
    have = np.array([c in pos for c in cols], dtype=bool)
    src = np.array([pos[c] for c in cols if c in pos], dtype=np.int64)
    shape = (len(judges), len(store.items), len(cols))
    stable = np.zeros(shape, dtype=np.int8)
    single = np.zeros(shape, dtype=np.int8)
    present = np.zeros(shape, dtype=bool)
    consistent = np.zeros(shape, dtype=bool)
    both = np.zeros(shape, dtype=bool)
    seen = np.zeros(shape, dtype=bool)
    first = np.zeros((len(judges), 2, 2), dtype=np.int64)  # judge, (attributes, overall), (first, resolved)

    with Progress("panel", len(judges), unit="judge", enabled=progress) as bar:
        for j, name in enumerate(judges):
            _judge_cells(np.asarray(store.judge(name)), have, src, j, stable, single, present, consistent, both,
                         seen, first)
            bar.update()
    return Panel(judges, list(store.items), attrs, stable, present, consistent, both, first[:, 0], first[:, 1],
                 single, seen, progress=progress)


def item_subset(panel: Panel, keep: np.ndarray) -> Panel:
    """The panel on the items of the mask ``keep`` only (its pair statistics computed afresh)."""
    k = np.asarray(keep, dtype=bool)
    return Panel(panel.judges, [i for i, x in zip(panel.items, k) if x], panel.attributes, panel.stable[:, k],
                 panel.present[:, k], panel.consistent[:, k], panel.both_resolved[:, k], panel.first_reads,
                 panel.first_reads_overall, panel.single[:, k], panel.single_seen[:, k])


def rate_or_none(num: float, den: float) -> float | None:
    """num / den, or None when there is nothing to divide by (den 0)."""
    return float(num / den) if den else None


def cohen_kappa(x: np.ndarray, y: np.ndarray) -> float | None:
    """Cohen's kappa (po - pe) / (1 - pe) with pe from the two raters' marginals."""
    if len(x) == 0:
        return None
    labels = np.union1d(x, y)
    po = float(np.mean(x == y))
    pe = float(sum(np.mean(x == c) * np.mean(y == c) for c in labels))
    return None if pe >= 1 else (po - pe) / (1 - pe)


def kappa_from_counts(n: int, n_equal: int, x_counts: tuple[int, ...], y_counts: tuple[int, ...]) -> float | None:
    """``cohen_kappa`` from counts: ``n`` cells, ``n_equal`` with equal labels, and each rater's count
    per label in ascending label order. The same floating-point operations in the same order as
    ``cohen_kappa`` on the cells themselves (a label neither rater uses adds nothing), so the same value."""
    if n == 0:
        return None
    po = float(n_equal / n)
    pe = 0
    for cx, cy in zip(x_counts, y_counts):
        if cx or cy:
            pe = pe + (cx / n) * (cy / n)
    pe = float(pe)
    return None if pe >= 1 else (po - pe) / (1 - pe)


@dataclass
class PairVerdicts:
    """Two judges' verdicts under a protocol: ``vj``, ``vk`` per item, ``read`` (both read) and
    ``definite`` (both read and resolved)."""

    vj: np.ndarray
    vk: np.ndarray
    read: np.ndarray
    definite: np.ndarray


def pair_verdicts(panel: Panel, j: int, k: int, protocol: str = "stable") -> PairVerdicts:
    s, p = panel.reads(protocol)
    vj, vk = s[j, :, -1], s[k, :, -1]
    read = p[j, :, -1] & p[k, :, -1]
    return PairVerdicts(vj, vk, read, read & (vj != 0) & (vk != 0))


def pair_agreement(panel: Panel, j: int, k: int, protocol: str = "stable") -> dict[str, Any]:
    """Agreement of judges j and k under ``protocol``: overall (items where both give a definite
    verdict) and attribute (cells where both resolve a direction; coverage = those cells / cells
    both read), split by items where their verdicts agree (same winner) or not (opposite winner),
    with Cohen's kappa on the same cells."""
    v = pair_verdicts(panel, j, k, protocol)
    c = panel.counts(protocol).pair(j, k)
    both_v, vj, vk = v.definite, v.vj, v.vk
    out: dict[str, Any] = {"judges": [panel.judges[j], panel.judges[k]]}
    out["overall"] = {"agreement": rate_or_none(np.sum(vj[both_v] == vk[both_v]), both_v.sum()), "n": int(both_v.sum()),
                      "kappa": cohen_kappa(vj[both_v], vk[both_v])}
    same = both_v & (vj == vk)
    opp = both_v & (vj != vk)
    for name, rows in (("attribute", None), ("same_winner", same), ("opposite_winner", opp)):
        joint, agree, cells, jpos, kpos = (x if rows is None else x[rows] for x in
                                           (c.joint, c.agree, c.cells, c.j_positive, c.k_positive))
        n, n_agree, n_pos_j, n_pos_k = joint.sum(), agree.sum(), jpos.sum(), kpos.sum()
        out[name] = {"agreement": rate_or_none(n_agree, n), "n": int(n), "coverage": rate_or_none(n, cells.sum()),
                     "kappa": kappa_from_counts(int(n), int(n_agree), (int(n - n_pos_j), int(n_pos_j)),
                                                (int(n - n_pos_k), int(n_pos_k)))}
    return out


def mean_or_none(values: list[float | None]) -> float | None:
    """The mean of the values that are not None; None when there are none."""
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


def one_blas_thread():
    """Small logistic fits run fastest on one BLAS thread; several threads spin-wait on each other
    (10x slower on a busy 2-core machine). scikit-learn's lbfgs runs in scipy, whose BLAS is a
    library of its own: it is loaded first, since a limit applies only to the libraries loaded when
    it is set (a fit importing scipy inside the limit ran on two threads, 11x the CPU time)."""
    import scipy.optimize  # noqa: F401 - loads scipy's BLAS
    import sklearn.linear_model  # noqa: F401
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def logistic_regression(seed: int = 0) -> Any:
    """The logistic fit every analysis shares: L2 with C = 1, an intercept, seeded (sklearn)."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1.0, l1_ratio=0.0, fit_intercept=True, max_iter=2000, random_state=seed)


def fit_weights(x: np.ndarray, y: np.ndarray, seed: int = 0) -> tuple[np.ndarray, float] | None:
    if len(np.unique(y)) < 2:
        return None
    m = logistic_regression(seed).fit(x, y)
    return m.coef_[0].astype(float), float(m.intercept_[0])
