"""Confidence M of a reward model on (chosen, rejected) items, original and perturbed.

- sequence classifier and DPO implicit reward: M = σ(r_chosen − r_rejected);
- generative judge: the probability of the correct verdict averaged over both presentation orders,
  M = ½·[p_A(chosen, rejected) + 1 − p_A(rejected, chosen)] (``rmeval.scoring.pairwise_judge``).
Every text goes through the score cache, so an original pair shared by several perturbations (and
by a rerun) is scored once.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit

from rmcore.errors import ConfigError
from rmeval.perturbations.suite import Pair, PerturbedSet
from rmeval.scoring.base import Scorer
from rmeval.scoring.cache import CachedScorer
from rmeval.suitability.tables import PAIR_COLUMNS


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
