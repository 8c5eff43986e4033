"""Reweighting: steer a judge toward a source's reference labels by refitting only its attribute
weights, keeping the model and its attribute judgments fixed (JudgeProfile, Sec. 4.3-4.5).

Per judge and source: items with an A/B label (ties left out, counted) are split 75/25 (seeded);
an L2 logistic regression (C = 1) of the label on the judge's stable attribute directions is fitted
on the training part and scored on the held-out part (``reweighted_accuracy``). Label budgets of
32/64/128/256 training labels repeat the fit on ``n_repeats`` random subsamples; top-k refits keep
the k attributes with the largest absolute full-fit weights and report weight alignment (cosine of
the zero-padded top-k weights to the full fit).

The unadapted judge's accuracy on the same held-out items, two ways:

- ``base_accuracy`` -- the paper's rule (Table 7): the holistic verdict read in ONE presentation
  order (AB: the original A shown first), a verdict that is unparsed or unresolved (direction 0,
  or no AB read) counted as an error; ``gain = reweighted_accuracy - base_accuracy`` is on this
  basis, the basis of the paper's 66.48% -> 71.97%;
- ``base_accuracy_stable`` -- the stable verdict (both orders agree), an unresolved one earning
  0.5 (the expected accuracy of a coin flip): the order-robust figure, kept beside it.

The panel summary (``summary``) averages judge-source cells equally (the paper's macro average)
and counts the judges whose mean gain is positive.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rmcore.io.markdown import percent, table

from .panel import Panel, build_panel, logistic_regression, one_blas_thread
from .store import JudgmentStore
from .workers import run_tasks

BUDGETS = (32, 64, 128, 256)
TOP_K = (6, 12)


def split_indices(n: int, test_fraction: float = 0.25, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) positions of a seeded 75/25 split."""
    perm = np.random.default_rng(seed).permutation(n)
    n_test = int(round(test_fraction * n))
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def verdict_accuracy(verdict: np.ndarray, label: np.ndarray) -> float:
    """Accuracy of +1/-1/0 verdicts against +1/-1 labels; 0 (unresolved) counts one half."""
    return float(np.mean(np.where(verdict == 0, 0.5, (verdict == label).astype(float))))


def single_read_accuracy(verdict: np.ndarray, label: np.ndarray) -> float:
    """Accuracy of one-order +1/-1/0 verdicts against +1/-1 labels; 0 (unparsed or unresolved)
    is an error (the paper's Table 7 rule)."""
    return float(np.mean(verdict == label))


def _fit_score(x_tr: np.ndarray, y_tr: np.ndarray, x_te: np.ndarray, y_te: np.ndarray,
               seed: int) -> tuple[float, np.ndarray] | None:
    if len(np.unique(y_tr)) < 2:
        return None
    m = logistic_regression(seed).fit(x_tr, y_tr)
    return float(np.mean(m.predict(x_te) == y_te)), m.coef_[0]


def _cosine(u: np.ndarray, v: np.ndarray) -> float | None:
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    return float(u @ v / (nu * nv)) if nu > 0 and nv > 0 else None


def source_split(items: pd.DataFrame, panel: Panel, seed: int = 0, test_fraction: float = 0.25) -> dict[str, Any]:
    """Per source: (item positions in the panel, labels +1/-1, train idx, test idx, n_ties)."""
    pos = {iid: n for n, iid in enumerate(panel.items)}
    out: dict[str, Any] = {}
    for k, (source, grp) in enumerate(items.groupby("source", sort=True)):
        grp = grp[grp["item_id"].isin(pos)]
        lab = grp[grp["label"].isin(["A", "B"])]
        idx = lab["item_id"].map(pos).to_numpy()
        y = np.where(lab["label"].to_numpy() == "A", 1, -1)
        tr, te = split_indices(len(idx), test_fraction, seed + k)
        out[str(source)] = {"idx": idx, "y": y, "train": tr, "test": te,
                            "n_ties": int((grp["label"] == "tie").sum()),
                            "n_unlabelled": int(grp["label"].isna().sum())}
    return out


def reweight_source(panel: Panel, j: int, split: dict[str, Any], *, budgets: tuple[int, ...] = BUDGETS,
                    n_repeats: int = 10, top_k: tuple[int, ...] = TOP_K, seed: int = 0) -> dict[str, Any]:
    """Judge j (panel position) on one source's split (``source_split``)."""
    return _reweight_source(panel.stable[j], panel.single[j, :, -1], panel.attributes, j, split, budgets=budgets,
                            n_repeats=n_repeats, top_k=top_k, seed=seed)


def _reweight_source(stable: np.ndarray, single_verdict: np.ndarray, attributes: list[str], j: int,
                     split: dict[str, Any], *, budgets: tuple[int, ...], n_repeats: int, top_k: tuple[int, ...],
                     seed: int) -> dict[str, Any]:
    """``reweight_source`` on one judge's arrays: ``stable`` (I, A+1) int8, ``single_verdict`` (I,)."""
    x = stable[split["idx"], :-1].astype(float)
    v = stable[split["idx"], -1]
    v1 = single_verdict[split["idx"]]  # the AB read; 0 when unparsed, unresolved or not read
    y, tr, te = split["y"], split["train"], split["test"]
    out: dict[str, Any] = {"n_train": int(len(tr)), "n_test": int(len(te)), "n_ties": split["n_ties"],
                           "n_unlabelled": split["n_unlabelled"]}
    if len(te) == 0:
        out.update(base_accuracy=None, base_accuracy_stable=None, reweighted_accuracy=None, gain=None,
                   skipped="no test items")
        return out
    out["base_accuracy"] = single_read_accuracy(v1[te], y[te])
    out["n_base_unparsed"] = int((v1[te] == 0).sum())
    out["base_accuracy_stable"] = verdict_accuracy(v[te], y[te])
    out["n_base_stable_unresolved"] = int((v[te] == 0).sum())
    full = _fit_score(x[tr], y[tr], x[te], y[te], seed)
    if full is None:
        out.update(reweighted_accuracy=None, gain=None, skipped="training labels have one class")
        return out
    out["reweighted_accuracy"], w_full = full
    out["gain"] = out["reweighted_accuracy"] - out["base_accuracy"]
    out["weights"] = dict(zip(attributes, w_full.tolist()))
    rng = np.random.default_rng([seed, j])
    bud: dict[str, Any] = {}
    for b in budgets:
        if b >= len(tr):
            continue
        accs, one_class = [], 0
        for _ in range(n_repeats):
            sub = rng.choice(tr, size=b, replace=False)
            r = _fit_score(x[sub], y[sub], x[te], y[te], seed)
            if r is None:
                one_class += 1
                continue
            accs.append(r[0])
        bud[str(b)] = {"mean": float(np.mean(accs)) if accs else None, "sd": float(np.std(accs)) if accs else None,
                       "n_fits": len(accs), "n_one_class": one_class}
    bud["all"] = {"mean": out["reweighted_accuracy"], "sd": 0.0, "n_fits": 1, "n_one_class": 0, "n": int(len(tr))}
    out["budgets"] = bud
    order = np.argsort(-np.abs(w_full), kind="stable")
    tk: dict[str, Any] = {}
    for k in [*top_k, len(w_full)]:
        if k > len(w_full) or (k == len(w_full) and "all" in tk):
            continue
        keep = order[:k]
        r = _fit_score(x[tr][:, keep], y[tr], x[te][:, keep], y[te], seed)
        padded = np.zeros_like(w_full)
        if r is not None:
            padded[keep] = r[1]
        tk["all" if k == len(w_full) else str(k)] = {
            "accuracy": r[0] if r else None, "alignment": _cosine(padded, w_full) if r else None,
            "attributes": [attributes[i] for i in keep]}
    out["top_k"] = tk
    return out


def _reweight_judge(stable: np.ndarray, single_verdict: np.ndarray, attributes: list[str], j: int,
                    splits: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Every source of one judge (a worker's task; its fits on one BLAS thread)."""
    with one_blas_thread():
        return {s: _reweight_source(stable, single_verdict, attributes, j, sp, **kwargs) for s, sp in splits.items()}


def reweight(items: pd.DataFrame, judgments: pd.DataFrame | JudgmentStore | Panel, *,
             attributes: list[str] | None = None, budgets: tuple[int, ...] = BUDGETS, n_repeats: int = 10,
             top_k: tuple[int, ...] = TOP_K, seed: int = 0, test_fraction: float = 0.25, jobs: int | None = None,
             progress: bool = True) -> dict[str, Any]:
    """The reweight.json document: ``judges.<judge>.sources.<source>.{base_accuracy,
    reweighted_accuracy, n_test, ...}`` and per-judge means over sources. ``judgments``: a
    judgment store, a long table or a built panel; ``jobs``: worker processes for the judges'
    fits (default: this process's CPUs; the figures do not depend on it)."""
    panel = judgments if isinstance(judgments, Panel) else build_panel(judgments, attributes, progress=progress)
    splits = source_split(items, panel, seed, test_fraction)
    kwargs = {"budgets": tuple(budgets), "n_repeats": n_repeats, "top_k": tuple(top_k), "seed": seed}
    tasks = [(panel.stable[j], panel.single[j, :, -1], panel.attributes, j, splits, kwargs)
             for j in range(len(panel.judges))]
    per_judge = run_tasks(_reweight_judge, tasks, jobs=jobs, desc="reweighting fits", progress=progress)
    judges: dict[str, Any] = {}
    for name, sources in zip(panel.judges, per_judge):
        done = [r for r in sources.values() if r.get("reweighted_accuracy") is not None]
        judges[name] = {"sources": sources, **_means(done)}
    cells = [r for jr in judges.values() for r in jr["sources"].values() if r.get("reweighted_accuracy") is not None]
    summary = {**_means(cells), "n_cells": len(cells),
               "n_judges_improved": sum(1 for jr in judges.values() if (jr["mean_gain"] or 0) > 0),
               "n_judges": sum(1 for jr in judges.values() if jr["mean_gain"] is not None)}
    return {"judges": judges, "summary": summary,
            "meta": {"attributes": panel.attributes, "budgets": list(budgets), "n_repeats": n_repeats,
                     "top_k": list(top_k), "seed": seed, "test_fraction": test_fraction,
                     "base_rule": "holistic verdict read in order AB, unparsed or unresolved = error (paper, Table 7)",
                     "base_stable_rule": "stable verdict (both orders agree), unresolved = 0.5"}}


def _means(cells: list[dict[str, Any]]) -> dict[str, float | None]:
    """Equal-weight means over judge-source cells of the base, stable base, reweighted accuracy and gain."""
    def m(key: str) -> float | None:
        return float(np.mean([r[key] for r in cells])) if cells else None

    return {"mean_base_accuracy": m("base_accuracy"), "mean_base_accuracy_stable": m("base_accuracy_stable"),
            "mean_reweighted_accuracy": m("reweighted_accuracy"), "mean_gain": m("gain")}


def gain_line(name: str, r: dict[str, Any]) -> str:
    """One console line: base (paper's rule) -> reweighted, the gain, and the stable-verdict base."""
    def pc(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f}%"

    return (f"{name}: held-out accuracy {pc(r['mean_base_accuracy'])} (one order, unparsed = error) -> "
            f"{pc(r['mean_reweighted_accuracy'])} reweighted, gain {signed_points(r['mean_gain'])} points "
            f"(stable-verdict base {pc(r['mean_base_accuracy_stable'])})")


def signed_points(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


def reweight_markdown(res: dict[str, Any]) -> str:
    def f(x: float | None) -> str:
        return percent(x, missing="n/a")

    budgets = res["meta"]["budgets"]
    rows = []
    for name, j in res["judges"].items():
        for s, r in j["sources"].items():
            bud, base = r.get("budgets", {}), r.get("baselines", {})
            tk = "; ".join(f"k={k}: {f(t['accuracy'])} ({f(t['alignment'])})" for k, t in r.get("top_k", {}).items())
            rows.append([name, s, r["n_test"], f(r["base_accuracy"]), r.get("n_base_unparsed", "n/a"),
                         f(r.get("base_accuracy_stable")), f(r["reweighted_accuracy"]), signed_points(r.get("gain")),
                         *(f(bud.get(str(b), {}).get("mean")) for b in budgets), tk,
                         f(base.get("rubric", {}).get("accuracy")), f(base.get("lora_sft", {}).get("accuracy"))])
    sm = res.get("summary", {})
    lines = ["# Judge reweighting (accuracy %, held-out 25%)", "",
             "Base: the judge's holistic verdict read in one presentation order (the original A first), an "
             "unparsed or unresolved verdict counted as an error (the JudgeProfile paper's rule, Table 7); the gain "
             "(percentage points) is reweighted minus this base. Stable base: the verdict both orders agree on, an "
             "unresolved one counted as one half, kept beside it. Rubric and LoRA SFT are read like the base.", ""]
    if sm.get("n_cells"):
        lines += [f"Macro average over {sm['n_cells']} judge-source cells: base {f(sm['mean_base_accuracy'])}% -> "
                  f"reweighted {f(sm['mean_reweighted_accuracy'])}% (gain {signed_points(sm['mean_gain'])} points; "
                  f"stable base {f(sm['mean_base_accuracy_stable'])}%); {sm['n_judges_improved']} of "
                  f"{sm['n_judges']} judges improve on average.", ""]
    lines += table(["judge", "source", "n_test", "base", "unparsed", "stable base", "reweighted", "gain (points)",
                    *(f"budget {b}" for b in budgets), "top-k (alignment)", "rubric", "LoRA SFT"], rows)
    return "\n".join(lines) + "\n"
