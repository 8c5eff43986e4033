"""Pairwise accuracy of a reward model on a preference set (RM-Bench's style matrix, HH-RLHF,
RewardBench sections): the share of released labels whose chosen response it scores higher, with
a prompt-bootstrap interval (``rmeval.stats.pairwise``). Only the original condition is scored.

On RewardBench (``rewardbench`` data) the report adds RewardBench's section-weighted score; on
RewardBench 2 (``rewardbench2``) its best-of-N accuracy per subset, the Ties score and the overall
score (``rmeval.stats.rewardbench2``). ``pairwise.json``'s ``meta`` records the checkpoint, the data,
the scorer and where the model ran (device, dtype, attention kernel, loader)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmcore.data.rewardbench import rewardbench2_table
from rmcore.data.schema import RatingSet
from rmcore.errors import DataError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.io.markdown import estimate, num, table
from rmcore.io.tables import atomic_write_table
from rmcore.runtime.checkpoints import display_name
from rmcore.runtime.wandb_log import flatten
from rmeval.audit.settings import PairwiseSettings
from rmeval.scoring import load_scorer
from rmeval.scoring.run import score_conditions, truncation_note, truncation_summary
from rmeval.stats.pairwise import pairwise_accuracy
from rmeval.stats.rewardbench2 import rewardbench2_scores
from rmeval.tracking import evaluation_tracker

if TYPE_CHECKING:
    from rmcore.runtime.wandb_log import Tracker
    from rmeval.scoring import Scorer, ScorerSettings
    from rmeval.scoring.run import Shard

STYLES = ("concise", "detailed", "markdown")  # RM-Bench's style levels, the matrix's rows and columns


def pairwise(scorer: Scorer, rating_set: RatingSet, settings: PairwiseSettings, out: str | os.PathLike, *,
             tracker: Tracker | None = None, label: str = "", data: str | None = None,
             checkpoint: str | os.PathLike | None = None, shard: Shard | None = None) -> dict[str, Any] | None:
    """Score the original texts of ``rating_set`` (closing the scorer) and write OUT/pairwise.json,
    OUT/pairwise.md and the preferences table; ``data`` names the set in errors. ``shard``: this
    process's share of a multi-process run (the main process returns the result, the others None)."""
    import numpy as np

    out = Path(out)
    prefs = _preferences(rating_set, data)
    placement = scorer.describe()
    try:
        scores = score_conditions(scorer, rating_set, ["original"], out_path=out / "scores.parquet",
                                  cache_path=Path(settings.cache) if settings.cache else out / "score_cache.sqlite",
                                  progress=settings.progress, label=label, shard=shard)
    finally:
        scorer.close()
    if scores is None:  # another process's share: the main process reports
        return None
    table = scores[["prompt_id", "response_id", "score"]]
    res = pairwise_accuracy(prefs, table, n_boot=settings.n_boot, rng=np.random.default_rng(settings.seed),
                            ties=settings.ties)
    rb2 = rewardbench2_table(rating_set)
    if rb2 is not None:
        res["rewardbench2"] = rewardbench2_scores(rb2, table, n_boot=settings.n_boot, rng=settings.seed)
    res["truncation"] = truncation_summary(scores)["total"]
    res["meta"] = {"checkpoint": None if checkpoint is None else str(checkpoint), "data": data,
                   "rating_set": rating_set.name, "n_pairs": len(prefs), "scorer": scorer.kind,
                   "placement": placement, "max_length": getattr(scorer, "max_length", None),
                   "n_processes": scores.attrs.get("n_processes", 1),
                   "skipped": dict(rating_set.skipped)}
    atomic_write_table(out / "preferences.parquet", prefs)
    atomic_write_json(out / "pairwise.json", res)
    atomic_write_text(out / "pairwise.md", pairwise_markdown(label, res))
    if tracker is not None:
        tracker.log({k: v for k, v in flatten({k: v for k, v in res.items() if k != "meta"}, "pairwise").items()
                     if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return res


def _preferences(rating_set: RatingSet, data: str | None) -> Any:
    prefs = rating_set.preferences_table()
    if prefs is None:
        raise DataError(f"{data or rating_set.name}: the rating set has no preference labels")
    return prefs


def pairwise_checkpoint(checkpoint: str | os.PathLike, rating_set: RatingSet, scorer: ScorerSettings,
                        settings: PairwiseSettings, out: str | os.PathLike, *, name: str, data: str | None = None,
                        wandb_project: str | None = None, wandb_mode: str | None = None,
                        wandb_group: str | None = None, shard: Shard | None = None) -> dict[str, Any] | None:
    """``pairwise`` of a saved checkpoint, with a W&B run of its own (``pairwise-<name>``, in its
    training run's project and group unless ``wandb_project`` / ``wandb_group`` name others; the main
    process's alone when several share the scoring)."""
    _preferences(rating_set, data)  # before any model is loaded
    model = load_scorer(replace(scorer, model=str(checkpoint)))
    label = display_name(name, checkpoint)
    if shard is not None and not shard.main:
        return pairwise(model, rating_set, settings, out, label=label, data=data, checkpoint=checkpoint, shard=shard)
    tracker = evaluation_tracker(f"pairwise-{name}", out, {"checkpoint": str(checkpoint), "data": data},
                                 checkpoint=checkpoint, project=wandb_project, group=wandb_group, mode=wandb_mode)
    try:
        return pairwise(model, rating_set, settings, out, tracker=tracker, label=label, data=data,
                        checkpoint=checkpoint, shard=shard)
    finally:
        tracker.finish()


def pairwise_line(label: str, res: dict[str, Any], n_pairs: int, out: str | os.PathLike) -> str:
    """The command's one line per checkpoint: accuracy, benchmark scores, truncation counts."""
    bench = ""
    if "rewardbench" in res:
        bench += f", RewardBench score {res['rewardbench']['score']['estimate']:.3f}"
    if "rewardbench2" in res:
        bench += f", RewardBench 2 score {res['rewardbench2']['score']['estimate']:.3f}"
    return (f"{label}: pairwise accuracy {res['accuracy']['estimate']:.3f} on {n_pairs} pairs{bench} "
            f"({truncation_note(res['truncation'])}) -> {out}")


def pairwise_markdown(name: str, res: dict[str, Any]) -> str:
    """The report: overall accuracy, RewardBench sections, per-group accuracy, RM-Bench's matrix."""
    lines = [f"# Pairwise accuracy: {name}", "", f"Accuracy: {estimate(res['accuracy'])} "
             f"(ties count {'0.5' if res.get('ties', 'half') == 'half' else '0'}; "
             f"{res.get('n_ties', 0)} tied pairs)", ""]
    if "rewardbench" in res:
        rb = res["rewardbench"]
        lines += ["## RewardBench sections (subsets weighted by RewardBench's example counts)", ""]
        lines += table(["section", "accuracy"], [[k, estimate(v)] for k, v in rb["sections"].items()])
        lines += [f"| score (mean of sections) | {estimate(rb['score'])} |", ""]
        if rb.get("missing_sections"):
            # the two rules differ only when a section is absent: say so, with both numbers
            n = len(rb["sections"])
            lines += [f"Sections missing: {', '.join(rb['missing_sections'])}. The score above is the mean of the "
                      f"{n} sections present ({num(rb['score']['estimate'])}); RewardBench's script counts a missing "
                      f"section 0 and averages all {n + len(rb['missing_sections'])}: "
                      f"{estimate(rb['score_missing_as_zero'])}.", ""]
    for key in ("by_section", "by_subset"):
        if key in res:
            lines += [f"## {key.replace('_', ' ')}", ""]
            lines += table(["group", "accuracy"], [[g, estimate(r)] for g, r in res[key].items()]) + [""]
    if "rewardbench2" in res:
        rb2 = res["rewardbench2"]
        lines += ["## RewardBench 2 (best of N; Ties by its own rule)", ""]
        lines += table(["subset", "score", "prompts"], [[k, estimate(v), str(v["n_prompts"])]
                                                        for k, v in rb2["subsets"].items()])
        lines += [f"| score (mean of subsets) | {estimate(rb2['score'])} | |", ""]
        if "ties" in rb2:
            lines += ["Ties components: " + ", ".join(f"{k} {num(v)}" for k, v in rb2["ties"].items()), ""]
    if "rmbench" in res:
        rb = res["rmbench"]
        lines += ["## RM-Bench style matrix (rows: chosen style, columns: rejected style)", ""]
        lines += table(["chosen \\ rejected", *STYLES], [[STYLES[i], *(num(v) for v in row)]
                                                        for i, row in enumerate(rb["matrix"])])
        lines += ["", " ".join(f"{k}: {estimate(rb[k])}" for k in ("hard", "normal", "easy", "average") if k in rb)]
    return "\n".join(lines) + "\n"


def write_pairwise_summary(results: dict[str, dict[str, Any]], out: str | os.PathLike) -> Path:
    """OUT/summary.json: every checkpoint's figures, flattened, side by side."""
    return atomic_write_json(Path(out) / "summary.json", {n: flatten(r) for n, r in results.items()})
