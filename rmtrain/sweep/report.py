"""The sweep's outputs: OUT/summary.csv (one row per final run), OUT/report.md (per-arm means and
seed ranges, exact permutation tests between arms), OUT/share_vs_margin.png, OUT/arm_bars.png, and
the summary as a W&B table in the sweep's group.

A final run that diverged or collapsed keeps its row in summary.csv, with its ``status`` and
``status_reason`` and every figure blank (as a failed run's), so the per-arm table, the tests, the
findings and the plots, which read the figures, leave it out; report.md lists every such run of
the sweep (search runs too) with its reason.

With the sweep's extra audits (``rmtrain.sweep.extra_audits``) the report gains sections, also
written to OUT/report.json: both selection rules side by side (``selection_rules``: per arm and
rule, the mean [seed range] of the audit's pair accuracy, share, random-prompt margin, match
accuracy and sibling coefficient, and the exact tests of the share and margin orderings under each
rule), the audit on each extra rating set (``extra_data``: the per-arm table on that set's
figures; summary.csv gains a ``<label>:<figure>`` column per rule and extra set), the pooled
sibling coefficient per arm and its contrast between arms on every audited rating set
(``sibling_contrast``, ``rmeval.stats.sibling_contrast``: the mean of the seeds' coefficients, a
prompt bootstrap shared by every run), and the released scorers' audits (``released_scorers``),
drawn as labelled points with their 95% intervals on the share-versus-margin plot of their rating
set (``share_vs_margin.png``, ``share_vs_margin.<label>.png``)."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmcore.io.files import atomic_save_figure, atomic_write_json, atomic_write_text
from rmcore.io.markdown import interval, num, table
from rmcore.io.tables import read_table
from rmcore.runtime.wandb_log import Tracker
from rmeval.stats.audit_sections import ROLES, sweep_figures
from rmeval.stats.permutation import exact_permutation_test
from rmeval.stats.sibling_contrast import pooled_sibling_contrast
from rmtrain.findings import findings_markdown
from rmtrain.sweep.ledger import usable

TRAINING_FIGURES = {"heldout_pair_accuracy": "held-out pair accuracy"}  # training's, first in summary.csv
RUN_COLUMNS = ("arm", "model", "seed", "status", "status_reason")
DIR_COLUMNS = ("run_dir", "audit_dir")


# The figure columns are views of the audit's sections (rmeval.stats.audit_sections.sweep_figures), read
# when asked: a section registered after this module loaded has its columns too.
def figure_columns() -> tuple[str, ...]:
    """The figures of a run in summary.csv: training's held-out pair accuracy, then its final
    audit's figures of role "run"."""
    return (*TRAINING_FIGURES, *sweep_figures("run"))


def summary_columns() -> tuple[str, ...]:
    """summary.csv's columns before any labelled audit's (``summary_frame``)."""
    return (*RUN_COLUMNS, *figure_columns(), *DIR_COLUMNS)


def labelled_figures() -> tuple[str, ...]:
    """The figures of an extra audit (another rating set, the other selection rule), its columns
    ``<label>:<figure>``: by role (its pair accuracy, the run's figures, the data's reference)."""
    return tuple(n for role in ROLES for n in sweep_figures(role))


def figure_labels() -> dict[str, str]:
    """Each figure's heading in report.md."""
    return {**TRAINING_FIGURES, **{n: f.label for n, f in sweep_figures().items()}}


def summary_frame(rows: list[dict[str, Any]], labels: Sequence[str] = ()) -> pd.DataFrame:
    """Ledger rows of the final (seed-stage) runs -> the summary table, in matrix order; with
    ``labels`` (selection rules, extra rating sets) a ``<label>:<figure>`` column per ``labelled_figures``.
    ``status``: the outcome of a finished run (ok, diverged, collapsed), else the ledger state;
    ``status_reason`` why it is not ok; figures only for ok runs (module doc)."""
    extra = [f"{lab}:{k}" for lab in labels for k in labelled_figures()]
    figures = figure_columns()
    recs = []
    for r in rows:
        f = r.get("figures") or {}
        done = usable(r)
        status = r.get("status", "ok") if r.get("state") == "done" else r.get("state")
        recs.append({"arm": r["arm"], "model": r["model"], "seed": r["seed"], "status": status,
                     "status_reason": None if done else (r.get("status_reason") or r.get("error")),
                     **{k: (f.get(k) if done else None) for k in figures},
                     "run_dir": r.get("output_dir"), "audit_dir": r.get("audit_dir"),
                     **{k: (f.get(k) if done else None) for k in extra}})
    return pd.DataFrame(recs, columns=[*summary_columns(), *extra])


def arm_table(df: pd.DataFrame, arms: list[str], figures: Sequence[str] | None = None,
              count: str | None = None) -> pd.DataFrame:
    """Per (model, arm): seeds finished (a value in ``count``, default the first of ``figures``),
    and each figure's mean, min and max over seeds (default figures: ``figure_columns``)."""
    figures = figure_columns() if figures is None else figures
    recs = []
    for model in dict.fromkeys(df["model"]):
        for arm in arms:
            g = df[(df["model"] == model) & (df["arm"] == arm)]
            rec: dict[str, Any] = {"model": model, "arm": arm,
                                   "n_seeds": int(pd.to_numeric(g[count or figures[0]], errors="coerce").notna().sum())}
            for k in figures:
                v = pd.to_numeric(g[k], errors="coerce").dropna()
                rec[f"{k}_mean"] = float(v.mean()) if len(v) else float("nan")
                rec[f"{k}_min"] = float(v.min()) if len(v) else float("nan")
                rec[f"{k}_max"] = float(v.max()) if len(v) else float("nan")
            recs.append(rec)
    return pd.DataFrame(recs)


def arm_tests(df: pd.DataFrame, arms: list[str], figures: Sequence[str] | None = None) -> pd.DataFrame:
    """For every model, figure (default: ``figure_columns``) and pair of arms (A before B in recipe
    order): the exact one-sided p-values of A > B and of A < B on the seed values. Read the one your
    hypothesis names."""
    figures = figure_columns() if figures is None else figures
    recs = []
    for model in dict.fromkeys(df["model"]):
        m = df[df["model"] == model]
        for k in figures:
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
                  selected: dict[str, Any], human_share: dict[str, float], plots: dict[str, str],
                  extra_lines: Sequence[str] = ()) -> str:
    per_arm, tests = arm_table(df, arms), arm_tests(df, arms)
    figures, labels = figure_columns(), figure_labels()
    n_done = sum(r["state"] == "done" for r in rows)
    n_lost = sum(r["state"] == "done" and not usable(r) for r in rows)
    lost = (f" ({n_lost} of them diverged or collapsed, [listed below](#runs-that-diverged-or-collapsed))"
            if n_lost else "")
    lines = [f"# {title}", "", f"{n_done} of {len(rows)} runs finished (search runs included){lost}; "
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
        lines += table(["arm", "seeds", *(labels[k] for k in figures)],
                       [[r["arm"], r["n_seeds"], *(f"{num(r[f'{k}_mean'])} [{num(r[f'{k}_min'])}, {num(r[f'{k}_max'])}]"
                                                   for k in figures)] for _, r in t.iterrows()])
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
                           [[labels[r["figure"]], r["arm_a"], r["arm_b"], num(r["difference"]),
                             num(r["p_a_greater"], 4), num(r["p_a_less"], 4)] for _, r in tm.iterrows()])
            lines.append("")
        # which of the study's arm orderings this sweep shows (rmtrain.findings), stated as seen
        lines += [findings_markdown(df[df["model"] == model], title=f"{model}: the study's findings on this sweep")]
    lines += list(extra_lines)
    lost = [r for r in rows if r["state"] == "done" and not usable(r)]
    if lost:
        lines += ["## Runs that diverged or collapsed", "",
                  "Finished, but left out of selection, the final audits and every figure above (their rows in "
                  "summary.csv have blank figures): `diverged` stopped at the first NaN or infinite loss or weight "
                  "and saved no model; `collapsed` scores every held-out text (nearly) the same "
                  "(training.collapse_sd).", ""]
        lines += table(["run", "stage", "status", "reason"],
                       [[r["run_id"], r.get("stage"), r.get("status"),
                         str(r.get("status_reason") or "").replace("|", "/")]
                        for r in lost])
        lines.append("")
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


def plot_share_vs_margin(df: pd.DataFrame, arms: list[str], human_share: dict[str, float], path: Path, *,
                         prefix: str = "", released: dict[str, dict[str, Any]] | None = None) -> Path:
    """Every run as a point: between-prompt share against random-wrong-prompt margin, by arm;
    the human reference share as a vertical line (one panel per model). ``prefix``: the columns of
    an extra audit (``<label>:``); ``released``: {label: figures with ``*_ci95``} of released
    scorers on the same rating set, drawn in every panel as labelled black diamonds with their 95%
    prompt-bootstrap intervals."""
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
            ax.scatter(pd.to_numeric(g[f"{prefix}share_original"]),
                       pd.to_numeric(g[f"{prefix}transplant_random_margin_sd"]),
                       color=colours[arm], label=arm, s=36, alpha=0.85)
        for i, (name, r) in enumerate((released or {}).items()):
            x, y = r.get("share_original"), r.get("transplant_random_margin_sd")
            if x is None or y is None:
                continue
            xe, ye = r.get("share_original_ci95"), r.get("transplant_random_margin_sd_ci95")
            ax.errorbar([x], [y], xerr=None if xe is None else [[max(x - xe[0], 0)], [max(xe[1] - x, 0)]],
                        yerr=None if ye is None else [[max(y - ye[0], 0)], [max(ye[1] - y, 0)]], fmt="D",
                        color="black", markersize=5, elinewidth=0.8, capsize=2,
                        label="released scorer (95% CI)" if i == 0 else None)
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
        if model in human_share and np.isfinite(human_share[model]):
            ax.axvline(human_share[model], color="black", linestyle="--", linewidth=1, label="human share")
        ax.set_xlabel("between-prompt share (ICC(1) of scores)")
        ax.set_ylabel("random-wrong-prompt margin (SD)")
        ax.set_title(model + (f" on {prefix[:-1]}" if prefix else ""), fontsize=10)
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
    figures, labels = figure_columns(), figure_labels()
    fig, axes = plt.subplots(len(models), len(figures), figsize=(3.2 * len(figures), 3.2 * len(models)),
                             squeeze=False)
    for i, model in enumerate(models):
        t = per_arm[per_arm["model"] == model].set_index("arm").reindex(arms)
        for j, k in enumerate(figures):
            ax = axes[i][j]
            mean, lo, hi = t[f"{k}_mean"].to_numpy(), t[f"{k}_min"].to_numpy(), t[f"{k}_max"].to_numpy()
            err = np.vstack([np.nan_to_num(mean - lo), np.nan_to_num(hi - mean)])
            ax.bar(range(len(arms)), np.nan_to_num(mean), yerr=err, capsize=3,
                   color=[colours[a] for a in arms])
            ax.set_xticks(range(len(arms)))
            ax.set_xticklabels(arms, rotation=60, ha="right", fontsize=7)
            ax.set_title(f"{labels[k]}" + (f"\n{model}" if len(models) > 1 else ""), fontsize=8)
    fig.tight_layout()
    return atomic_save_figure(fig, path)


def _human(df: pd.DataFrame, prefix: str = "") -> dict[str, float]:
    """Per model, the human share of the audit prompts (the same for every run)."""
    col = f"{prefix}share_human"
    if col not in df.columns:
        return {}
    return {m: float(v.iloc[0]) for m, g in df.groupby("model", sort=False)
            if len(v := pd.to_numeric(g[col], errors="coerce").dropna())}


def _spread(r: Any, k: str) -> str:
    return f"{num(r[f'{k}_mean'])} [{num(r[f'{k}_min'])}, {num(r[f'{k}_max'])}]"


def _relabel(df: pd.DataFrame, prefix: str) -> pd.DataFrame:
    """The ``<prefix>`` columns of an extra audit under the plain figure names (in place of the
    main audit's)."""
    ren = {f"{prefix}{k}": k for k in labelled_figures() if f"{prefix}{k}" in df.columns}
    return df.drop(columns=[c for c in ren.values() if c in df.columns]).rename(columns=ren)


def rules_section(df: pd.DataFrame, arms: list[str], rules: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Both selection rules side by side: per model, arm and rule, the mean [seed range] of the
    audit's figures, and the exact tests of the share and margin orderings under each rule."""
    figs = ("pair_accuracy", "share_original", "transplant_random_margin_sd", "transplant_random_accuracy",
            "sibling_coefficient")
    lines = ["## Selection rules side by side", "",
             "Each run's best checkpoint (by selection-split pair accuracy; the run's own) and its final-step "
             "checkpoint, audited on the same prompts; the learning rate was chosen once, by the recipe's rule. "
             "Pair accuracy here is the audit's, on the audit prompts' preference pairs.", ""]
    js: dict[str, Any] = {"rules": rules, "per_arm": [], "tests": []}
    labels = figure_labels()
    for model in dict.fromkeys(df["model"]):
        rows, test_rows = [], []
        for rule in rules:
            sub = _relabel(df, f"{rule}:")
            t = arm_table(sub, arms, figs, count="share_original")
            for _, r in t[t["model"] == model].iterrows():
                rows.append([r["arm"], rule, r["n_seeds"], *(_spread(r, k) for k in figs)])
                js["per_arm"].append({"rule": rule, **r.to_dict()})
            tests = arm_tests(sub[sub["model"] == model], arms, ("share_original", "transplant_random_margin_sd"))
            for _, r in tests.iterrows():
                test_rows.append([labels[r["figure"]], r["arm_a"], r["arm_b"], rule, num(r["difference"]),
                                  num(r["p_a_greater"], 4), num(r["p_a_less"], 4)])
                js["tests"].append({"rule": rule, **r.to_dict()})
        lines += [f"### {model}", ""]
        lines += table(["arm", "rule", "seeds", *(labels[k] for k in figs)], rows) + [""]
        if test_rows:
            lines += ["Exact permutation tests between arms on the seed values, under each rule:", ""]
            lines += table(["figure", "A", "B", "rule", "mean A − mean B", "p (A > B)", "p (A < B)"], test_rows) + [""]
    return lines, js


def extra_data_section(df: pd.DataFrame, arms: list[str], label: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The per-arm table of the audit on the extra rating set ``label``."""
    figs = ("pair_accuracy", "share_original", "share_generic", "transplant_random_margin_sd",
            "transplant_random_accuracy", "sibling_coefficient")
    sub = _relabel(df, f"{label}:")
    t = arm_table(sub, arms, figs, count="share_original")
    human, labels = _human(sub), figure_labels()
    lines = [f"## Audit on {label}", "",
             f"Every run's final checkpoint audited on the rating set `{label}` (sweep.extra_audit_data), with the "
             "same settings as the main audit.", ""]
    for model in dict.fromkeys(df["model"]):
        lines += [f"### {model}: per-arm mean [seed range] on {label}", ""]
        if model in human:
            lines += [f"Human reference between-prompt share on {label}: {num(human[model])}.", ""]
        lines += table(["arm", "seeds", *(labels[k] for k in figs)],
                       [[r["arm"], r["n_seeds"], *(_spread(r, k) for k in figs)]
                        for _, r in t[t["model"] == model].iterrows()]) + [""]
    return lines, t.to_dict(orient="records")


def _run_scores(audit_path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(original score, rating, prompt id) per response of a run's audit directory."""
    d = Path(audit_path)
    if not (d / "scores.parquet").is_file() or not (d / "audit.json").is_file():
        return None
    attribute = json.loads((d / "audit.json").read_text())["meta"]["attribute"]
    sc = read_table(d / "scores.parquet", "scores table")
    sc = sc[sc["condition"] == "original"][["prompt_id", "response_id", "score"]].astype({"prompt_id": str,
                                                                                        "response_id": str})
    rt = read_table(d / "ratings.parquet", "ratings table").astype({"prompt_id": str, "response_id": str})
    m = sc.merge(rt[["prompt_id", "response_id", attribute]], on=["prompt_id", "response_id"], how="left")
    return m["score"].to_numpy(float), m[attribute].to_numpy(float), m["prompt_id"].to_numpy()


def sibling_section(df: pd.DataFrame, arms: list[str], data_labels: list[str], *, n_boot: int,
                    seed: int) -> tuple[list[str], dict[str, Any]]:
    """The pooled sibling coefficient per arm and its contrasts between arms, per model and rating
    set ("" the main audit's), from the runs' audit directories."""
    # torch: this module loads without it
    from .extra_audits import audit_dir

    lines = ["## Pooled sibling coefficient", "",
             "Per arm, the mean over its seeds of the sibling-rating regression's sibling coefficient (each seed's "
             "z-scored score on the shown and the sibling rating), and the difference between arms; 95% percentile "
             "bootstrap over the audit prompts, the same resample for every seed and arm (paired contrasts, seeds "
             "fixed).", ""]
    js: dict[str, Any] = {}
    for lab in data_labels:
        for model in dict.fromkeys(df["model"]):
            m = df[df["model"] == model]
            runs: dict[str, list[Any]] = {}
            for _, r in m.iterrows():
                where = r["audit_dir"] if not lab else audit_dir(r["run_dir"], lab) if r["run_dir"] else None
                got = _run_scores(where) if isinstance(where, (str, Path)) and where else None
                if got is not None and r["arm"] in arms:
                    runs.setdefault(r["arm"], []).append(got)
            res = pooled_sibling_contrast({a: runs[a] for a in arms if a in runs}, n_boot=n_boot, seed=seed)
            if not res:
                continue
            js.setdefault(lab or "audit", {})[model] = res
            lines += [f"### {model}, {lab or 'main audit'}: {res['n_prompts']} prompts, {res['n_boot']} resamples", ""]
            lines += table(["arm", "seeds", "pooled sibling coefficient", "95% CI"],
                           [[a, v["n_seeds"], num(v["pooled"]["estimate"]), interval(v["pooled"])]
                            for a, v in res["arms"].items()]) + [""]
            if res["contrasts"]:
                lines += table(["contrast", "difference", "95% CI"],
                               [[k, num(v["estimate"]), interval(v)] for k, v in res["contrasts"].items()]) + [""]
    return (lines if js else []), js


def released_section(released: dict[str, Any], data_labels: list[str]) -> list[str]:
    """The released scorers' audits, one table per rating set."""
    lines = ["## Released scorers", "",
             "Released scorers (sweep.released_scorers) audited with the runs' audit settings on the same prompts; "
             "they are the black diamonds of the share-versus-margin plots.", ""]
    for lab in data_labels:
        rows = []
        for name, e in released.items():
            f = e["audits"].get(lab)
            if f is None:
                continue
            sh, mg = f.get("share_original_ci95"), f.get("transplant_random_margin_sd_ci95")
            rows.append([name, f"`{e['model']}`", e["kind"], num(f.get("pair_accuracy")), num(f.get("share_original")),
                         f"[{num(sh[0])}, {num(sh[1])}]" if sh else "", num(f.get("transplant_random_margin_sd")),
                         f"[{num(mg[0])}, {num(mg[1])}]" if mg else "", num(f.get("transplant_random_accuracy")),
                         num(f.get("sibling_coefficient"))])
        if rows:
            lines += [f"### {lab or 'main audit data'}", ""]
            lines += table(["scorer", "model", "kind", "pair accuracy", "share", "95% CI", "margin (SD)", "95% CI",
                            "match accuracy", "sibling coefficient"], rows) + [""]
    failed = [[n, f"`{e['model']}`", str(e["error"]).replace("|", "/")] for n, e in released.items() if e.get("error")]
    if failed:
        lines += ["Released scorers whose audit failed:", ""] + table(["scorer", "model", "error"], failed) + [""]
    return lines


def write_outputs(out: Path, final_rows: list[dict[str, Any]], all_rows: list[dict[str, Any]], arms: list[str], *,
                  title: str, selected: dict[str, Any], extra_data: Sequence[str] = (), rules: Sequence[str] = (),
                  released: dict[str, Any] | None = None, n_boot: int = 1000, seed: int = 0) -> dict[str, Path]:
    """summary.csv, report.md (and report.json with the sections of the extra audits) and the plots;
    ``extra_data``: the labels of sweep.extra_audit_data, ``rules``: the selection rules compared,
    ``released``: ``rmtrain.sweep.extra_audits.audit_released``'s result."""
    extra_data, rules = list(extra_data), list(rules)
    df = summary_frame(final_rows, [*rules, *extra_data])
    paths = {"summary": atomic_write_text(out / "summary.csv", df.to_csv(index=False))}
    human: dict[str, float] = {}
    for r in final_rows:
        v = (r.get("figures") or {}).get("share_human")
        if usable(r) and v is not None:
            human.setdefault(r["model"], float(v))
    released = released or {}
    plots: dict[str, str] = {}
    if df[list(figure_columns())].notna().any().any():
        plots["share_vs_margin"] = str(plot_share_vs_margin(
            df, arms, human, out / "share_vs_margin.png",
            released={n: e["audits"][""] for n, e in released.items() if "" in e["audits"]}))
        plots["arm_bars"] = str(plot_arm_bars(df, arms, out / "arm_bars.png"))
    for lab in extra_data:
        if df[f"{lab}:share_original"].notna().any():
            plots[f"share_vs_margin.{lab}"] = str(plot_share_vs_margin(
                df, arms, _human(df, f"{lab}:"), out / f"share_vs_margin.{lab}.png", prefix=f"{lab}:",
                released={n: e["audits"][lab] for n, e in released.items() if lab in e["audits"]}))
    extra: list[str] = []
    report: dict[str, Any] = {}
    if rules:
        lines, report["selection_rules"] = rules_section(df, arms, rules)
        extra += lines
    for lab in extra_data:
        lines, report.setdefault("extra_data", {})[lab] = extra_data_section(df, arms, lab)
        extra += lines
    lines, sib = sibling_section(df, arms, ["", *extra_data], n_boot=n_boot, seed=seed)
    if sib:
        report["sibling_contrast"] = sib
        extra += lines
    if released:
        report["released_scorers"] = released
        extra += released_section(released, ["", *extra_data])
    text = render_report(df, arms, title=title, rows=all_rows, selected=selected, human_share=human, plots=plots,
                         extra_lines=extra)
    paths["report"] = atomic_write_text(out / "report.md", text)
    if report:
        paths["report_json"] = atomic_write_json(out / "report.json", report)
    paths.update({k: Path(v) for k, v in plots.items()})
    return paths


def log_to_wandb(paths: dict[str, Path], *, project: str, group: str, mode: str | None, out: Path,
                 entity: str | None = None, config: dict[str, Any] | None = None) -> None:
    """The summary as a W&B table (and the plots) in a run of the sweep's group."""
    tracker = Tracker(project=project, name=f"{group}-summary", group=group, job_type="sweep-summary",
                      mode=mode, dir=out / "wandb_summary", entity=entity, config={"sweep": group, **(config or {})})
    try:
        df = pd.read_csv(paths["summary"])
        rows = [[None if isinstance(v, float) and math.isnan(v) else v for v in row]
                for row in df.itertuples(index=False)]
        tracker.log_table("sweep/summary", list(df.columns), rows)
        for k in paths:
            if k.startswith("share_vs_margin") or k == "arm_bars":
                tracker.log_image(f"sweep/{k}", paths[k])
    finally:
        tracker.finish()
