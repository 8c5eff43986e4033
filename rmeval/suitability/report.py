"""The suitability risk report: OUT/suitability.json, OUT/suitability.md (Markdown through
``rmcore.io.markdown``), and the figures: OUT/suitability.png (Cohen's d per perturbation, by
decision), OUT/suitability_structure.png (B.3: Spearman heat map of the per-item ΔM across
perturbations, ordered by the dendrogram drawn beside it; one per model, ``-<name>`` for a panel
written together), OUT/suitability_subsets.png (the per-subset radar of section 5.1.3: share of
models significant and summed d per perturbation, one polygon per subset). The same figures are
logged to W&B like the other audits.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rmcore.io.files import atomic_save_figure, atomic_write_json, atomic_write_text, is_finite
from rmcore.io.markdown import MISSING, num, table
from rmcore.runtime.wandb_log import flatten
from rmeval.suitability.run import model_json


def _num(v: Any, digits: int = 3) -> str:
    # a constant shift has an infinite d and t: printed, in 3 significant digits like any huge value
    return num(v, digits, large=1e4)


def _d_cell(r: dict[str, Any] | None) -> str:
    """Cohen's d with its stars, ✗ when unsuitable, · when only rejected; 'untested' without a test."""
    if r is None:
        return MISSING
    if not is_finite(r["p_value"]):
        return "untested"
    mark = " ✗" if r["unsuitable"] else (" ·" if r["rejected"] else "")
    return f"{_num(r['cohens_d'], 2)}{r['stars']}{mark}"


def _specs(results: Mapping[str, dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(s for r in results.values() for s in r["perturbations"]))


def _method(st: dict[str, Any], groups: dict[str, Any] | None) -> str:
    """The method paragraph; ``groups`` None: a panel (null shares per model, below)."""
    metric = ("M = log σ(r_chosen − r_rejected), the log confidence (Reward Auditor's released code)"
              if st.get("metric") == "log_confidence" else "M = σ(r_chosen − r_rejected), the confidence")
    mode = st.get("weighting", "storey")
    shares = ("per model below" if groups is None else
              ", ".join(f"{g} {_num(v['null_share'])}" for g, v in groups.items()) or "nothing tested")
    rule = {"storey": "null share per group estimated by Storey's estimator with the +1 at η = "
                      f"{st['eta']}", "fixed": "null shares fixed", "equal": "all null shares 1: plain BH"}[mode]
    m = st["m"]
    m_text = (f"m = {_num(m)}" if isinstance(m, (int, float)) else
              f"m per perturbation by the panel rule m = max{{d : p ≥ {st.get('alpha', 0.05)}}}: " +
              ", ".join(f"{k} {_num(v)}" for k, v in m.items()))
    paper = (f"the paper's procedure, group-aware Benjamini–Hochberg at q = {st['q']} over the L tested "
             f"perturbations: reject p ≤ q·k̂/(L·q_g), {rule} ({shares})")
    released = (f"the released script's procedure (hggzjx/RewardAuditor, scripts/audit_utils.py): plain "
                f"Benjamini–Hochberg at q = {st['q']} over every perturbation, an untestable one counted at p = 1")
    if st.get("procedure", "paper") == "released":
        decisions = (f"**Decisions shown: {released}**; stars (rejected tests only): p ≤ 0.05 *, 0.01 **, "
                     f"0.001 ***, 0.0001 ****. Beside them in suitability.json (`decisions.paper`): {paper}")
    else:
        decisions = (f"**Decisions shown: {paper}**; stars: p < 0.05 *, 0.01 **, 0.001 ***. Beside them in "
                     f"suitability.json (`decisions.released`): {released}")
    return (f"{metric}; ΔM = M − M′ (original minus perturbed) over every item, a twin the scorer cannot tell "
            f"from its original counting as 0. One-sided sign-flip permutation test of the paired t "
            f"(B = {st['B']}, seed {st['seed']}). {decisions}. "
            f"**Unsuitable** = rejected and d > m ({m_text}); suitability risk = sum of d over the unsuitable "
            "perturbations.")


def _decisions_line(r: dict[str, Any]) -> list[str]:
    """Both procedures' rejections, one sentence, the shown one first."""
    dec = r.get("decisions")
    if not dec:
        return []
    names = {"paper": "the paper's procedure", "released": "the released script's"}
    order = [dec["shown"], *(x for x in ("paper", "released") if x != dec["shown"])]
    parts = [f"{names[x]} (L = {dec[x]['L']}): {', '.join(dec[x]['rejected']) or 'none'}" for x in order]
    return ["Rejected by " + "; by ".join(parts) + ".", ""]


def _model_table(r: dict[str, Any]) -> list[str]:
    header = ["perturbation", "group", "n", "changed", "unchanged", "failed", "mean ΔM", "d", "d changed", "t",
              "p", "sig.", "BH threshold", "rejected", "unsuitable", "acc orig", "acc pert", "Δacc"]
    rows = []
    shown = r.get("decisions", {}).get("shown", "paper")
    for s, v in r["perturbations"].items():
        inv = v.get("n_invisible", 0)
        # the p the shown procedure counts: the released one counts an untestable perturbation at 1
        p_shown = v.get("decisions", {}).get(shown, {}).get("p_value", v["p_value"])
        rows.append([s, v["group"], v["n"], v["n_changed"], f"{v['n_unchanged']}" + (f" ({inv} unseen)" if inv else ""),
                     v.get("n_failed", 0), _num(v["mean_delta"], 4), _num(v["cohens_d"]),
                     _num(v["cohens_d_changed"]), _num(v["t"], 2), _num(p_shown, 4), v["stars"],
                     _num(v["bh_threshold"], 4), "yes" if v["rejected"] else "no",
                     "**yes**" if v["unsuitable"] else "no", _num(v["accuracy_original"]),
                     _num(v["accuracy_perturbed"]), _num(v["accuracy_change"])])
    return table(header, rows)


def _robustness_table(r: dict[str, Any]) -> list[str]:
    rows = [[s, _num(b["shapiro_w"]), _num(b["shapiro_p"], 4), _num(b["dagostino_k2"], 2), _num(b["dagostino_p"], 4),
             _num(b["median_delta"], 4), _num(b["p_permutation_t"], 4), _num(b["p_permutation_median"], 4),
             _num(b["p_permutation_trimmed_mean"], 4), _num(b["p_ttest"], 4), _num(b["p_wilcoxon"], 4)]
            for s, v in r["perturbations"].items() if (b := v.get("robustness"))]
    if not rows:
        return []
    return table(["perturbation", "Shapiro W", "p", "K²", "p", "median ΔM", "p t (sign flip)", "p median",
                  "p 20% trimmed mean", "p t-test", "p Wilcoxon"], rows)


def _structure_lines(st: dict[str, Any], figure: str | None) -> list[str]:
    lines = []
    if st.get("spearman"):
        codes = st["order"]
        lines += [f"Spearman ρ of per-item ΔM across perturbations ({st['n_items']} items with every twin), in "
                  f"dendrogram order (average linkage on 1 − ρ){f'; figure `{figure}`' if figure else ''}:", ""]
        lines += table(["", *codes], [[a, *(_num(st["spearman"][a][b], 2) for b in codes)] for a in codes])
    else:
        lines.append("Fewer than two perturbations with varying ΔM: no correlation structure.")
    if st.get("excluded"):
        lines += ["", "Left out: " + "; ".join(f"{c} ({why})" for c, why in st["excluded"].items()) + "."]
    return lines


def render_markdown(results: dict[str, dict[str, Any]], title: str = "Suitability risk report",
                    labels: Mapping[str, str] | None = None, figures: Mapping[str, str] | None = None) -> str:
    names = list(results)
    lab = {n: (labels or {}).get(n, n) for n in names}
    first = results[names[0]]
    summary = first.get("panel", {})
    specs = _specs(results)
    lines = [f"# {title}", "", _method(first["settings"], first.get("groups", {}) if len(names) == 1 else None), ""]
    meta = first.get("meta") or {}
    if meta.get("data"):  # what was read and what was left out, counted (nothing is dropped silently)
        left = {**meta.get("rows_skipped", {}), **meta.get("items_skipped", {})}
        out = "; ".join(f"{k.replace('_', ' ')} {v}" for k, v in left.items() if v)
        lines += [f"Data: {meta['data']}, {meta.get('n_items', '?')} items" + (f" (skipped: {out})." if out else "."),
                  ""]
    if meta.get("max_length"):
        lines += [f"Each text scored at up to {meta['max_length']} tokens"
                  + (f" (trained with {meta['training_max_length']})" if meta.get("training_max_length") else "")
                  + ".", ""]
    if len(names) > 1:
        lines += ["## Cohen's d per model (stars: p-value; ✗ unsuitable, · rejected)", ""]
        lines += table(["model", *specs, "risk"],
                       [[lab[n], *(_d_cell(results[n]["perturbations"].get(s)) for s in specs),
                         _num(results[n].get("suitability_risk"), 2)] for n in names])
        lines.append("")
    for n in names:
        r = results[n]
        lines += [f"## {lab[n] if len(names) > 1 else 'Per perturbation'}", ""]
        groups = ", ".join(f"{g}: null share {_num(v['null_share'])} ({v['n_tested']} tested)"
                           for g, v in r.get("groups", {}).items())
        lines += [f"Suitability risk {_num(r.get('suitability_risk'), 3)}; {groups or 'nothing tested'}.", ""]
        lines += _decisions_line(r)
        lines += _model_table(r)
        lines.append("")
        rob = _robustness_table(r)
        if rob:
            lines += ["### Robustness of the test (appendix B.1)", "",
                      "ΔM over every item: normality (Shapiro–Wilk; D'Agostino–Pearson K², n ≥ 20), the median "
                      "and 20%-trimmed mean under the same sign flips as the t, the paired t-test and the Wilcoxon "
                      "signed-rank test (one-sided, zeros dropped).", ""]
            lines += rob + [""]
        if "structure" in r:
            fig = (figures or {}).get(f"structure:{n}")
            lines += ["### Structure of the differences (appendix B.3)", ""] + _structure_lines(r["structure"], fig)
            lines.append("")
    agreement = summary.get("method_agreement")
    if agreement and agreement["n_cells"] >= 3:
        lines += [f"## Agreement of the tests across {agreement['n_cells']} cells (Spearman ρ of p-values)", ""]
        lines += table(["methods", "ρ", "p", "n"], [[k, _num(v["spearman"]), _num(v["p_value"], 4), v["n"]]
                                                    for k, v in agreement["pairs"].items()])
        lines.append("")
    gr = summary.get("group_risk")
    if gr:
        lines += ["## Does a model's vulnerability generalise across groups? (appendix B.3.1)", ""]
        groups = list(next(iter(gr["risk_by_group"].values())))
        lines += table(["model", *(f"risk {g}" for g in groups)],
                       [[lab.get(n, n), *(_num(v[g]) for g in groups)] for n, v in gr["risk_by_group"].items()])
        lines += [""] + table(["groups", "Spearman ρ", "p", "models"],
                              [[k, _num(v["spearman"]), _num(v["p_value"], 4), v["n_models"]]
                               for k, v in gr["pairs"].items()])
        lines.append("")
    if summary.get("subsets"):
        subs = summary["subsets"]
        fig = (figures or {}).get("subsets")
        lines += ["## Per subset (section 5.1.3)", "",
                  f"Each subset is its own audit (its own BH family and margins). Per perturbation: share of models "
                  f"with p < {first['settings'].get('alpha', 0.05)} / sum of their d"
                  f"{f'; radar `{fig}`' if fig else ''}.", ""]
        lines += table(["subset", *specs], [[sub, *(f"{_num(v[s]['share_significant'], 2)} / {_num(v[s]['sum_d'], 2)}"
                                                    if s in v else MISSING for s in specs)] for sub, v in subs.items()])
        lines.append("")
        for sub in subs:
            per = {n: results[n]["subsets"][sub] for n in names if sub in results[n].get("subsets", {})}
            lines += [f"### {sub}", ""]
            lines += table(["model", *specs, "risk"],
                           [[lab[n], *(_d_cell(x["perturbations"].get(s)) for s in specs),
                             _num(x.get("suitability_risk"), 2)] for n, x in per.items()])
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_effects(results: dict[str, dict[str, Any]], path: Path, labels: Mapping[str, str] | None = None) -> Path:
    """Bars of Cohen's d per perturbation (one bar per model), coloured by decision, stars above."""
    from matplotlib.patches import Patch

    plt = _plt()
    names = list(results)
    specs = _specs(results)
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(6.5, 0.75 * len(specs) * max(1, len(names) ** 0.5) + 2.5), 4.4))
    colors = {"unsuitable": "tab:red", "rejected": "tab:orange", "not rejected": "tab:gray"}
    for k, n in enumerate(names):
        for j, s in enumerate(specs):
            r = results[n]["perturbations"].get(s)
            x = j - 0.4 + width * (k + 0.5)
            if r is not None and not is_finite(r["p_value"]):
                ax.text(x, 0, "not\ntested", ha="center", va="bottom", fontsize=7, color="dimgray")
                continue
            if r is None or not is_finite(r["cohens_d"]):
                continue
            dec = "unsuitable" if r["unsuitable"] else ("rejected" if r["rejected"] else "not rejected")
            ax.bar(x, r["cohens_d"], width * 0.9, color=colors[dec], edgecolor="black", lw=0.4)
            if r["stars"]:
                ax.text(x, r["cohens_d"], r["stars"], ha="center", va="bottom" if r["cohens_d"] >= 0 else "top",
                        fontsize=8)
    m = results[names[0]]["settings"]["m"]
    if isinstance(m, (int, float)) and m > 0:
        ax.axhline(m, color="tab:red", ls="--", lw=0.9)
    elif isinstance(m, Mapping):  # the panel rule: one margin per perturbation, across its bars
        for j, s in enumerate(specs):
            if is_finite(m.get(s)) and m[s] > 0:
                ax.hlines(m[s], j - 0.45, j + 0.45, color="tab:red", ls="--", lw=0.9)
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set_xticks(range(len(specs)))
    ax.set_xticklabels(specs, rotation=30, ha="right")
    ax.set_ylabel("Cohen's d of ΔM (original − perturbed)")
    if len(names) > 1:
        lab = [(labels or {}).get(n, n) for n in names]
        ax.set_xlabel("bars per perturbation, left to right: " + ", ".join(lab), fontsize=8, wrap=True)
    who = f"{len(names)} models" if len(names) > 1 else (labels or {}).get(names[0], names[0])
    ax.set_title(f"Suitability: confidence drop per perturbation ({who})")
    handles = [Patch(color=c, label=lab) for lab, c in colors.items()]
    if isinstance(m, Mapping) or (isinstance(m, (int, float)) and m > 0):
        from matplotlib.lines import Line2D

        text = "margin m = max{d : p ≥ α}" if isinstance(m, Mapping) else f"margin m = {m:.2f}"
        handles.append(Line2D([], [], color="tab:red", ls="--", lw=0.9, label=text))
    ax.legend(handles=handles, fontsize=8, loc="best")
    fig.tight_layout()
    return atomic_save_figure(fig, path)


def plot_structure(structure: dict[str, Any], path: Path, title: str) -> Path | None:
    """Dendrogram (left) and the Spearman heat map in its order (B.3.2); None without a matrix."""
    if not structure.get("spearman"):
        return None
    from scipy.cluster.hierarchy import dendrogram

    plt = _plt()
    codes, order = structure["codes"], structure["order"]
    k = len(order)
    rho = np.array([[structure["spearman"][a][b] for b in order] for a in order])
    side = max(4.0, 0.55 * k + 2.5)
    fig, (ax_d, ax_h) = plt.subplots(1, 2, figsize=(side + 3.2, side * 0.8 + 0.8),
                                     gridspec_kw={"width_ratios": [1, 3]})
    dendrogram(np.array(structure["linkage"]), labels=codes, orientation="left", ax=ax_d, color_threshold=0,
               above_threshold_color="black", no_labels=True)
    # scipy puts leaf i at 5 + 10 i: the same rows as the heat map's, top to bottom
    ax_d.set_ylim(10 * k, 0)
    ax_d.set_yticks([])
    for side_name in ("top", "right", "left"):
        ax_d.spines[side_name].set_visible(False)
    ax_d.set_xlabel("1 − ρ")
    im = ax_h.imshow(rho, vmin=-1, vmax=1, cmap="RdBu_r", aspect="auto")
    ax_h.set_xticks(range(k))
    ax_h.set_xticklabels(order, rotation=45, ha="right", fontsize=8)
    ax_h.set_yticks(range(k))
    ax_h.set_yticklabels(order, fontsize=8)
    if k <= 12:
        for i in range(k):
            for j in range(k):
                ax_h.text(j, i, f"{rho[i, j]:.2f}", ha="center", va="center", fontsize=7,
                          color="white" if abs(rho[i, j]) > 0.6 else "black")
    fig.colorbar(im, ax=ax_h, fraction=0.046, pad=0.04, label="Spearman ρ of ΔM")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return atomic_save_figure(fig, path)


def plot_subsets(subsets: dict[str, dict[str, dict[str, Any]]], path: Path, alpha: float) -> Path | None:
    """Radar per measure (share of models with p < α; sum of d), one polygon per subset, one axis
    per perturbation; grouped bars when fewer than 3 perturbations. None without subsets."""
    if not subsets:
        return None
    plt = _plt()
    specs = list(dict.fromkeys(s for v in subsets.values() for s in v))
    measures = (("share_significant", f"share of models with p < {alpha}"), ("sum_d", "sum of Cohen's d"))
    colors = plt.get_cmap("tab10").colors
    if len(specs) >= 3:
        fig, axes = plt.subplots(1, 2, figsize=(11, 5.4), subplot_kw={"projection": "polar"})
        angles = np.linspace(0, 2 * np.pi, len(specs), endpoint=False)
        for ax, (key, label) in zip(axes, measures):
            lo = hi = 0.0
            for k, (sub, v) in enumerate(subsets.items()):
                vals = np.array([v.get(s, {}).get(key, np.nan) for s in specs], dtype=float)
                vals = np.nan_to_num(vals, nan=0.0)
                lo, hi = min(lo, vals.min()), max(hi, vals.max())
                ax.plot(np.append(angles, angles[0]), np.append(vals, vals[0]), color=colors[k % 10], lw=1.5,
                        label=sub)
                ax.fill(np.append(angles, angles[0]), np.append(vals, vals[0]), color=colors[k % 10], alpha=0.15)
            if key == "share_significant":
                ax.set_ylim(0, 1)
            else:  # a negative sum (more confident when perturbed) lies inside the dashed zero circle
                ax.set_ylim(lo, hi if hi > lo else lo + 1)
                if lo < 0:
                    ax.plot(np.linspace(0, 2 * np.pi, 200), np.zeros(200), color="black", ls="--", lw=0.8)
            ax.set_xticks(angles)
            ax.set_xticklabels(specs, fontsize=9)
            ax.tick_params(axis="y", labelsize=7)
            ax.set_title(label, pad=28, fontsize=10)
        # below the radars, where a long subset name cannot be cut off at the figure's edge
        fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=min(len(subsets), 5), fontsize=9,
                   frameon=False)
        fig.suptitle("Suitability per subset", fontsize=11)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        return atomic_save_figure(fig, path)
    else:
        fig, axes = plt.subplots(1, 2, figsize=(9, 4))
        width = 0.8 / len(subsets)
        for ax, (key, label) in zip(axes, measures):
            for k, (sub, v) in enumerate(subsets.items()):
                vals = [np.nan_to_num(v.get(s, {}).get(key, np.nan)) for s in specs]
                ax.bar(np.arange(len(specs)) - 0.4 + width * (k + 0.5), vals, width * 0.9, color=colors[k % 10],
                       label=sub)
            ax.set_xticks(range(len(specs)))
            ax.set_xticklabels(specs)
            ax.set_title(label, fontsize=10)
        axes[1].legend(fontsize=8)
    fig.suptitle("Suitability per subset", fontsize=11)
    fig.tight_layout()
    return atomic_save_figure(fig, path)


def _file_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def write_suitability(results: dict[str, dict[str, Any]], out: str | os.PathLike,
                      title: str = "Suitability risk report", labels: Mapping[str, str] | None = None
                      ) -> dict[str, Path]:
    """OUT/suitability.json, .md and the figures (module doc). One model: its record under
    ``perturbations.<code>`` (plus ``structure``, ``subsets`` and the ``summary``); several:
    ``models.<name>`` each, and ``settings`` and ``summary`` (margins, per-subset radar figures,
    agreement of the B.1 tests, group-risk correlation) for the panel."""
    out = Path(out)
    names = list(results)
    single = len(results) == 1
    first = results[names[0]]
    summary = first.get("panel", {})
    paths: dict[str, Path] = {}
    figures: dict[str, str] = {}
    paths["plot"] = plot_effects(results, out / "suitability.png", labels)
    for n in names:
        st = results[n].get("structure")
        if st:
            fname = "suitability_structure.png" if single else f"suitability_structure-{_file_part(n)}.png"
            lab = (labels or {}).get(n, n)
            p = plot_structure(st, out / fname, f"Per-item ΔM across perturbations: {lab}")
            if p is not None:
                paths[f"structure:{n}"] = p
                figures[f"structure:{n}"] = fname
    if summary.get("subsets"):
        p = plot_subsets(summary["subsets"], out / "suitability_subsets.png", first["settings"].get("alpha", 0.05))
        if p is not None:
            paths["subsets"], figures["subsets"] = p, p.name
    if single:
        doc = {**model_json(first), "summary": summary}
    else:
        doc = {"models": {n: {**model_json(r), "label": (labels or {}).get(n, n)} for n, r in results.items()},
               "settings": first["settings"], "summary": summary}
    paths["json"] = atomic_write_json(out / "suitability.json", doc)
    paths["markdown"] = atomic_write_text(out / "suitability.md", render_markdown(results, title, labels, figures))
    return paths


def log_suitability(tracker: Any, results: dict[str, dict[str, Any]], paths: Mapping[str, Path] | None = None,
                    step: int | None = None, prefix: str = "suitability") -> None:
    """Scalars per perturbation (and model), a table, and the figures, like the other audits."""
    if tracker is None or not tracker.enabled:
        return

    single = len(results) == 1
    scalars: dict[str, Any] = {}
    rows = []
    for n, r in results.items():
        base = prefix if single else f"{prefix}/{n}"
        if r.get("suitability_risk") is not None:
            scalars[f"{base}/suitability_risk"] = r["suitability_risk"]
        for s, v in r["perturbations"].items():
            flat = flatten({k: (float(x) if isinstance(x, bool) else x) for k, x in v.items()}, f"{base}/{s}")
            scalars.update({k: x for k, x in flat.items() if isinstance(x, (int, float))})
            rows.append([n, s, v["group"], v["n"], v["mean_delta"], v["cohens_d"], v["t"], v["p_value"],
                         v["rejected"], v["unsuitable"], v["accuracy_change"]])
    tracker.log(scalars, step=step)
    tracker.log_table(f"{prefix}/table", ["model", "perturbation", "group", "n", "mean_delta", "cohens_d", "t",
                                          "p_value", "rejected", "unsuitable", "accuracy_change"], rows, step=step)
    for key, p in (paths or {}).items():
        if key in ("json", "markdown"):
            continue
        tracker.log_image(f"{prefix}/{key.replace(':', '/')}", p, step=step)
