"""The suitability risk report: OUT/suitability.json, OUT/suitability.md (Markdown through
``rmcore.markdown``), OUT/suitability.png (Cohen's d per perturbation, by decision), and the same
figures logged to W&B like the other audits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rmcore.io import atomic_save_figure, atomic_write_json, atomic_write_text
from rmcore.markdown import MISSING, num, table
from rmeval.suitability.run import model_json


def _num(v: Any, digits: int = 3) -> str:
    # a constant shift has an infinite d and t: printed, in 3 significant digits like any huge value
    return num(v, digits, large=1e4)


def _d_cell(r: dict[str, Any] | None) -> str:
    """Cohen's d with its stars, ✗ when unsuitable, · when only rejected."""
    if r is None:
        return MISSING
    mark = " ✗" if r["unsuitable"] else (" ·" if r["rejected"] else "")
    return f"{_num(r['cohens_d'], 2)}{r['stars']}{mark}"


def render_markdown(results: dict[str, dict[str, Any]], title: str = "Suitability risk report") -> str:
    names = list(results)
    first = results[names[0]]
    st = first["settings"]
    specs = list(dict.fromkeys(s for r in results.values() for s in r["perturbations"]))
    m = st["m"]
    m_text = (f"m = {_num(m)}" if isinstance(m, (int, float)) else
              "m per perturbation by the panel rule (largest d among models not rejected): " +
              ", ".join(f"{k} {_num(v)}" for k, v in m.items()))
    lines = [f"# {title}", "",
             f"Paired confidence drop ΔM = M − M′ (original minus perturbed); one-sided sign-flip permutation "
             f"test of the paired t (B = {st['B']}, seed {st['seed']}), group-aware Benjamini–Hochberg at "
             f"q = {st['q']} (η = {st['eta']}, weighting {st['weighting']}); stars: p < 0.05 *, 0.01 **, "
             f"0.001 ***; **unsuitable** = rejected and d > m ({m_text}).", ""]
    if len(names) > 1:
        lines += ["## Cohen's d per model (stars: p-value; ✗ unsuitable, · rejected)", ""]
        lines += table(["model", *specs], [[n, *(_d_cell(results[n]["perturbations"].get(s)) for s in specs)]
                                           for n in names])
        lines.append("")
    header = ["perturbation", "group", "n", "changed", "unchanged", "failed", "mean ΔM", "d", "t", "p", "",
              "rejected", "unsuitable", "acc orig", "acc pert", "Δacc"]
    for n in names:
        if len(names) > 1:
            lines += [f"## {n}", ""]
        lines += table(header, [[
            s, r["group"], r["n"], r.get("n_changed", r["n"]), r.get("n_unchanged", 0), r.get("n_failed", 0),
            _num(r["mean_delta"], 4), _num(r["cohens_d"]), _num(r["t"], 2), _num(r["p_value"], 4), r["stars"],
            "yes" if r["rejected"] else "no", "**yes**" if r["unsuitable"] else "no", _num(r["accuracy_original"]),
            _num(r["accuracy_perturbed"]), _num(r["accuracy_change"])] for s, r in results[n]["perturbations"].items()])
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def plot_effects(results: dict[str, dict[str, Any]], path: Path) -> Path:
    """Bars of Cohen's d per perturbation (one bar per model), coloured by decision, stars above."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    names = list(results)
    specs = list(dict.fromkeys(s for r in results.values() for s in r["perturbations"]))
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.7 * len(specs) * max(1, len(names) ** 0.5) + 2), 3.8))
    colors = {"unsuitable": "tab:red", "rejected": "tab:orange", "not rejected": "tab:gray"}
    for k, n in enumerate(names):
        for j, s in enumerate(specs):
            r = results[n]["perturbations"].get(s)
            if r is None or not np.isfinite(r["cohens_d"]):
                continue
            dec = "unsuitable" if r["unsuitable"] else ("rejected" if r["rejected"] else "not rejected")
            x = j - 0.4 + width * (k + 0.5)
            ax.bar(x, r["cohens_d"], width * 0.9, color=colors[dec], edgecolor="black", lw=0.4)
            if r["stars"]:
                ax.text(x, r["cohens_d"], r["stars"], ha="center", va="bottom" if r["cohens_d"] >= 0 else "top",
                        fontsize=8)
    m = results[names[0]]["settings"]["m"]
    if isinstance(m, (int, float)) and m > 0:
        ax.axhline(m, color="tab:red", ls="--", lw=0.8, label=f"margin m = {m:.2f}")
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set_xticks(range(len(specs)))
    ax.set_xticklabels(specs, rotation=30, ha="right")
    ax.set_ylabel("Cohen's d of ΔM (original − perturbed)")
    if len(names) > 1:
        ax.set_xlabel("bars per perturbation, left to right: " + ", ".join(names), fontsize=8)
    ax.set_title("Suitability: confidence drop per perturbation" + (f" ({len(names)} models)" if len(names) > 1 else ""))
    ax.legend(handles=[Patch(color=c, label=lab) for lab, c in colors.items()], fontsize=8, loc="best")
    fig.tight_layout()
    return atomic_save_figure(fig, path)


def write_suitability(results: dict[str, dict[str, Any]], out: str | os.PathLike,
                      title: str = "Suitability risk report") -> dict[str, Path]:
    """OUT/suitability.json, OUT/suitability.md, OUT/suitability.png. One model: its record under
    ``perturbations.<code>``; several: ``models.<name>.perturbations.<code>`` and the margins."""
    out = Path(out)
    if len(results) == 1:
        doc = model_json(next(iter(results.values())))
    else:
        first = next(iter(results.values()))
        doc = {"models": {n: model_json(r) for n, r in results.items()}, "settings": first["settings"]}
    return {"json": atomic_write_json(out / "suitability.json", doc),
            "markdown": atomic_write_text(out / "suitability.md", render_markdown(results, title)),
            "plot": plot_effects(results, out / "suitability.png")}


def log_suitability(tracker: Any, results: dict[str, dict[str, Any]], paths: Mapping[str, Path] | None = None,
                    step: int | None = None, prefix: str = "suitability") -> None:
    """Scalars per perturbation (and model), a table, and the plot, like the other audits."""
    if tracker is None or not tracker.enabled:
        return
    from rmcore.tracking import flatten

    single = len(results) == 1
    scalars: dict[str, Any] = {}
    rows = []
    for n, r in results.items():
        base = prefix if single else f"{prefix}/{n}"
        for s, v in r["perturbations"].items():
            flat = flatten({k: (float(x) if isinstance(x, bool) else x) for k, x in v.items()}, f"{base}/{s}")
            scalars.update({k: x for k, x in flat.items() if isinstance(x, (int, float))})
            rows.append([n, s, v["group"], v["n"], v["mean_delta"], v["cohens_d"], v["t"], v["p_value"],
                         v["rejected"], v["unsuitable"], v["accuracy_change"]])
    tracker.log(scalars, step=step)
    tracker.log_table(f"{prefix}/table", ["model", "perturbation", "group", "n", "mean_delta", "cohens_d", "t",
                                          "p_value", "rejected", "unsuitable", "accuracy_change"], rows, step=step)
    if paths and "plot" in paths:
        tracker.log_image(f"{prefix}/plot", paths["plot"], step=step)
