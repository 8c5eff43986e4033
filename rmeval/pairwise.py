"""Pairwise accuracy of a reward model on a preference set (RM-Bench's style matrix, HH-RLHF,
RewardBench sections): the share of released labels whose chosen response it scores higher, with
a prompt-bootstrap interval (``rmeval.stats.pairwise``). Only the original condition is scored."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmcore.checkpoints import display_name
from rmcore.data.schema import RatingSet
from rmcore.errors import DataError

if TYPE_CHECKING:
    from rmcore.tracking import Tracker
    from rmeval.scoring import Scorer, ScorerSettings

STYLES = ("concise", "detailed", "markdown")  # RM-Bench's style levels, the matrix's rows and columns


@dataclass
class PairwiseSettings:
    n_boot: int = 2000  # prompt-bootstrap resamples
    seed: int = 0
    ties: str = "half"  # a tied pair counts 0.5 (half) or 0 (wrong: RM-Bench's and RewardBench's rule)
    cache: str | None = None  # score cache file; None: OUT/score_cache.sqlite
    progress: bool = True


def pairwise(scorer: Scorer, rating_set: RatingSet, settings: PairwiseSettings, out: str | os.PathLike, *,
             tracker: Tracker | None = None, label: str = "", data: str | None = None) -> dict[str, Any]:
    """Score the original texts of ``rating_set`` (closing the scorer) and write OUT/pairwise.json,
    OUT/pairwise.md and the preferences table; ``data`` names the set in errors."""
    import numpy as np

    from rmcore.io import atomic_write_json, atomic_write_table, atomic_write_text
    from rmcore.tracking import flatten
    from rmeval.scoring_run import score_conditions, truncation_summary
    from rmeval.stats.pairwise import pairwise_accuracy

    out = Path(out)
    prefs = _preferences(rating_set, data)
    try:
        scores = score_conditions(scorer, rating_set, ["original"], out_path=out / "scores.parquet",
                                  cache_path=Path(settings.cache) if settings.cache else out / "score_cache.sqlite",
                                  progress=settings.progress, label=label)
    finally:
        scorer.close()
    res = pairwise_accuracy(prefs, scores[["prompt_id", "response_id", "score"]], n_boot=settings.n_boot,
                            rng=np.random.default_rng(settings.seed), ties=settings.ties)
    res["truncation"] = truncation_summary(scores)["total"]
    atomic_write_table(out / "preferences.parquet", prefs)
    atomic_write_json(out / "pairwise.json", res)
    atomic_write_text(out / "pairwise.md", pairwise_markdown(label, res))
    if tracker is not None:
        tracker.log({k: v for k, v in flatten(res, "pairwise").items() if isinstance(v, (int, float))})
    return res


def _preferences(rating_set: RatingSet, data: str | None) -> Any:
    prefs = rating_set.preferences_table()
    if prefs is None:
        raise DataError(f"{data or rating_set.name}: the rating set has no preference labels")
    return prefs


def pairwise_checkpoint(checkpoint: str | os.PathLike, rating_set: RatingSet, scorer: ScorerSettings,
                        settings: PairwiseSettings, out: str | os.PathLike, *, name: str, data: str | None = None,
                        wandb_project: str = "matchrm", wandb_mode: str | None = None) -> dict[str, Any]:
    """``pairwise`` of a saved checkpoint, with a W&B run of its own (``pairwise-<name>``)."""
    from rmeval.scoring import load_scorer
    from rmeval.tracking import evaluation_tracker

    _preferences(rating_set, data)  # before any model is loaded
    model = load_scorer(replace(scorer, model=str(checkpoint)))
    tracker = evaluation_tracker(f"pairwise-{name}", out, {"checkpoint": str(checkpoint), "data": data},
                                 checkpoint=checkpoint, project=wandb_project, mode=wandb_mode)
    try:
        return pairwise(model, rating_set, settings, out, tracker=tracker, label=display_name(name, checkpoint),
                        data=data)
    finally:
        tracker.finish()


def pairwise_line(label: str, res: dict[str, Any], n_pairs: int, out: str | os.PathLike) -> str:
    tr = res["truncation"]
    return (f"{label}: pairwise accuracy {res['accuracy']['estimate']:.3f} on {n_pairs} pairs "
            f"({tr['prompt_truncated']} prompts, {tr['response_truncated']} responses truncated) -> {out}")


def pairwise_markdown(name: str, res: dict[str, Any]) -> str:
    """The report: overall accuracy, RewardBench sections, per-group accuracy, RM-Bench's matrix."""
    from rmcore.markdown import estimate, num, table

    lines = [f"# Pairwise accuracy: {name}", "", f"Accuracy: {estimate(res['accuracy'])} "
             f"(ties count {'0.5' if res.get('ties', 'half') == 'half' else '0'}; {res.get('n_ties', 0)} tied pairs)", ""]
    if "rewardbench" in res:
        rb = res["rewardbench"]
        lines += ["## RewardBench sections (subsets weighted by RewardBench's example counts)", ""]
        lines += table(["section", "accuracy"], [[k, estimate(v)] for k, v in rb["sections"].items()])
        lines += [f"| score (mean of sections) | {estimate(rb['score'])} |", ""]
    for key in ("by_section", "by_subset"):
        if key in res:
            lines += [f"## {key.replace('_', ' ')}", ""]
            lines += table(["group", "accuracy"], [[g, estimate(r)] for g, r in res[key].items()]) + [""]
    if "rmbench" in res:
        rb = res["rmbench"]
        lines += ["## RM-Bench style matrix (rows: chosen style, columns: rejected style)", ""]
        lines += table(["chosen \\ rejected", *STYLES], [[STYLES[i], *(num(v) for v in row)]
                                                        for i, row in enumerate(rb["matrix"])])
        lines += ["", " ".join(f"{k}: {estimate(rb[k])}" for k in ("hard", "normal", "easy", "average") if k in rb)]
    return "\n".join(lines) + "\n"


def write_pairwise_summary(results: dict[str, dict[str, Any]], out: str | os.PathLike) -> Path:
    """OUT/summary.json: every checkpoint's figures, flattened, side by side."""
    from rmcore.io import atomic_write_json
    from rmcore.tracking import flatten

    return atomic_write_json(Path(out) / "summary.json", {n: flatten(r) for n, r in results.items()})
