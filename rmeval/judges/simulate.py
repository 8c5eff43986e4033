"""A simulated judge panel with planted perception and priorities (tests, demos, benchmarks).

Each item has a true direction per attribute (+1: A has more of it). Every judge perceives it the
same way up to read noise (shared perception), resolves it with probability ``detect``, and reads
each presentation order independently (a flip with probability ``flip``; a read naming the
first-shown response with probability ``position``). Its overall verdict is the sign of its own
planted weights times the true directions plus logistic noise, read in both orders the same way.
Reference labels come from a target weight vector.

Every draw is an array operation over items and attributes, judge by judge, so the published size
(50,013 items x 21 judges x 87 attributes) takes seconds; ``simulate_store`` returns the judgments
as a judgment store (``rmeval.judges.store``), ``simulate_panel`` as the long table, both from the
same draws.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .inventory import OVERALL
from .store import JudgmentStore, store_to_table

N_SOURCES = 17  # JudgeProfile's SubjectiveSet: 50,013 pairs from 17 sources


def _reads(true: np.ndarray, rng: np.random.Generator, detect: float, flip: float, position: float) -> dict:
    out = {}
    resolved = rng.random(true.shape) < detect
    for order in ("AB", "BA"):
        d = np.where(rng.random(true.shape) < flip, -true, true)
        first = 1 if order == "AB" else -1  # the original response shown first
        d = np.where(rng.random(true.shape) < position, first, d)
        out[order] = np.where(resolved, d, 0)
    return out


def simulate_store(n_items: int, weights: dict[str, np.ndarray], *, attributes: list[str] | None = None,
                   detect: float = 0.8, flip: float = 0.05, position: float = 0.0, verdict_noise: float = 0.5,
                   target: np.ndarray | None = None, sources: tuple[str, ...] = ("sim",),
                   seed: int = 0) -> tuple[pd.DataFrame, JudgmentStore, np.ndarray]:
    """(items, judgments as a store, true directions (n_items, n_attributes)). ``weights``: judge ->
    planted weights; ``target``: weights behind the reference labels (default: the mean judge
    weights). The store's attributes are ``attributes`` then ``overall``."""
    rng = np.random.default_rng(seed)
    n_attr = len(next(iter(weights.values())))
    attrs = attributes or [f"attr_{k:02d}" for k in range(n_attr)]
    true = rng.choice([-1, 1], size=(n_items, n_attr))
    ids = [f"item{i:05d}" for i in range(n_items)]
    arrays = []
    for w in weights.values():
        reads = _reads(true, rng, detect, flip, position)
        u = true @ np.asarray(w, float) + verdict_noise * rng.logistic(size=n_items)
        v = np.where(u > 0, 1, -1)
        vreads = _reads(v[:, None], rng, 1.0, flip, position)
        d = np.empty((n_items, n_attr + 1, 2), dtype=np.int8)
        for o, order in enumerate(("AB", "BA")):
            d[:, :n_attr, o] = reads[order]
            d[:, n_attr, o] = vreads[order][:, 0]
        arrays.append(d)
    tw = np.mean(list(weights.values()), axis=0) if target is None else np.asarray(target, float)
    lab = true @ tw + verdict_noise * rng.logistic(size=n_items)
    items = pd.DataFrame({"item_id": ids, "source": [sources[i % len(sources)] for i in range(n_items)],
                          "query": [f"query {i}" for i in range(n_items)],
                          "response_a": [f"response A to {i}" for i in range(n_items)],
                          "response_b": [f"response B to {i}" for i in range(n_items)],
                          "label": np.where(lab > 0, "A", "B")})
    return items, JudgmentStore(list(weights), ids, [*attrs, OVERALL], arrays), true


def simulate_panel(n_items: int, weights: dict[str, np.ndarray], **kwargs) -> tuple[pd.DataFrame, pd.DataFrame,
                                                                                        np.ndarray]:
    """``simulate_store`` with the judgments as the long table (``item_id, judge, attribute, order,
    direction``), rows judge by judge, order by order, item by item, attribute by attribute with
    the verdict last."""
    items, store, true = simulate_store(n_items, weights, **kwargs)
    table = store_to_table(store)
    # store_to_table gives judge, item, order, attribute; a stable sort on (judge, order) keeps the rest
    order = np.lexsort(((table["order"] == "BA").to_numpy(),
                        pd.Categorical(table["judge"], categories=store.judges).codes))
    return items, table.iloc[order].reset_index(drop=True), true


def planted_weights(n_judges: int, n_attributes: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The benchmarks' judges: a shared profile plus each judge's own deviation (SD 0.7 of it),
    scaled so that the attribute part of a verdict has SD about 2 (verdicts right about 85% of
    the time against their own weights)."""
    rng = np.random.default_rng([seed, 1])
    base = rng.normal(0, 1, n_attributes)
    return {f"judge{j:02d}": (base + rng.normal(0, 0.7, n_attributes)) * 2 / np.sqrt(n_attributes)
            for j in range(n_judges)}


def simulate_benchmark(n_items: int, n_judges: int, n_attributes: int, seed: int = 0
                       ) -> tuple[pd.DataFrame, JudgmentStore]:
    """The scale benchmark's panel: ``planted_weights`` judges, 17 sources, a 5% first-position
    read bias, reference labels from the mean weights."""
    items, store, _ = simulate_store(n_items, planted_weights(n_judges, n_attributes, seed),
                                     sources=tuple(f"source{k:02d}" for k in range(N_SOURCES)), position=0.05,
                                     seed=seed)
    return items, store
