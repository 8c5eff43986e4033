"""The sweep's outputs: OUT/summary.csv (one row per final run), OUT/report.md (per-arm means and
seed ranges, exact permutation tests between arms), OUT/share_vs_margin.png, OUT/arm_bars.png, and
the summary as a W&B table in the sweep's group."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmcore.io import atomic_save_figure, atomic_write_text
from rmcore.markdown import num, table
from rmeval.stats.permutation import exact_permutation_test
from rmtrain.findings import findings_markdown

FIGURES = ("heldout_pair_accuracy", "share_original", "share_generic", "transplant_random_margin_sd",
           "transplant_random_accuracy", "sibling_coefficient")
SUMMARY_COLUMNS = ("arm", "model", "seed", *FIGURES, "run_dir", "audit_dir")
LABELS = {"heldout_pair_accuracy": "held-out pair accuracy", "share_original": "between-prompt share",
          "share_generic": "share (generic prompt)", "transplant_random_margin_sd": "random-wrong-prompt margin (SD)",
          "transplant_random_accuracy": "random-wrong-prompt match accuracy",
          "sibling_coefficient": "sibling coefficient"}


def summary_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Ledger rows of the final (seed-stage) runs -> the summary table, in matrix order."""
    recs = []
    for r in rows:
        f = r.get("figures") or {}
        done = r.get("state") == "done"
        recs.append({"arm": r["arm"], "model": r["model"], "seed": r["seed"],
                     **{k: (f.get(k) if done else None) for k in FIGURES},
                     "run_dir": r.get("output_dir"), "audit_dir": r.get("audit_dir")})
    return pd.DataFrame(recs, columns=list(SUMMARY_COLUMNS))


def arm_table(df: pd.DataFrame, arms: list[str]) -> pd.DataFrame:
    """Per (model, arm): seeds finished, and each figure's mean, min and max over seeds."""
    recs = []
    for model in dict.fromkeys(df["model"]):
        for arm in arms:
            g = df[(df["model"] == model) & (df["arm"] == arm)]
            rec: dict[str, Any] = {"model": model, "arm": arm, "n_seeds": int(g["heldout_pair_accuracy"].notna().sum())}
            for k in FIGURES:
                v = pd.to_numeric(g[k], errors="coerce").dropna()
                rec[f"{k}_mean"] = float(v.mean()) if len(v) else float("nan")
                rec[f"{k}_min"] = float(v.min()) if len(v) else float("nan")
                rec[f"{k}_max"] = float(v.max()) if len(v) else float("nan")
            recs.append(rec)
    return pd.DataFrame(recs)


def arm_tests(df: pd.DataFrame, arms: list[str]) -> pd.DataFrame:
    """For every model, figure and pair of arms (A before B in recipe order): the exact one-sided
    p-values of A > B and of A < B on the seed values. Read the one your hypothesis names."""
    recs = []
    for model in dict.fromkeys(df["model"]):
        m = df[df["model"] == model]
        for k in FIGURES:
            for a, b in itertools.combinations(arms, 2):
                va = pd.to_numeric(m.loc[m["arm"] == a, k], errors="coerce").dropna().to_numpy()
                vb = pd.to_numeric(m.loc[m["arm"] == b, k], errors="coerce").dropna().to_numpy()
                if len(va) < 2 or len(vb) < 2:
                    continue
                gt = exact_permutation_test(va, vb, "greater")
                lt = exact_permutation_test(va, vb, "less")
                recs.append({"model": model, "figure": k, "arm_a": a, "arm_b": b, "n_a": len(va), "n_b": len(vb),
                             "difference": gt["difference"], "p_a_greater": gt["p_value"],
                             "p_a_less": lt["p_value"], "n_splits": gt["n_splits"]})
    return pd.DataFrame(recs)


def render_report(df: pd.DataFrame, arms: list[str], *, title: str, rows: list[dict[str, Any]],
                  selected: dict[str, Any], human_share: dict[str, float], plots: dict[str, str]) -> str:
    per_arm, tests = arm_table(df, arms), arm_tests(df, arms)
    n_done = sum(r["state"] == "done" for r in rows)
    lines = [f"# {title}", "", f"{n_done} of {len(rows)} runs finished (search runs included); "
             f"{len(df)} final runs in summary.csv.", ""]
    if selected:
        lines += ["## Selected settings (search stage, same grid and rule for every arm)", ""]
        lines += [f"- {k}: {v}" for k, v in selected.items()] + [""]
    for model in dict.fromkeys(df["model"]):
        t = per_arm[per_arm["model"] == model]
        lines += [f"## {model}: per-arm mean [seed range]", ""]
        if model in human_share:
            lines += [f"Human reference between-prompt share (the audit prompts' ratings): "
                      f"{num(human_share[model])}.", ""]
        lines += table(["arm", "seeds", *(LABELS[k] for k in FIGURES)],
                       [[r["arm"], r["n_seeds"], *(f"{num(r[f'{k}_mean'])} [{num(r[f'{k}_min'])}, {num(r[f'{k}_max'])}]"
                                                   for k in FIGURES)] for _, r in t.iterrows()])
        lines.append("")
        tm = tests[tests["model"] == model] if len(tests) else tests
        if len(tm):
            n = tm.iloc[0]
            lines += [f"### {model}: exact permutation tests between arms", "",
                      "One-sided tests of the difference in seed means, every split of the pooled seed values "
                      f"enumerated (e.g. {int(n['n_splits'])} splits for {int(n['n_a'])} against {int(n['n_b'])} "
                      f"seeds; the smallest possible p is 1/{int(n['n_splits'])} = {num(1 / n['n_splits'], 4)}). "
                      "Both directions are shown; read the one the hypothesis names before looking.", ""]
            lines += table(["figure", "A", "B", "mean A − mean B", "p (A > B)", "p (A < B)"],
                           [[LABELS[r["figure"]], r["arm_a"], r["arm_b"], num(r["difference"]), num(r["p_a_greater"], 4),
                             num(r["p_a_less"], 4)] for _, r in tm.iterrows()])
            lines.append("")
        # which of the study's arm orderings this sweep shows (rmtrain.findings), stated as seen
        lines += [findings_markdown(df[df["model"] == model], title=f"{model}: the study's findings on this sweep")]
    failed = [r for r in rows if r["state"] in ("failed", "blocked")]
    if failed:
        lines += ["## Runs that did not finish", ""]
        lines += table(["run", "state", "error"],
                       [[r["run_id"], r["state"], str(r.get("error") or "").replace("|", "/")] for r in failed])
        lines.append("")
    if plots:
        lines += ["## Plots", ""] + [f"![{k}]({Path(v).name})" for k, v in plots.items()] + [""]
    return "\n".join(lines)


def _arm_colours(arms: list[str]) -> dict[str, Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {a: cmap(i % 10) for i, a in enumerate(arms)}


def plot_share_vs_margin(df: pd.DataFrame, arms: list[str], human_share: dict[str, float], path: Path) -> Path:
    """Every run as a point: between-prompt share against random-wrong-prompt margin, by arm;
    the human reference share as a vertical line (one panel per model)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(df["model"]))
    colours = _arm_colours(arms)
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models) + 1.6, 4.2), squeeze=False)
    for ax, model in zip(axes[0], models):
        m = df[df["model"] == model]
        for arm in arms:
            g = m[m["arm"] == arm]
            ax.scatter(pd.to_numeric(g["share_original"]), pd.to_numeric(g["transplant_random_margin_sd"]),
                       color=colours[arm], label=arm, s=36, alpha=0.85)
        if model in human_share and np.isfinite(human_share[model]):
            ax.axvline(human_share[model], color="black", linestyle="--", linewidth=1, label="human share")
        ax.set_xlabel("between-prompt share (ICC(1) of scores)")
        ax.set_ylabel("random-wrong-prompt margin (SD)")
        ax.set_title(model, fontsize=10)
    # outside the axes: a legend inside can hide a run's point
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.tight_layout()
    return atomic_save_figure(fig, path, dpi=120)


def plot_arm_bars(df: pd.DataFrame, arms: list[str], path: Path) -> Path:
    """Per-arm means as bars with the seed range (min to max) as error bars, one row per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_arm = arm_table(df, arms)
    models = list(dict.fromkeys(df["model"]))
    colours = _arm_colours(arms)
    fig, axes = plt.subplots(len(models), len(FIGURES), figsize=(3.2 * len(FIGURES), 3.2 * len(models)),
                             squeeze=False)
    for i, model in enumerate(models):
        t = per_arm[per_arm["model"] == model].set_index("arm").reindex(arms)
        for j, k in enumerate(FIGURES):
            ax = axes[i][j]
            mean, lo, hi = t[f"{k}_mean"].to_numpy(), t[f"{k}_min"].to_numpy(), t[f"{k}_max"].to_numpy()
            err = np.vstack([np.nan_to_num(mean - lo), np.nan_to_num(hi - mean)])
            ax.bar(range(len(arms)), np.nan_to_num(mean), yerr=err, capsize=3,
                   color=[colours[a] for a in arms])
            ax.set_xticks(range(len(arms)))
            ax.set_xticklabels(arms, rotation=60, ha="right", fontsize=7)
            ax.set_title(f"{LABELS[k]}" + (f"\n{model}" if len(models) > 1 else ""), fontsize=8)
    fig.tight_layout()
    return atomic_save_figure(fig, path)


def write_outputs(out: Path, final_rows: list[dict[str, Any]], all_rows: list[dict[str, Any]], arms: list[str], *,
                  title: str, selected: dict[str, Any]) -> dict[str, Path]:
    df = summary_frame(final_rows)
    paths = {"summary": atomic_write_text(out / "summary.csv", df.to_csv(index=False))}
    human: dict[str, float] = {}
    for r in final_rows:
        v = (r.get("figures") or {}).get("share_human")
        if r.get("state") == "done" and v is not None:
            human.setdefault(r["model"], float(v))
    plots: dict[str, str] = {}
    if df[list(FIGURES)].notna().any().any():
        plots["share_vs_margin"] = str(plot_share_vs_margin(df, arms, human, out / "share_vs_margin.png"))
        plots["arm_bars"] = str(plot_arm_bars(df, arms, out / "arm_bars.png"))
    text = render_report(df, arms, title=title, rows=all_rows, selected=selected, human_share=human, plots=plots)
    paths["report"] = atomic_write_text(out / "report.md", text)
    paths.update({k: Path(v) for k, v in plots.items()})
    return paths


def log_to_wandb(paths: dict[str, Path], *, project: str, group: str, mode: str | None, out: Path,
                 entity: str | None = None, config: dict[str, Any] | None = None) -> None:
    """The summary as a W&B table (and the plots) in a run of the sweep's group."""
    from rmcore.tracking import Tracker

    tracker = Tracker(project=project, name=f"{group}-summary", group=group, job_type="sweep-summary",
                      mode=mode, dir=out / "wandb_summary", entity=entity, config={"sweep": group, **(config or {})})
    try:
        df = pd.read_csv(paths["summary"])
        rows = [[None if isinstance(v, float) and math.isnan(v) else v for v in row] for row in df.itertuples(index=False)]
        tracker.log_table("sweep/summary", list(df.columns), rows)
        for k in ("share_vs_margin", "arm_bars"):
            if k in paths:
                tracker.log_image(f"sweep/{k}", paths[k])
    finally:
        tracker.finish()
