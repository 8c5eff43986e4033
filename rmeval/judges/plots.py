"""Figures (matplotlib, Agg): judge-pair agreement heatmap and attribute weight profiles.

``analysis_plots`` draws those an analysis can show: the weight profiles need one judge with a
priority fit (stable verdicts of both kinds), the heatmap two judges; ``plots_not_drawn`` says in
one line each why a figure is missing (the CLI's stderr and ``analysis.md`` carry it).

Both are sized from their content (judges, attributes, the longest label) with a floor that fits
the title, laid out by matplotlib's constrained layout (nothing cut at the edges), and written
atomically (``rmcore.io.files.atomic_save_figure``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from rmcore.io.files import atomic_save_figure


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plots_not_drawn(analysis: dict[str, Any]) -> list[str]:
    """One line per figure of ``analysis_plots`` that ``analysis`` cannot draw, saying why."""
    judges = analysis["judges"]
    names = ", ".join(judges)
    notes = []
    if not any(j["weights"] for j in judges.values()):
        notes.append(f"weight_profiles.png not drawn: no judge has a priority fit (stable verdicts of both kinds) "
                     f"among {len(judges)} ({names})")
    if len(judges) < 2:
        notes.append(f"agreement_heatmap.png not drawn: agreement needs two judges, the judgments hold {len(judges)} "
                     f"({names})")
    return notes


def analysis_plots(analysis: dict[str, Any], out: str | os.PathLike) -> dict[str, Path]:
    """OUT/weight_profiles.png (the judges with a priority fit) and OUT/agreement_heatmap.png (two
    judges or more), those that ``analysis`` can draw; {name: path}."""
    out = Path(out)
    images: dict[str, Path] = {}
    fitted = {k: v["weights"] for k, v in analysis["judges"].items() if v["weights"]}
    if fitted:
        images["weight_profiles"] = weight_profiles(fitted, out / "weight_profiles.png",
                                                    title="priority weights (own verdicts)")
    if len(analysis["judges"]) > 1:
        images["agreement_heatmap"] = agreement_heatmap(analysis, out / "agreement_heatmap.png")
    return images


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
    label = max((len(j) for j in judges), default=1)
    side = max(3.0, 0.45 * n)  # the matrix itself, inches
    pad = 0.075 * label  # room for the rotated and the left tick labels
    fig, ax = plt.subplots(figsize=(max(5.0, side + pad + 1.6), max(4.2, side + pad + 1.0)), layout="constrained")
    # the scale starts at the balanced-random 0.5 unless a pair agrees less (nothing is clipped)
    low = min(0.5, np.floor(10 * np.nanmin(m)) / 10) if np.isfinite(m).any() else 0.5
    im = ax.imshow(100 * m, vmin=100 * low, vmax=100.0, cmap="viridis")  # percent, as the cells read
    fs = 8 if n <= 12 else 6
    ax.set_xticks(range(n), judges, rotation=60, ha="right", rotation_mode="anchor", fontsize=fs)
    ax.set_yticks(range(n), judges, fontsize=fs)
    for i in range(n):
        for j in range(n):
            if np.isfinite(m[i, j]):
                light = m[i, j] > low + 0.6 * (1.0 - low)  # dark text on the light end of viridis
                ax.text(j, i, f"{100 * m[i, j]:.0f}", ha="center", va="center", fontsize=fs,
                        color="black" if light else "white")
    ax.set_title("judge-pair agreement (%)\nabove diagonal: attributes; below: overall verdict", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, label="agreement (%)")
    return atomic_save_figure(fig, path, dpi=130)


def weight_profiles(weights: dict[str, dict[str, float]], path: str | os.PathLike, *, top: int = 30,
                    title: str = "attribute weights") -> Path:
    """One line per profile (judge or judge/source) over the ``top`` attributes by mean |weight|."""
    plt = _plt()
    names = [k for k, v in weights.items() if v]
    attrs = list(weights[names[0]])
    mat = np.array([[weights[k][a] for a in attrs] for k in names])
    order = np.argsort(-np.abs(mat).mean(axis=0))[:top]
    label = max(len(k) for k in names)
    legend_width = 0.9 + 0.055 * label  # the legend sits right of the axes, never over the lines
    fig, ax = plt.subplots(figsize=(max(6, 0.28 * len(order) + 2) + legend_width, 4.0), layout="constrained")
    cmap = plt.get_cmap("tab20" if len(names) > 10 else "tab10")
    for n, (k, row) in enumerate(zip(names, mat)):
        ax.plot(range(len(order)), row[order], marker="o", ms=3, lw=1, label=k, color=cmap(n % cmap.N))
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xticks(range(len(order)), [attrs[i] for i in order], rotation=70, ha="right", rotation_mode="anchor",
                  fontsize=6)
    ax.set_ylabel("logistic weight")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return atomic_save_figure(fig, path, dpi=130)
