"""Figures (matplotlib, Agg): judge-pair agreement heatmap and attribute weight profiles."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def agreement_heatmap(analysis: dict[str, Any], path: str | os.PathLike) -> Path:
    """Judge x judge: attribute agreement (stable, jointly resolved) above the diagonal, overall
    verdict agreement below it."""
    plt = _plt()
    judges = list(analysis["judges"])
    n = len(judges)
    m = np.full((n, n), np.nan)
    for p in analysis["agreement"]["pairs"]:
        i, j = judges.index(p["judges"][0]), judges.index(p["judges"][1])
        a, o = p["attribute"]["agreement"], p["overall"]["agreement"]
        m[min(i, j), max(i, j)] = np.nan if a is None else a
        m[max(i, j), min(i, j)] = np.nan if o is None else o
    fig, ax = plt.subplots(figsize=(1.2 + 0.5 * n, 1.0 + 0.5 * n))
    im = ax.imshow(m, vmin=0.5, vmax=1.0, cmap="viridis")
    ax.set_xticks(range(n), judges, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(n), judges, fontsize=7)
    for i in range(n):
        for j in range(n):
            if np.isfinite(m[i, j]):
                ax.text(j, i, f"{100 * m[i, j]:.0f}", ha="center", va="center", fontsize=6, color="w")
    ax.set_title("agreement: attribute (upper) / overall (lower)", fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def weight_profiles(weights: dict[str, dict[str, float]], path: str | os.PathLike, *, top: int = 30,
                    title: str = "attribute weights") -> Path:
    """One line per profile (judge or judge/source) over the ``top`` attributes by mean |weight|."""
    plt = _plt()
    names = [k for k, v in weights.items() if v]
    attrs = list(weights[names[0]])
    mat = np.array([[weights[k][a] for a in attrs] for k in names])
    order = np.argsort(-np.abs(mat).mean(axis=0))[:top]
    fig, ax = plt.subplots(figsize=(max(6, 0.28 * len(order) + 2), 3.6))
    for k, row in zip(names, mat):
        ax.plot(range(len(order)), row[order], marker="o", ms=3, lw=1, label=k)
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xticks(range(len(order)), [attrs[i] for i in order], rotation=70, ha="right", fontsize=6)
    ax.set_ylabel("logistic weight")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
