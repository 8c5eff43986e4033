"""Profile a judge checkpoint as part of its audit (``rmeval audit --judge-items FILE``).

The checkpoint (a causal LM, or a LoRA adapter such as the SFT baseline's) is elicited on the
items, its order consistency, position bias and priority weights are computed, and when the items
carry labels it is reweighted toward them; the figures join the audit dict under
``judge_profile`` (hence W&B, beside the other audit metrics) and the plot is returned for logging.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rmcore.io.files import atomic_write_json

from .analysis import analyze
from .elicit import LocalPairJudge, elicit_shard, merge_shards, questions_for
from .inventory import load_inventory
from .plots import weight_profiles
from .reweight import reweight
from .store import load_store
from .tables import load_items


def profile_checkpoint(checkpoint: str | os.PathLike, items_path: str | os.PathLike, out: str | os.PathLike, *,
                       attribute_names: list[str] | None = None, attributes_file: str | None = None,
                       max_length: int = 4096, batch_size: int = 32, device: str | None = None,
                       budgets: tuple[int, ...] = (32, 64, 128, 256), n_repeats: int = 5,
                       seed: int = 0) -> tuple[dict[str, Any], dict[str, Path]]:
    """(figures for the audit, plots) of one judge checkpoint; outputs under ``out``."""
    out = Path(out)
    items = load_items(items_path)
    attrs = load_inventory(attributes_file, extend=bool(attributes_file), names=attribute_names or ["core"])
    judge = LocalPairJudge(checkpoint, name=Path(str(checkpoint).rstrip("/")).name or "judge",
                           max_length=max_length, batch_size=batch_size, device=device)
    try:
        stats = elicit_shard(items, judge, questions_for(attrs), out, progress=False)
    finally:
        judge.close()
    judgments = load_store(merge_shards(out, judges=[stats.judge]))
    an = analyze(judgments, seed=seed, n_splits=10, controls=False, jobs=1)  # one judge: no panel controls
    atomic_write_json(out / "analysis.json", an)
    j = an["judges"][stats.judge]
    prof: dict[str, Any] = {
        "n_items": int(len(items)), "n_calls": stats.n_cells, "n_malformed": stats.n_malformed,
        "n_unresolved": stats.n_unresolved, "order_consistency": j["order_consistency"],
        "stable_rate": j["stable_rate"], "first_position_rate": j["position_bias"]["first_rate"],
        "overall_first_position_rate": j["position_bias"]["overall_first_rate"],
        "overall_stable_rate": j["overall_stable_rate"], "cv_accuracy": j["cv_accuracy"],
        "split_half_spearman_brown": j["split_half"]["spearman_brown"], "n_fit_items": j["n_items"],
        "weights": j["weights"]}
    images: dict[str, Path] = {}
    if j["weights"]:
        images["weights"] = weight_profiles({stats.judge: j["weights"]}, out / "weight_profile.png",
                                            title=f"priority weights of {stats.judge}")
    if items["label"].isin(["A", "B"]).any():
        rw = reweight(items, judgments, budgets=budgets, n_repeats=n_repeats, seed=seed, jobs=1)
        atomic_write_json(out / "reweight.json", rw)
        prof["reweight"] = {s: {k: r.get(k) for k in ("base_accuracy", "base_accuracy_stable", "reweighted_accuracy",
                                                      "gain", "n_test")}
                            for s, r in rw["judges"][stats.judge]["sources"].items()}
    return prof, images
