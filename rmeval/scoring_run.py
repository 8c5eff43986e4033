"""Score a rating set under a list of prompt conditions -> the scores table.

Scores table: one row per scored text -- ``prompt_id`` (the response's own prompt),
``response_id``, ``condition``, ``variant``, ``donor_prompt_id`` (None unless a donor's
conversation was used), ``score``. Identical (conversation, response) texts -- common across
conditions, e.g. a donor that is also a nearest neighbour -- are scored once. Resumable twice
over: rows already in ``out_path`` are not rescored, and with a ``cache_path`` every scored chunk is
committed to the score cache, so an interrupted run loses at most one chunk.
Truncation counts per condition are returned in ``df.attrs["truncation"]``; with a transplant
condition, ``df.attrs["donor_exclusions"]`` counts donors left out as near-duplicates.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmcore.data.schema import RatingSet
from rmcore.io import atomic_write_table, atomic_write_text, read_table
from rmeval.conditions import TRANSPLANTS, ConditionItem, build_condition, donor_exclusions
from rmeval.scoring.base import Scorer
from rmeval.scoring.cache import CachedScorer
from rmeval.tables import norm_id

log = logging.getLogger(__name__)

PROGRESS_CHUNK = 512  # texts per progress-bar step (the score cache commits chunks of the same size)
KEY_COLUMNS = ["prompt_id", "response_id", "condition", "variant", "donor_prompt_id"]
SCORE_COLUMNS = KEY_COLUMNS + ["score"]


def _norm_donor(v: Any) -> str | None:
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else norm_id(v)


def _row_key(row: Any) -> tuple:
    return (norm_id(row.prompt_id), norm_id(row.response_id), str(row.condition), int(row.variant),
            _norm_donor(row.donor_prompt_id))


def _fingerprint_file(out_path: str | os.PathLike) -> Path:
    p = Path(out_path)
    return p.with_name(p.name + ".scorer.json")


def data_digest(rating_set: RatingSet) -> str:
    """Content of a rating set (ids, conversations, responses): rows are keyed by ids, and two data
    sets can share ids, so an earlier run's rows are reused only for the same content."""
    import hashlib

    h = hashlib.sha256()
    for p in rating_set.prompts:
        h.update(json.dumps([str(p.prompt_id), p.messages, [(str(r.response_id), r.text) for r in p.responses]],
                            sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def _previous_rows(out_path: str | os.PathLike | None, fingerprint: str, digest: str) -> pd.DataFrame | None:
    """Rows of an earlier run into the same file, only if the same scorer (model and settings)
    made them on the same data: another checkpoint's or data set's scores must never be reused."""
    if out_path is None or not Path(out_path).exists():
        return None
    side = _fingerprint_file(out_path)
    made = json.loads(side.read_text()) if side.exists() else {}
    if made.get("fingerprint") != fingerprint:
        log.warning("%s was scored by another scorer (%s); rescoring", out_path, made.get("fingerprint"))
        return None
    if made.get("data") != digest:
        log.warning("%s was scored on other data; rescoring (the score cache keeps texts already seen)", out_path)
        return None
    prev = read_table(out_path, allow_empty=True)  # an earlier run may have had nothing to score
    return prev if len(prev) else None


def build_items(rating_set: RatingSet, conditions: list[str], **opts: Any) -> list[ConditionItem]:
    items: list[ConditionItem] = []
    for name in conditions:
        items += build_condition(name, rating_set, **opts)
    return items


def score_conditions(scorer: Scorer, rating_set: RatingSet, conditions: list[str], *,
                     out_path: str | os.PathLike | None = None, cache_path: str | os.PathLike | None = None,
                     progress: bool = True, label: str = "", **opts: Any) -> pd.DataFrame:
    """Scores table for ``conditions`` (names from ``rmeval.conditions.CONDITIONS``); ``opts`` go to
    every condition builder (n_donors, seed, related_file, paraphrase_file, embedder, ...).
    ``progress``: a progress bar per condition on stderr when it is a terminal, headed ``label``."""
    items = build_items(rating_set, conditions, **opts)
    done: dict[tuple, float] = {}
    digest = data_digest(rating_set)
    prev = _previous_rows(out_path, scorer.fingerprint, digest)
    if prev is not None:
        done = {_row_key(r): float(r.score) for r in prev.itertuples(index=False)}
        log.info("%s: %d rows already scored", out_path, len(done))
    todo = [it for it in items if it.key not in done]

    own_cache = None
    if cache_path is not None and not isinstance(scorer, CachedScorer):
        scorer = own_cache = CachedScorer(scorer, cache_path)
    # Deduplicate identical texts: one forward pass per distinct (conversation, response).
    unique: dict[str, int] = {}
    text_idx = []
    for it in todo:
        text_idx.append(unique.setdefault(scorer.render(it.item), len(unique)))
    uniq_items: list[Any] = [None] * len(unique)
    first_cond: list[str] = [""] * len(unique)
    for it, u in reversed(list(zip(todo, text_idx))):
        uniq_items[u], first_cond[u] = it.item, it.condition
    uniq_scores = np.zeros(len(uniq_items))
    flags = np.zeros((len(uniq_items), 2), bool)
    # Scored condition by condition, in chunks, so a long audit shows where it is (tqdm on stderr,
    # off when stderr is not a terminal or progress=False); scores do not depend on the batching.
    from tqdm.auto import tqdm

    for cond in conditions:
        idx = [u for u in range(len(uniq_items)) if first_cond[u] == cond]
        if not idx:
            continue
        desc = f"{label} {cond}" if label else cond
        with tqdm(total=len(idx), desc=desc, unit="text", disable=None if progress else True, leave=False) as bar:
            for i in range(0, len(idx), PROGRESS_CHUNK):
                chunk = idx[i:i + PROGRESS_CHUNK]
                uniq_scores[chunk] = scorer.score([uniq_items[u] for u in chunk])
                if len(scorer.last_flags) == len(chunk):
                    flags[chunk] = scorer.last_flags
                bar.update(len(chunk))

    trunc: dict[str, dict[str, int]] = {c: {"n": 0, "n_resumed": 0, "prompt_truncated": 0, "response_truncated": 0}
                                        for c in conditions}
    new_scores = {}
    for it, u in zip(todo, text_idx):
        new_scores[it.key] = float(uniq_scores[u])
        t = trunc[it.condition]
        t["n"] += 1
        t["prompt_truncated"] += int(flags[u, 0])
        t["response_truncated"] += int(flags[u, 1])
    rows = []
    for it in items:
        if it.key in done:
            trunc[it.condition]["n_resumed"] += 1
        rows.append(dict(zip(KEY_COLUMNS, it.key), score=done.get(it.key, new_scores.get(it.key))))
    df = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    df["variant"] = df["variant"].astype(int)
    df["donor_prompt_id"] = df["donor_prompt_id"].astype(object).where(df["donor_prompt_id"].notna(), None)
    df.attrs["truncation"] = trunc
    if any(c in TRANSPLANTS for c in conditions):
        df.attrs["donor_exclusions"] = donor_exclusions(rating_set.prompts)
    df.attrs["n_unique_texts"] = len(uniq_items)
    if out_path is not None:
        # The file keeps earlier conditions of the same scorer too; the returned table holds those asked for.
        keep = df
        if prev is not None:
            others = prev[~prev["condition"].isin(conditions)]
            keep = pd.concat([others[SCORE_COLUMNS], df], ignore_index=True) if len(others) else df
        atomic_write_table(out_path, keep)
        atomic_write_text(_fingerprint_file(out_path),
                          json.dumps({"fingerprint": scorer.fingerprint, "data": digest}) + "\n")
    if own_cache is not None:
        own_cache.cache.close()
    return df


def truncation_summary(df: pd.DataFrame) -> dict[str, Any]:
    """Totals over conditions plus the per-condition counts, for reports."""
    per = df.attrs.get("truncation", {})
    tot = {k: sum(v[k] for v in per.values()) for k in ("n", "n_resumed", "prompt_truncated", "response_truncated")}
    return {"total": tot, "by_condition": per}
