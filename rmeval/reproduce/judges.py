"""JudgeProfile's tables on the public sources matchrm loads: every judge elicited on one items table
(each source a preference set: RM-Bench in the paper's 0:2 style pairing, HH-RLHF, HelpSteer2's
preferences, SHP, RewardBench ...), then, over the panel, the reweighting toward the sources'
reference labels (``rmeval.judges.reweight``: base one-order accuracy -> reweighted, on a 25%
held-out split of every source) and the agreement analysis (``rmeval.judges.analysis``: attribute
agreement where judges' overall verdicts differ, the hidden consensus)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rmcore.device import Placement
from rmcore.io import atomic_write_table
from rmeval.judges.analysis import AnalysisSettings
from rmeval.judges.pipeline import (
    ElicitConfig,
    ReweightSettings,
    analyze_judgments,
    reweight_judgments,
    run_elicit,
)
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


def elicit_judge(ctx: Any, m: Any) -> dict[str, str]:
    """One judge's attribute and overall verdicts in both orders (OUT/rows/<judge>/)."""
    s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in)
    items = _items_table(ctx, s)
    out = ctx.row_dir(m.name)
    model = ctx.model_path(m)
    endpoint = ctx.endpoint(m)
    cfg = ElicitConfig(out=str(out), items=str(items), model=None if endpoint else str(model),
                       endpoint=endpoint, endpoint_model=m.hub_id if endpoint else None, judge_name=m.name,
                       attributes=s.attributes_file, attribute_names=list(s.attributes), batch_size=m.batch_size,
                       max_length=ctx.max_length(m) or 4096, placement=Placement(**ctx.placement(m)),
                       chunk_items=s.chunk_items, progress=False, seed=s.seed)
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
    """Reweighting and agreement over the judges present; each judge's row gains its ``reweight``."""
    import pandas as pd

    s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in)
    present = {row: d["elicit"]["judgments"] for row, d in docs.items() if "elicit" in d}
    if not present:
        return {}
    panel_dir = ctx.out / "panel"
    judgments = atomic_write_table(panel_dir / "judgments.jsonl",
                                   pd.concat([load_judgments(p) for p in present.values()], ignore_index=True))
    items = ctx.out / "data" / "items.jsonl"
    rw = reweight_judgments(judgments, items, panel_dir / "reweight",
                            ReweightSettings(budgets=tuple(s.budgets), n_repeats=s.n_repeats, top_k=tuple(s.top_k),
                                             seed=s.seed), **ctx.wandb)
    for row, jr in rw["judges"].items():
        if row in docs:
            docs[row]["reweight"] = jr
    summary = dict(rw["summary"])
    if summary.get("n_judges"):
        summary["share_improved"] = summary["n_judges_improved"] / summary["n_judges"]
    panel: dict[str, Any] = {"reweight": summary, "sources": _source_means(rw["judges"]), "n_judges": len(present)}
    if len(present) >= 2:
        settings = AnalysisSettings(seed=s.seed, n_splits=s.n_splits, null_repeats=s.null_repeats,
                                    attributes_file=s.attributes_file, min_shared=s.min_shared)
        res = analyze_judgments(judgments, panel_dir / "analysis", items=items, settings=settings, **ctx.wandb)
        panel["agreement"] = {k: v for k, v in res["agreement"].items() if k != "per_attribute"}
        if "no_conflict" in res:
            panel["no_conflict"] = {k: v for k, v in res["no_conflict"].items() if k != "thresholds"}
    return panel
