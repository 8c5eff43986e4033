"""JudgeProfile's tables on the public sources matchrm loads: every judge elicited on one items table
(each source a preference set: RM-Bench in the paper's 0:2 style pairing, HH-RLHF, HelpSteer2's
preferences, SHP, RewardBench ...), then, over the panel, the reweighting toward the sources'
reference labels (``rmeval.judges.reweight``: base one-order accuracy -> reweighted, on a 25%
held-out split of every source) and the agreement analysis (``rmeval.judges.analysis``: attribute
agreement where judges' overall verdicts differ, the hidden consensus; its controls and priority
fits, Tables 9, 12, 19 and 20), over all judges (``all``: the paper's 21) and over the main panel
without ``main_excludes`` (``main``: the paper's 19, without the two position-biased judges), each
with the stable strata by source (Table 11) and the perception profiles' split half (C.1)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from rmcore.io.tables import atomic_write_table
from rmcore.models.device import Placement
from rmeval.judges.pipeline import analyze_judgments, reweight_judgments, run_elicit
from rmeval.judges.settings import AnalysisSettings, BaselineSettings, ElicitSettings, ReweightSettings
from rmeval.judges.tables import load_judgments
from rmeval.reproduce.settings import analysis_settings


def _items_table(ctx: Any, s: Any) -> Path:
    """OUT/data/items.jsonl: every data set's preference pairs, one source per data key (built once)."""
    import pandas as pd

    # torch: this module loads without it
    from rmeval.judges.elicit import items_from_rating_set

    path = ctx.out / "data" / "items.jsonl"
    if path.is_file():
        return path
    frames = []
    for k, key in enumerate(ctx.data_keys()):
        rs = ctx.rating_set(key)
        if s.rm_bench_pairing and str(rs.name).startswith("rm_bench"):
            i, j = (int(x) for x in s.rm_bench_pairing.split(":"))
            rs.preferences = [p for p in rs.preferences if dict(p.meta or ()).get("chosen_style", i) == i
                              and dict(p.meta or ()).get("rejected_style", j) == j]
        frames.append(items_from_rating_set(rs, key, limit=s.max_items_per_source, seed=s.seed + k))
    return atomic_write_table(path, pd.concat(frames, ignore_index=True))


def reasoning_settings(m: Any) -> dict[str, Any]:
    """The elicitation's settings for a served judge that reasons before it answers (its reply
    budget, its requests in flight); none for another."""
    r = m.reasoning
    return {} if r is None else {"reasoning_tokens": r.max_tokens, "concurrency": r.concurrency}


def elicit_judge(ctx: Any, m: Any) -> dict[str, str]:
    """One judge's attribute and overall verdicts in both orders (OUT/rows/<judge>/)."""
    s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in)
    items = _items_table(ctx, s)
    out = ctx.row_dir(m.name)
    model = ctx.model_path(m)
    endpoint = ctx.endpoint(m)
    cfg = ElicitSettings(out=str(out), items=str(items), model=None if endpoint else str(model),
                       endpoint=endpoint, endpoint_model=m.hub_id if endpoint else None, judge_name=m.name,
                       attributes=s.attributes_file, attribute_names=list(s.attributes), batch_size=m.batch_size,
                       max_length=ctx.max_length(m) or 4096, placement=Placement(**ctx.placement(m)),
                       chunk_items=s.chunk_items, progress=False, seed=s.seed,
                       **(reasoning_settings(m) if endpoint else {}))
    run_elicit(cfg)
    return {"elicit": str(out / "elicit_stats.json")}


def _source_means(judges: dict[str, Any]) -> dict[str, Any]:
    """Per source, the mean over judges of base and reweighted accuracy and of the gain."""
    out: dict[str, Any] = {}
    sources = sorted({s for j in judges.values() for s in j["sources"]})
    for src in sources:
        cells = [j["sources"][src] for j in judges.values()
                 if src in j["sources"] and j["sources"][src].get("reweighted_accuracy") is not None]
        out[src] = {k: float(np.mean([c[k] for c in cells])) if cells else None
                    for k in ("base_accuracy", "reweighted_accuracy", "gain")}
        out[src]["n_judges"] = len(cells)
    return out


def judges_table(ctx: Any, docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Reweighting (when the recipe's columns read it) and agreement over the judges present; each
    judge's row gains its ``reweight`` and its figures of the analysis (``analysis``;
    ``main_analysis`` over the main panel)."""
    import pandas as pd

    s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in)
    present = {row: d["elicit"]["judgments"] for row, d in docs.items() if "elicit" in d}
    if not present:
        return {}
    panel_dir = ctx.out / "panel"
    table = pd.concat([load_judgments(p) for p in present.values()], ignore_index=True)
    judgments = atomic_write_table(panel_dir / "judgments.jsonl", table)
    items = ctx.out / "data" / "items.jsonl"
    panel: dict[str, Any] = {"n_judges": len(present)}
    if any(c.key.startswith(("reweight.", "sources.")) for c in ctx.recipe.columns):  # a table that reads it
        rw = reweight_judgments(judgments, items, panel_dir / "reweight",
                                ReweightSettings(budgets=tuple(s.budgets), n_repeats=s.n_repeats, top_k=tuple(s.top_k),
                                                 seed=s.seed), **ctx.wandb)
        for row, jr in rw["judges"].items():
            if row in docs:
                docs[row]["reweight"] = jr
        summary = dict(rw["summary"])
        if summary.get("n_judges"):
            summary["share_improved"] = summary["n_judges_improved"] / summary["n_judges"]
        panel.update(reweight=summary, sources=_source_means(rw["judges"]))
    if ctx.recipe.baselines is not None:
        panel["baselines"] = baselines_table(ctx, docs, table, items, s)
    if len(present) >= 2:
        res = _analyze(ctx, judgments, panel_dir / "analysis", items, s, present)
        panel["agreement"] = {k: v for k, v in res["agreement"].items() if k != "per_attribute"}
        if "no_conflict" in res:
            panel["no_conflict"] = {k: v for k, v in res["no_conflict"].items() if k != "thresholds"}
        panel["all"] = table_figures(res, judgments, items, s)
        main = [r for r in present if r not in s.main_excludes]
        if len(main) < len(present) and len(main) >= 2:  # the paper's 19-judge panel: without the excluded
            sub = atomic_write_table(panel_dir / "judgments.main.jsonl", table[table["judge"].isin(main)])
            res = _analyze(ctx, sub, panel_dir / "analysis.main", items, s, main)
            panel["main"] = table_figures(res, sub, items, s)
        else:
            panel["main"] = panel["all"]
        for key, fig in (("analysis", panel["all"]), ("main_analysis", panel["main"])):
            for row, j in fig["judges"].items():
                if row in docs:
                    docs[row][key] = j
    return panel


def _analyze(ctx: Any, judgments: Path, out: Path, items: Path, s: Any, judges: Any) -> dict[str, Any]:
    """``analyze_judgments`` over ``judges`` with the recipe's donor of the component swaps when it is
    among them and has a priority fit (else the default donor, and the document says why)."""
    from rmcore.errors import ConfigError

    settings = AnalysisSettings(seed=s.seed, n_splits=s.n_splits, null_repeats=s.null_repeats,
                                attributes_file=s.attributes_file, min_shared=s.min_shared,
                                donor=s.donor if s.donor in judges else None,
                                jobs=1 if ctx.stand_in else None)  # tiny stand-in fits: no worker processes
    try:
        return analyze_judgments(judgments, out, items=items, settings=settings, **ctx.wandb)
    except ConfigError as e:
        if settings.donor is None or "has no priority fit" not in str(e):
            raise
    res = analyze_judgments(judgments, out, items=items, settings=replace(settings, donor=None), **ctx.wandb)
    if "component_swaps" in res:
        res["component_swaps"]["donor_note"] = f"{s.donor} has no priority fit: the default donor instead"
    return res


def _share(d: dict[str, Any], num: str, den: str, key: str) -> None:
    if d.get(den):
        d[key] = d[num] / d[den]


def table_figures(res: dict[str, Any], judgments: Path, items: Path, s: Any) -> dict[str, Any]:
    """The analysis document's figures the JudgeProfile tables read (the pair and label lists left
    out), with the shares the text states as counts (pairs above 0.5, pairs and judges with a
    positive gap, attributes above the null), each judge's perception-profile split half (C.1), and
    the stable strata by source (Table 11)."""
    from rmeval.judges.agreement_controls import agreement_by_source
    from rmeval.judges.analysis import perception_split_half
    from rmeval.judges.panel import build_panel
    from rmeval.judges.store import load_store
    from rmeval.judges.tables import load_items

    keep = ("weight_correlation", "single_read_control", "three_category_kappa", "no_conflict", "attribute_importance",
            "identical_preference_null", "component_swaps")
    out: dict[str, Any] = {k: res[k] for k in keep if k in res}
    out["agreement"] = {k: v for k, v in res["agreement"].items() if k not in ("per_attribute", "pairs")}
    if "matched_items" in res:
        out["matched_items"] = {p: ({k: v for k, v in m.items() if k != "pairs"} if isinstance(m, dict) else m)
                                for p, m in res["matched_items"].items()}
        for m in out["matched_items"].values():
            if isinstance(m, dict):
                _share(m, "n_pairs_positive_gap", "n_pairs", "share_pairs_positive_gap")
                _share(m, "n_judges_positive_gap", "n_judges", "share_judges_positive_gap")
    panel = build_panel(load_store(judgments), res["meta"]["attributes"])
    out["by_source"] = agreement_by_source(panel, load_items(items))
    for strata in [*out.get("single_read_control", {}).values(), *out["by_source"].values()]:
        for st in strata.values():
            if isinstance(st, dict):
                _share(st, "n_above_half", "n_pairs", "share_above_half")
    null = out.get("identical_preference_null")
    if null:
        _share(null, "n_attributes_exceeding", "n_attributes", "share_attributes_exceeding")
    out["judges"] = {}
    for j, name in enumerate(panel.judges):
        fig = {k: v for k, v in res["judges"][name].items() if k not in ("weights", "shared_weights")}
        fig["perception_split_half"] = perception_split_half(panel, j, n_splits=s.n_splits, seed=s.seed)
        fig["matched_items"] = {p: m["judges"].get(name) for p, m in res.get("matched_items", {}).items()
                                if isinstance(m, dict) and "judges" in m}
        out["judges"][name] = fig
    out["n_judges"] = len(panel.judges)
    return out


def baselines_table(ctx: Any, docs: dict[str, dict[str, Any]], table: Any, items: Path, s: Any) -> dict[str, Any]:
    """JudgeProfile's Tables 2 and 3: for each judge the recipe's ``baselines`` name (and that was
    elicited), its reweighting with rubric prompting and LoRA SFT beside it (``reweight_judgments``
    with ``rmeval.judges.baselines``, on this judge's judgments: the same 75/25 split of every
    source), under ``panel/baselines/<judge>/``; each judge's row gains ``baselines``, the means over
    its sources (``baseline_means``)."""
    from rmeval.reproduce.settings import strict_settings

    b = ctx.recipe.baselines
    values = {**b.settings, **(b.stand_in if ctx.stand_in else {})}
    out: dict[str, Any] = {}
    for row in b.judges:
        if row not in docs:
            continue
        where = ctx.out / "panel" / "baselines" / row
        own = atomic_write_table(where / "judgments.jsonl", table[table["judge"] == row])
        bs = strict_settings(BaselineSettings, {**values, "model": str(ctx.model_path(ctx.recipe.model(row))),
                                                "judge": row, "attributes_file": s.attributes_file, "seed": s.seed},
                             f"{ctx.recipe.path}: baselines")
        res = reweight_judgments(own, items, where, ReweightSettings(budgets=tuple(s.budgets), n_repeats=s.n_repeats,
                                                                     top_k=tuple(s.top_k), seed=s.seed),
                                 baselines=bs, jobs=1 if ctx.stand_in else None, **ctx.wandb)
        docs[row]["baselines"] = out[row] = baseline_means(res["judges"][row], bs)
    return out


def baseline_means(judge: dict[str, Any], bs: Any) -> dict[str, Any]:
    """Means over a judge's sources (each source one cell, the paper's macro mean) of its base
    accuracy, its reweighting with the rubric's k attributes and at the LoRA budget, rubric
    prompting and LoRA SFT (every accuracy the paper's rule: the verdict read in order AB), and the
    differences the text states: reweighting minus rubric (Table 3), rubric minus base, reweighting
    minus LoRA SFT at the same labels (Table 2)."""
    def mean(values: list[float | None]) -> float | None:
        got = [v for v in values if v is not None]
        return float(np.mean(got)) if got else None

    cells = [r for r in judge["sources"].values() if r.get("baselines")]
    k, budget = str(bs.rubric_k), str(bs.lora_budget)
    out = {"n_sources": len(cells), "k": bs.rubric_k, "lora_budget": bs.lora_budget,
           "base": mean([r["base_accuracy"] for r in cells]),
           "reweight_k": mean([(r["top_k"].get(k) or r["top_k"]["all"])["accuracy"] for r in cells]),
           "reweight_budget": mean([(r["budgets"].get(budget) or r["budgets"]["all"])["mean"] for r in cells]),
           "rubric": mean([r["baselines"].get("rubric", {}).get("accuracy") for r in cells]),
           "lora_sft": mean([r["baselines"].get("lora_sft", {}).get("accuracy") for r in cells])}
    for key, a, b in (("reweight_minus_rubric", "reweight_k", "rubric"), ("rubric_minus_base", "rubric", "base"),
                      ("reweight_minus_lora", "reweight_budget", "lora_sft")):
        out[key] = None if out[a] is None or out[b] is None else out[a] - out[b]
    return out
