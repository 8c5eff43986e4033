"""A simulated judge panel with planted perception and priorities (tests, demos, benchmarks).

Each item has a true direction per attribute (+1: A has more of it). Every judge perceives it the
same way up to read noise (shared perception), resolves it with probability ``detect``, and reads
each presentation order independently (a flip with probability ``flip``; a read naming the
first-shown response with probability ``position``). Its overall verdict is the sign of its own
planted weights times the true directions plus logistic noise, read in both orders the same way.
Reference labels come from a target weight vector.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .inventory import OVERALL


def _reads(true: np.ndarray, rng: np.random.Generator, detect: float, flip: float, position: float) -> dict:
    out = {}
    resolved = rng.random(true.shape) < detect
    for order in ("AB", "BA"):
        d = np.where(rng.random(true.shape) < flip, -true, true)
        first = 1 if order == "AB" else -1  # the original response shown first
        d = np.where(rng.random(true.shape) < position, first, d)
        out[order] = np.where(resolved, d, 0)
    return out


def simulate_panel(n_items: int, weights: dict[str, np.ndarray], *, attributes: list[str] | None = None,
                   detect: float = 0.8, flip: float = 0.05, position: float = 0.0, verdict_noise: float = 0.5,
                   target: np.ndarray | None = None, sources: tuple[str, ...] = ("sim",),
                   seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """(items, judgments, true directions (n_items, n_attributes)). ``weights``: judge -> planted
    weights; ``target``: weights behind the reference labels (default: the mean judge weights)."""
    rng = np.random.default_rng(seed)
    n_attr = len(next(iter(weights.values())))
    attrs = attributes or [f"attr_{k:02d}" for k in range(n_attr)]
    true = rng.choice([-1, 1], size=(n_items, n_attr))
    ids = [f"item{i:05d}" for i in range(n_items)]
    rows = []
    for judge, w in weights.items():
        reads = _reads(true, rng, detect, flip, position)
        u = true @ np.asarray(w, float) + verdict_noise * rng.logistic(size=n_items)
        v = np.where(u > 0, 1, -1)
        vreads = _reads(v[:, None], rng, 1.0, flip, position)
        for order in ("AB", "BA"):
            r = reads[order]
            for i in range(n_items):
                rows.extend({"item_id": ids[i], "judge": judge, "attribute": attrs[a], "order": order,
                             "direction": int(r[i, a])} for a in range(n_attr))
                rows.append({"item_id": ids[i], "judge": judge, "attribute": OVERALL, "order": order,
                             "direction": int(vreads[order][i, 0])})
    tw = np.mean(list(weights.values()), axis=0) if target is None else np.asarray(target, float)
    lab = true @ tw + verdict_noise * rng.logistic(size=n_items)
    items = pd.DataFrame({"item_id": ids, "source": [sources[i % len(sources)] for i in range(n_items)],
                          "query": [f"query {i}" for i in range(n_items)],
                          "response_a": [f"response A to {i}" for i in range(n_items)],
                          "response_b": [f"response B to {i}" for i in range(n_items)],
                          "label": np.where(lab > 0, "A", "B")})
    return items, pd.DataFrame(rows), true
