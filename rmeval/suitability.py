"""Suitability audit (Reward Auditor): confidence of a reward model on original vs perturbed pairs,
the inference of ``rmeval.stats.suitability`` per perturbation, and the risk report.

Confidence M per (prompt, chosen, rejected) item:
- sequence classifier and DPO implicit reward: M = σ(r_chosen − r_rejected);
- generative judge: the probability of the correct verdict averaged over both presentation orders,
  M = ½·[p_A(chosen, rejected) + 1 − p_A(rejected, chosen)] (``rmeval.scoring.pairwise_judge``).
Every text goes through the score cache, so an original pair shared by several perturbations (and
by a rerun) is scored once.

Pairs table (what ``rmeval suitability`` writes and ``rmeval suitability-stats`` reads): one row per
(item, perturbation): ``item_id, perturbation, m_original, m_perturbed`` and optionally ``model`` (a
panel of models) and ``changed`` (rows with ``changed`` false are counted, not tested: a twin
identical to its original is no observation of the perturbation). Pairwise accuracy is
1{M > ½} (½ for M = ½), on the original and on the perturbed items.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit

from rmcore.data.schema import RatingSet
from rmcore.errors import ConfigError, DataError
from rmcore.io import atomic_save_figure, atomic_write_json, atomic_write_table, atomic_write_text
from rmcore.markdown import MISSING, num, table
from rmeval.perturbations.suite import GROUPS, Item, Pair, PerturbedSet, build_suite, preference_items
from rmeval.scoring.base import Scorer
from rmeval.scoring.cache import CachedScorer
from rmeval.stats.suitability import (
    DEFAULT_B,
    DEFAULT_ETA,
    DEFAULT_Q,
    group_bh,
    mark_unsuitable,
    paired_effect,
    panel_margins,
    suitability_inference,
)

log = logging.getLogger(__name__)

PAIR_COLUMNS = ["item_id", "perturbation", "m_original", "m_perturbed"]
RECORD_KEYS = ("group", "n", "mean_delta", "cohens_d", "t", "p_value", "rejected", "unsuitable")


@dataclass
class SuitabilitySettings:
    n_permutations: int = DEFAULT_B
    seed: int = 0
    q: float = DEFAULT_Q
    eta: float = DEFAULT_ETA
    margin: float | None = None  # None: the panel rule for several models, else 0
    weighting: str = "storey"  # storey | equal (plain BH)

    def validate(self) -> None:
        if self.n_permutations < 1:
            raise ConfigError(f"n_permutations must be >= 1, got {self.n_permutations}")
        if not 0 < self.q < 1:
            raise ConfigError(f"q must be in (0, 1), got {self.q}")
        if not 0 < self.eta < 1:
            raise ConfigError(f"eta must be in (0, 1), got {self.eta}")
        if self.weighting not in ("storey", "equal"):
            raise ConfigError(f"weighting must be storey or equal, got '{self.weighting}'")


# -- confidence -----------------------------------------------------------------------------------

def confidence_scorer(scorer: Scorer, cache_path: str | os.PathLike | None = None) -> tuple[Scorer, bool]:
    """(the scorer M is computed with, whether it opened its own cache). A generative judge becomes
    its pairwise-verdict scorer; the score cache of a ``CachedScorer`` is reused, else one is opened
    at ``cache_path`` when given."""
    cached = scorer if isinstance(scorer, CachedScorer) else None
    inner = cached.inner if cached is not None else scorer
    if inner.kind == "generative_judge":
        from rmeval.scoring.pairwise_judge import PairwiseJudgeScorer

        inner = PairwiseJudgeScorer(inner)
    elif inner.kind not in ("seq_classifier", "dpo_implicit"):
        raise ConfigError(f"no suitability confidence for scorer kind '{inner.kind}'")
    if cached is not None:
        return (cached if inner is cached.inner else CachedScorer(inner, cached.cache)), False
    if cache_path is not None:
        return CachedScorer(inner, cache_path), True
    return inner, False


def confidences(scorer: Scorer, pairs: list[Pair]) -> np.ndarray:
    """M per pair, scoring each distinct text once."""
    if not pairs:
        return np.zeros(0)
    judge = scorer.kind == "pairwise_judge"
    items: list[Any] = []
    for p in pairs:
        msgs = p.message_list()
        if judge:
            items += [(msgs, (p.chosen, p.rejected)), (msgs, (p.rejected, p.chosen))]
        else:
            items += [(msgs, p.chosen), (msgs, p.rejected)]
    uniq: dict[str, int] = {}
    idx = [uniq.setdefault(scorer.render(it), len(uniq)) for it in items]
    todo: list[Any] = [None] * len(uniq)
    for it, u in zip(items, idx):
        todo[u] = it
    s = np.asarray(scorer.score(todo), dtype=np.float64)[idx].reshape(-1, 2)
    if judge:
        return 0.5 * (s[:, 0] + 1.0 - s[:, 1])
    return expit(s[:, 0] - s[:, 1])


def score_suite(scorer: Scorer, suite: list[PerturbedSet]) -> pd.DataFrame:
    """The pairs table of a built suite (failed twins are absent from it; see ``suite_counts``)."""
    pairs: list[Pair] = []
    for ps in suite:
        for t in ps.twins:
            if t.perturbed is not None:
                pairs += [t.original, t.perturbed]
    m = confidences(scorer, pairs).reshape(-1, 2)
    rows, k = [], 0
    for ps in suite:
        for t in ps.twins:
            if t.perturbed is None:
                continue
            rows.append({"item_id": t.item_id, "perturbation": ps.spec, "m_original": float(m[k, 0]),
                         "m_perturbed": float(m[k, 1]), "changed": bool(t.changed)})
            k += 1
    return pd.DataFrame(rows, columns=[*PAIR_COLUMNS, "changed"])


def suite_counts(suite: list[PerturbedSet]) -> dict[str, dict[str, Any]]:
    return {ps.spec: {"source": ps.source, **ps.counts()} for ps in suite}


# -- pairs table ----------------------------------------------------------------------------------

def _row_no(path: str, i: int) -> int:
    """Row as a user finds it: the line for jsonl (1-based) and csv (after the header), else 1-based."""
    if path.endswith(".csv"):
        return i + 2
    return i + 1


def validate_pairs(df: pd.DataFrame, *, file: str = "<pairs>", groups: Mapping[str, str] | None = None
                   ) -> pd.DataFrame:
    """Check a pairs table; every problem is an error naming the file, row and field."""
    for col in PAIR_COLUMNS:
        if col not in df.columns:
            raise DataError("missing column", file=file, field=col)
    groups = {**GROUPS, **(groups or {})}
    df = df.reset_index(drop=True).copy()
    df["item_id"] = df["item_id"].map(lambda v: v if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    df["perturbation"] = df["perturbation"].astype(str)
    for i, row in enumerate(df.itertuples(index=False)):
        r = _row_no(file, i)
        if row.item_id is None or (isinstance(row.item_id, float) and math.isnan(row.item_id)) or row.item_id == "":
            raise DataError("missing item id", file=file, row=r, field="item_id")
        code = row.perturbation
        if code not in groups and code.partition("@")[0] not in groups:
            raise DataError(f"unknown perturbation code '{code}' without a group (give it one with --groups "
                            f"{code}=GROUP)", file=file, row=r, field="perturbation")
        for fld in ("m_original", "m_perturbed"):
            v = getattr(row, fld)
            try:
                x = float(v)
            except (TypeError, ValueError):
                raise DataError(f"confidence must be a number in [0, 1], got {v!r}", file=file, row=r,
                                field=fld) from None
            if math.isnan(x):
                if fld == "m_perturbed":
                    raise DataError(f"item '{row.item_id}' has no perturbed twin for '{code}' (m_perturbed "
                                    "missing)", file=file, row=r, field=fld)
                raise DataError("confidence is NaN", file=file, row=r, field=fld)
            if not 0.0 <= x <= 1.0:
                raise DataError(f"confidence must be in [0, 1], got {x}", file=file, row=r, field=fld)
    keys = ["model", "perturbation", "item_id"] if "model" in df.columns else ["perturbation", "item_id"]
    dup = df.duplicated(keys, keep=False)
    if dup.any():
        rows = [_row_no(file, i) for i in np.nonzero(dup.to_numpy())[0][:2]]
        first = df.loc[dup].iloc[0]
        raise DataError(f"duplicate row for item '{first['item_id']}' and perturbation '{first['perturbation']}' "
                        f"(rows {rows[0]} and {rows[1]})", file=file, row=rows[1], field="item_id")
    df["m_original"] = df["m_original"].astype(float)
    df["m_perturbed"] = df["m_perturbed"].astype(float)
    if "changed" in df.columns:
        truth = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
        for i, v in enumerate(df["changed"]):
            if str(v).strip().lower() not in truth:
                raise DataError(f"changed must be true or false, got {v!r}", file=file, row=_row_no(file, i),
                                field="changed")
        df["changed"] = [truth[str(v).strip().lower()] for v in df["changed"]]
    return df


def read_pairs(path: str | os.PathLike, groups: Mapping[str, str] | None = None) -> pd.DataFrame:
    from rmcore.io import read_table

    return validate_pairs(read_table(path), file=str(path), groups=groups)


def parse_groups(items: list[str] | None) -> dict[str, str]:
    """['XX=controlled', 'YY=mine'] -> {'XX': 'controlled', 'YY': 'mine'}."""
    out = {}
    for part in items or []:
        for kv in part.split(","):
            if not kv:
                continue
            k, sep, v = kv.partition("=")
            if not sep or not k or not v:
                raise ConfigError(f"--groups entries look like CODE=GROUP, got '{kv}'")
            out[k.strip()] = v.strip()
    return out


# -- inference ------------------------------------------------------------------------------------

def _accuracy(m: np.ndarray) -> float:
    return float(np.mean(np.where(m > 0.5, 1.0, np.where(m == 0.5, 0.5, 0.0)))) if len(m) else float("nan")


def infer(pairs: pd.DataFrame, settings: SuitabilitySettings, *, groups: Mapping[str, str] | None = None,
          counts: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Inference for one model's pairs table: {"perturbations": {spec: record}, "groups": ...}.
    Margins and ``unsuitable`` are set by ``finalize``."""
    settings.validate()
    groups = {**GROUPS, **(groups or {})}
    order = list(dict.fromkeys(pairs["perturbation"]))
    deltas, extra = {}, {}
    for spec in order:
        g = pairs[pairs["perturbation"] == spec]
        n_unchanged = 0
        if "changed" in g.columns:
            n_unchanged = int((~g["changed"]).sum())
            g = g[g["changed"]]
        mo, mp = g["m_original"].to_numpy(float), g["m_perturbed"].to_numpy(float)
        deltas[spec] = mo - mp
        acc_o, acc_p = _accuracy(mo), _accuracy(mp)
        extra[spec] = {"mean_m_original": float(mo.mean()) if len(mo) else float("nan"),
                       "mean_m_perturbed": float(mp.mean()) if len(mp) else float("nan"),
                       "accuracy_original": acc_o, "accuracy_perturbed": acc_p, "accuracy_change": acc_p - acc_o,
                       "n_unchanged": n_unchanged, **dict((counts or {}).get(spec, {}))}
    grp = {s: groups[s] if s in groups else groups[s.partition("@")[0]] for s in order}
    # fewer than 2 changed items: no test; reported, outside the BH family
    tested = [s for s in order if len(deltas[s]) >= 2]
    res = suitability_inference({s: deltas[s] for s in tested}, grp, n_permutations=settings.n_permutations,
                                seed=settings.seed, q=settings.q, eta=settings.eta, weighting=settings.weighting)
    for s in order:
        if s not in tested:
            res[s] = {"group": grp[s], **paired_effect(deltas[s]), "p_value": float("nan"), "rejected": False,
                      "stars": "", "weight": float("nan"), "note": "fewer than 2 changed items: not tested"}
    pv = np.array([res[s]["p_value"] for s in tested])
    pi0 = group_bh(pv, [grp[s] for s in tested], q=settings.q, eta=settings.eta,
                   weighting=settings.weighting)["pi0"] if tested else {}
    per = {s: {**res[s], **extra[s]} for s in order}
    return {"perturbations": per, "groups": {g: {"pi0": v} for g, v in pi0.items()}}


def finalize(results: dict[str, dict[str, Any]], settings: SuitabilitySettings) -> dict[str, Any]:
    """Margins (user-set, the panel rule for several models, else 0) and the unsuitable flags."""
    if settings.margin is not None:
        margins: Any = float(settings.margin)
        source = "user"
    elif len(results) > 1:
        margins = panel_margins({n: r["perturbations"] for n, r in results.items()})
        source = "panel"
    else:
        margins, source = 0.0, "default"
    for r in results.values():
        mark_unsuitable(r["perturbations"], margins)
        r["settings"] = {**settings_dict(settings), "m": margins, "margin_source": source}
    return {"margins": margins, "margin_source": source}


def settings_dict(s: SuitabilitySettings) -> dict[str, Any]:
    d = asdict(s)
    return {"B": d["n_permutations"], "seed": d["seed"], "q": d["q"], "eta": d["eta"], "m": d["margin"],
            "weighting": d["weighting"]}


def ordered_record(r: dict[str, Any]) -> dict[str, Any]:
    """The issue's keys first, the rest after."""
    return {**{k: r[k] for k in RECORD_KEYS}, **{k: v for k, v in r.items() if k not in RECORD_KEYS}}


# -- report ---------------------------------------------------------------------------------------

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


def model_json(r: dict[str, Any], meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"perturbations": {s: ordered_record(v) for s, v in r["perturbations"].items()},
            "groups": r.get("groups", {}), "settings": r["settings"], "meta": dict(meta or r.get("meta", {}))}


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


# -- one model end to end -------------------------------------------------------------------------

def run_suitability(scorer: Scorer, rating_set: RatingSet, specs: list[str], *, settings: SuitabilitySettings,
                    items: list[Item] | None = None, rewriters: Mapping[str, Any] | None = None,
                    cache_path: str | os.PathLike | None = None, pairs_path: str | os.PathLike | None = None,
                    max_items: int | None = None, base_level: int = 0, attribute: str = "helpfulness",
                    controlled_options: Mapping[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Build the suite, score original and perturbed items, run the inference (margins are set by
    ``finalize``). The pairs table goes to ``pairs_path`` when given."""
    skipped: dict[str, int] = {}
    if items is None:
        items, sk = preference_items(rating_set, base_level=base_level, attribute=attribute, max_items=max_items)
        skipped = dict(sk)
    if not items:
        raise DataError(f"{rating_set.name}: no preference items to perturb (skipped: {skipped})")
    suite = build_suite(specs, items, rating_set=rating_set, seed=settings.seed, rewriters=dict(rewriters or {}),
                        options=dict(controlled_options or {}))
    counts = suite_counts(suite)
    cs, own_cache = confidence_scorer(scorer, cache_path)
    try:
        pairs = score_suite(cs, suite)
    finally:
        if own_cache:
            cs.cache.close()
    if pairs_path is not None:
        atomic_write_table(pairs_path, pairs)
    res = infer(pairs, settings, counts=counts)
    res["meta"] = {"data": rating_set.name, "n_items": len(items), "items_skipped": skipped,
                   "scorer": cs.kind, "truncation": dict(cs.truncation)}
    return res
