"""Confidence of a reward model on (chosen, rejected) items, original and perturbed, and whether the
model can see a perturbation at all.

- a reward (sequence classifier, DPO implicit reward, any registered scorer of one response), with
  the margin x = r_chosen − r_rejected: confidence σ(x) and log confidence log σ(x)
  (``scipy.special.log_expit``: exact where σ(x) underflows);
- a pairwise scorer (``Scorer.scores_pairs``: a generative judge's ``suitability_scorer``), with
  the verdict log-odds s(a, b) = log p(A) − log p(B) of ``rmeval.scoring.pairwise_judge``: the
  probability of the correct verdict averaged over both presentation orders,
  M = ½·[σ(s(c, r)) + σ(−s(r, c))], and its log, computed as
  logaddexp(log σ(s(c, r)), log σ(−s(r, c))) − log 2.

A twin is ``changed`` only when the scorer's own input changes (``Scorer.input_keys``): the token
ids a sequence classifier reads (chat template, truncation and all), the prompt and response ids of
a DPO model, the judge prompt's ids; a scorer of another kind is compared on its rendered text. A
perturbation the tokenizer normalises away (spaces before punctuation under a BERT tokenizer)
leaves the twin unchanged: it is not scored again (M′ = M exactly) and counts as ΔM = 0. Every text
goes through the score cache, so an original pair shared by several perturbations (and by a rerun)
is scored once.
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit, log_expit

from rmcore.console.progress import Progress
from rmeval.perturbations.suite import Pair, PerturbedSet
from rmeval.scoring.base import Scorer
from rmeval.scoring.cache import CachedScorer
from rmeval.scoring.run import PROGRESS_CHUNK
from rmeval.suitability.tables import PAIR_COLUMNS


def confidence_scorer(scorer: Scorer, cache_path: str | os.PathLike | None = None, *, judge_style: str = "verdict",
                      judge_explain_tokens: int = 256) -> tuple[Scorer, bool]:
    """(the scorer M is computed with, whether it opened its own cache): the scorer's
    ``suitability_scorer`` (a reward itself; a generative judge its pairwise-verdict scorer,
    ``judge_style``: verdict | explain); the score cache of a ``CachedScorer`` is reused, else one
    is opened at ``cache_path`` when given."""
    cached = scorer if isinstance(scorer, CachedScorer) else None
    inner = cached.inner if cached is not None else scorer
    inner = inner.suitability_scorer(judge_style=judge_style, judge_explain_tokens=judge_explain_tokens)
    if cached is not None:
        return (cached if inner is cached.inner else CachedScorer(inner, cached.cache)), False
    if cache_path is not None:
        return CachedScorer(inner, cache_path), True
    return inner, False


def _items(scorer: Scorer, pairs: list[Pair]) -> list[Any]:
    """The scorer's two items per pair: (chosen, rejected) responses, or both presentation orders."""
    items: list[Any] = []
    for p in pairs:
        msgs = p.message_list()
        if scorer.scores_pairs:
            items += [(msgs, (p.chosen, p.rejected)), (msgs, (p.rejected, p.chosen))]
        else:
            items += [(msgs, p.chosen), (msgs, p.rejected)]
    return items


def _score_unique(scorer: Scorer, items: list[Any], progress: str | None = None) -> np.ndarray:
    """Scores of ``items``, each distinct text scored once; with ``progress`` (its description) in
    chunks, the count shown on stderr (``rmcore.console.progress``; scores do not depend on the chunks)."""
    uniq: dict[str, int] = {}
    idx = [uniq.setdefault(scorer.render(it), len(uniq)) for it in items]
    todo: list[Any] = [None] * len(uniq)
    for it, u in zip(items, idx):
        todo[u] = it
    scores = np.zeros(len(todo))
    size = PROGRESS_CHUNK if progress else max(len(todo), 1)
    with Progress(progress or "", len(todo), unit="text", enabled=progress is not None and len(todo) > 0) as bar:
        for i in range(0, len(todo), size):
            chunk = todo[i:i + size]
            scores[i:i + len(chunk)] = scorer.score(chunk)
            bar.update(len(chunk))
    return scores[idx]


def pair_metrics(scorer: Scorer, pairs: list[Pair], progress: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, log confidence) per pair, scoring each distinct text once (``progress``: the
    description of its progress on stderr; None: none shown)."""
    if not pairs:
        return np.zeros(0), np.zeros(0)
    s = _score_unique(scorer, _items(scorer, pairs), progress).reshape(-1, 2)
    if scorer.scores_pairs:
        a, b = s[:, 0], -s[:, 1]  # log-odds of the right verdict in each order
        return 0.5 * (expit(a) + expit(b)), np.logaddexp(log_expit(a), log_expit(b)) - math.log(2.0)
    x = s[:, 0] - s[:, 1]
    return expit(x), log_expit(x)


def confidences(scorer: Scorer, pairs: list[Pair]) -> np.ndarray:
    """The confidence M per pair (``pair_metrics``' first part)."""
    return pair_metrics(scorer, pairs)[0]


def _inner(scorer: Scorer) -> Any:
    return scorer.inner if isinstance(scorer, CachedScorer) else scorer


def input_keys(scorer: Scorer, items: list[Any]) -> list[Hashable]:
    """What the scorer reads of each item (module doc), as something comparable (``Scorer.input_keys``)."""
    return _inner(scorer).input_keys(items)


def input_changed(scorer: Scorer, originals: list[Pair], perturbed: list[Pair]) -> np.ndarray:
    """Per twin: does the scorer read anything different in the perturbed pair?"""
    if not originals:
        return np.zeros(0, dtype=bool)
    texts: dict[str, int] = {}
    all_items = _items(scorer, originals) + _items(scorer, perturbed)
    idx = [texts.setdefault(scorer.render(it), len(texts)) for it in all_items]
    todo: list[Any] = [None] * len(texts)
    for it, u in zip(all_items, idx):
        todo[u] = it
    keys = input_keys(scorer, todo)
    n2 = 2 * len(originals)  # two items per pair: originals first, then their twins
    return np.array([keys[idx[j]] != keys[idx[n2 + j]] or keys[idx[j + 1]] != keys[idx[n2 + j + 1]]
                     for j in range(0, n2, 2)], dtype=bool)


def score_suite(scorer: Scorer, suite: list[PerturbedSet], progress: bool = True) -> pd.DataFrame:
    """The pairs table of a built suite (failed twins are absent from it; see ``suite_counts``):
    confidence and log confidence of original and perturbed, ``changed`` (the scorer's input);
    ``progress``: the scoring's count on stderr."""
    twins = [(ps.spec, t) for ps in suite for t in ps.twins if t.perturbed is not None]
    changed = input_changed(scorer, [t.original for _, t in twins], [t.perturbed for _, t in twins])
    to_score = [t.original for _, t in twins] + [t.perturbed for (_, t), c in zip(twins, changed) if c]
    m, log_m = pair_metrics(scorer, to_score, progress="scoring suitability pairs" if progress else None)
    n = len(twins)
    mp, lp = m[:n].copy(), log_m[:n].copy()  # an unchanged twin: exactly its original's values
    mp[changed], lp[changed] = m[n:], log_m[n:]
    rows = [{"item_id": t.item_id, "perturbation": spec, "m_original": float(m[k]), "m_perturbed": float(mp[k]),
             "log_m_original": float(log_m[k]), "log_m_perturbed": float(lp[k]), "changed": bool(changed[k]),
             "text_changed": bool(t.changed)} for k, (spec, t) in enumerate(twins)]
    return pd.DataFrame(rows, columns=[*PAIR_COLUMNS, "log_m_original", "log_m_perturbed", "changed", "text_changed"])


def suite_counts(suite: list[PerturbedSet]) -> dict[str, dict[str, Any]]:
    return {ps.spec: {"source": ps.source, **ps.counts()} for ps in suite}
