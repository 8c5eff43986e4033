"""Score a rating set under a list of prompt conditions -> the scores table.

Scores table: one row per scored text -- ``prompt_id`` (the response's own prompt),
``response_id``, ``condition``, ``variant``, ``donor_prompt_id`` (None unless a donor's
conversation was used), ``score``, and whether the text's prompt and response were cut to fit
(``prompt_truncated``, ``response_truncated``: a rerun that resumes from the table keeps its
truncation counts). Identical (conversation, response) texts -- common across
conditions, e.g. a donor that is also a nearest neighbour -- are scored once. Resumable twice
over: rows already in ``out_path`` are not rescored, and with a ``cache_path`` every scored chunk is
committed to the score cache, so an interrupted run loses at most one chunk.
Truncation counts per condition (over every row, resumed ones included) are returned in
``df.attrs["truncation"]``; with a transplant
condition, ``df.attrs["donor_exclusions"]`` counts donors left out as near-duplicates.

Several processes (``accelerate launch``/``torchrun``: ``RANK``, ``WORLD_SIZE``; a ``Shard``) share
one scoring run: every process builds the same unique texts, groups them by conversation (so a
prompt's texts stay together and keep their shared-prefix reuse) and assigns whole groups to ranks,
longest total text first to the least loaded rank (the LPT rule: no rank holds more than 4/3 of an
even share plus one group). Each rank scores its groups and writes its part atomically beside the
scores table (``.parts/<content>.rank<r>-of-<W>.parquet``, named by a hash of the scorer and the texts,
so a rerun of the same work reuses a part already written); the main process waits for every part,
merges them into the one scores table, and deletes them. The table equals a one-process run's
(each text is scored alone; batching does not change a score). Non-main processes return None.
Only the process group's environment is read: no collective communication, so no timeout of a
communication backend can cut a long run short, and a rank that dies stops the launcher's others.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmcore.console.progress import Progress
from rmcore.data.schema import RatingSet
from rmcore.io.cache import content_key
from rmcore.io.files import atomic_write_text
from rmcore.io.tables import atomic_write_table, read_table
from rmeval.conditions import TRANSPLANTS, ConditionItem, build_condition, donor_exclusions
from rmeval.scoring.base import Scorer
from rmeval.scoring.cache import CachedScorer
from rmeval.tables import norm_id

log = logging.getLogger(__name__)

PROGRESS_CHUNK = 512  # texts per progress-bar step (the score cache commits chunks of the same size)
KEY_COLUMNS = ["prompt_id", "response_id", "condition", "variant", "donor_prompt_id"]
FLAG_COLUMNS = ["prompt_truncated", "response_truncated"]
SCORE_COLUMNS = KEY_COLUMNS + ["score"] + FLAG_COLUMNS


@dataclass(frozen=True)
class Shard:
    """This process's place among the processes that share a scoring run."""

    rank: int = 0
    world: int = 1

    @classmethod
    def from_env(cls) -> Shard:
        """The launcher's RANK and WORLD_SIZE (one process: rank 0 of 1)."""
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        rank = int(os.environ.get("RANK", "0") or 0)
        if not 0 <= rank < world:
            raise ValueError(f"RANK {rank} is not below WORLD_SIZE {world}")
        return cls(rank, world)

    @property
    def main(self) -> bool:
        return self.rank == 0


def assign_shards(items: list[Any], lengths: list[int], world: int) -> np.ndarray:
    """The rank of each item: items of one conversation (``item[0]``) go together; groups, longest
    total first, each to the least loaded rank (ties: the lowest rank). The same on every rank."""
    groups: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(json.dumps(it[0], sort_keys=True, default=str), []).append(i)
    load = np.zeros(world)
    rank = np.zeros(len(items), dtype=int)
    for idx in sorted(groups.values(), key=lambda g: (-sum(lengths[i] for i in g), g[0])):
        r = int(np.argmin(load))
        rank[idx] = r
        load[r] += sum(lengths[i] for i in idx)
    return rank


def node_cache(path: Path, shard: Shard | None) -> Path:
    """The score cache file of this process: ``path``, or on a run spread over several machines one
    file per machine (``<stem>.node<N>``): SQLite's locking of a WAL database holds between
    processes of one machine only."""
    if shard is None or shard.world == 1:
        return path
    if shard.world <= int(os.environ.get("LOCAL_WORLD_SIZE", shard.world) or shard.world):
        return path
    node = os.environ.get("GROUP_RANK") or os.environ.get("NODE_RANK") or "0"
    return path.with_name(f"{path.stem}.node{node}{path.suffix}")


def _parts_dir(out_path: str | os.PathLike) -> Path:
    return Path(out_path).parent / ".parts"


def _part_path(out_path: str | os.PathLike, token: str, shard: Shard, rank: int) -> Path:
    return _parts_dir(out_path) / f"{Path(out_path).stem}.{token}.rank{rank}-of-{shard.world}.parquet"


def _read_part(path: Path) -> pd.DataFrame | None:
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError):  # not there yet (parts are renamed into place whole)
        return None


def _wait_for_parts(paths: list[Path], poll: float = 1.0) -> list[pd.DataFrame]:
    """Every part, once each is there; says every minute which it still waits for."""
    parts: dict[Path, pd.DataFrame] = {}
    start = last = time.monotonic()
    while len(parts) < len(paths):
        for p in paths:
            if p not in parts and (df := _read_part(p)) is not None:
                parts[p] = df
        if len(parts) < len(paths):
            if time.monotonic() - last > 60:
                last = time.monotonic()
                log.info("waiting %.0f s for the scores of %s", last - start,
                         ", ".join(p.name for p in paths if p not in parts))
            time.sleep(poll)
    return [parts[p] for p in paths]


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
    if len(prev) and not set(FLAG_COLUMNS) <= set(prev.columns):
        # written before the table kept truncation flags: its rows would resume with counts unknown;
        # rescore instead (the score cache answers every text it has seen, flags included)
        log.info("%s has no truncation flags; rescoring through the score cache", out_path)
        return None
    return prev if len(prev) else None


def build_items(rating_set: RatingSet, conditions: list[str], **opts: Any) -> list[ConditionItem]:
    items: list[ConditionItem] = []
    for name in conditions:
        items += build_condition(name, rating_set, **opts)
    return items


def score_conditions(scorer: Scorer, rating_set: RatingSet, conditions: list[str], *,
                     out_path: str | os.PathLike | None = None, cache_path: str | os.PathLike | None = None,
                     progress: bool = True, label: str = "", shard: Shard | None = None,
                     **opts: Any) -> pd.DataFrame | None:
    """Scores table for ``conditions`` (names from ``rmeval.conditions.CONDITIONS``); ``opts`` go to
    every condition builder (n_donors, seed, related_file, paraphrase_file, embedder, ...).
    ``progress``: the scoring's progress on stderr, headed ``label`` (``rmcore.console.progress``: a bar on a
    terminal, a line every half minute elsewhere).
    ``shard``: this process's share of a run over several processes (needs ``out_path``, beside
    which the parts go); the main process returns the whole table, the others None."""
    items = build_items(rating_set, conditions, **opts)
    done: dict[tuple, tuple[float, bool, bool]] = {}  # key -> (score, prompt cut, response cut)
    digest = data_digest(rating_set)
    prev = _previous_rows(out_path, scorer.fingerprint, digest)
    if prev is not None:
        done = {_row_key(r): (float(r.score), bool(r.prompt_truncated), bool(r.response_truncated))
                for r in prev.itertuples(index=False)}
        log.info("%s: %d rows already scored", out_path, len(done))
    todo = [it for it in items if it.key not in done]

    own_cache = None
    if cache_path is not None and not isinstance(scorer, CachedScorer):
        scorer = own_cache = CachedScorer(scorer, node_cache(Path(cache_path), shard))
    text_idx, uniq_items, first_cond = _unique_texts(scorer, todo)
    sharded = shard is not None and shard.world > 1
    progress = progress and (shard is None or shard.main)  # one set of progress bars on a terminal
    if sharded and out_path is None:
        raise ValueError("a scoring run shared by several processes needs out_path (its parts go beside it)")
    mine = np.ones(len(uniq_items), dtype=bool)
    part, token, reused = None, "", False
    if sharded:
        mine, token, part, reused = _my_share(scorer, uniq_items, out_path, shard)
    uniq_scores, flags = _score_unique(scorer, conditions, uniq_items, first_cond, mine, progress=progress,
                                       label=label)
    if own_cache is not None and own_cache.hits and (shard is None or shard.main):
        # an interrupted run resumed (or texts an earlier run scored): say what was not scored again
        log.info("%s%d of %d texts' scores reused from the score cache %s (scored by an earlier run); %d scored now",
                 f"{label}: " if label else "", own_cache.hits, own_cache.hits + own_cache.misses, cache_path,
                 own_cache.misses)
    if sharded:
        assert part is not None
        if not reused:  # written even when empty: the main process waits for every rank's part
            u = np.flatnonzero(mine)
            atomic_write_table(part, pd.DataFrame({"u": u, "score": uniq_scores[u], "prompt_truncated": flags[u, 0],
                                                   "response_truncated": flags[u, 1]}))
        if not shard.main:
            if own_cache is not None:
                own_cache.cache.close()
            return None
        _merge_parts(out_path, token, shard, uniq_scores, flags)
    df = _scores_table(rating_set, conditions, items, todo, text_idx, done, uniq_scores, flags)
    if out_path is not None:
        _write_scores(out_path, df, prev, conditions, scorer.fingerprint, digest, shard if sharded else None, token)
    df.attrs["n_processes"] = shard.world if sharded else 1
    if own_cache is not None:
        own_cache.cache.close()
    return df


def _unique_texts(scorer: Scorer, todo: list[ConditionItem]) -> tuple[list[int], list[Any], list[str]]:
    """Deduplicate identical texts: one forward pass per distinct (conversation, response). Returns each
    item's text index, the distinct items, and the first condition (in ``todo`` order) of each."""
    unique: dict[str, int] = {}
    text_idx = []
    for it in todo:
        text_idx.append(unique.setdefault(scorer.render(it.item), len(unique)))
    uniq_items: list[Any] = [None] * len(unique)
    first_cond: list[str] = [""] * len(unique)
    for it, u in reversed(list(zip(todo, text_idx))):
        uniq_items[u], first_cond[u] = it.item, it.condition
    return text_idx, uniq_items, first_cond


def _my_share(scorer: Scorer, uniq_items: list[Any], out_path: str | os.PathLike,
              shard: Shard) -> tuple[np.ndarray, str, Path, bool]:
    """This rank's share of the distinct texts: (which are mine, the work's content token, my part's path,
    whether my part is already written, in which case none are left to score)."""
    renders = [scorer.render(it) for it in uniq_items]
    token = content_key(scorer.fingerprint, *renders)[:16]
    owner = assign_shards(uniq_items, [len(r) for r in renders], shard.world)
    mine = owner == shard.rank
    part = _part_path(out_path, token, shard, shard.rank)
    reused = _read_part(part) is not None  # this rank's share of the same work, already scored
    if reused:
        mine[:] = False
    return mine, token, part, reused


def _score_unique(scorer: Scorer, conditions: list[str], uniq_items: list[Any], first_cond: list[str],
                  mine: np.ndarray, *, progress: bool, label: str) -> tuple[np.ndarray, np.ndarray]:
    """Scores and truncation flags (prompt, response) of the distinct texts marked ``mine`` (zeros elsewhere)."""
    uniq_scores = np.zeros(len(uniq_items))
    flags = np.zeros((len(uniq_items), 2), bool)
    # Scored condition by condition, in chunks, so a long audit shows where it is: one count over
    # every text to score, the condition beside it (rmcore.console.progress: a bar on a terminal, periodic
    # lines on any other stderr); scores do not depend on the batching.
    by_cond = {cond: [u for u in range(len(uniq_items)) if first_cond[u] == cond and mine[u]] for cond in conditions}
    total = sum(len(idx) for idx in by_cond.values())
    with Progress(f"scoring {label}" if label else "scoring", total, unit="text",
                  enabled=progress and total > 0) as bar:
        for cond, idx in by_cond.items():
            if idx:
                bar.set_postfix(condition=cond)
            for i in range(0, len(idx), PROGRESS_CHUNK):
                chunk = idx[i:i + PROGRESS_CHUNK]
                uniq_scores[chunk] = scorer.score([uniq_items[u] for u in chunk])
                if len(scorer.last_flags) == len(chunk):
                    flags[chunk] = scorer.last_flags
                bar.update(len(chunk))
    return uniq_scores, flags


def _merge_parts(out_path: str | os.PathLike, token: str, shard: Shard, uniq_scores: np.ndarray,
                 flags: np.ndarray) -> None:
    """Wait for every rank's part and copy its scores and flags into ``uniq_scores`` and ``flags``."""
    paths = [_part_path(out_path, token, shard, r) for r in range(shard.world)]
    for df_part in _wait_for_parts(paths):
        u = df_part["u"].to_numpy()
        uniq_scores[u] = df_part["score"].to_numpy()
        flags[u, 0], flags[u, 1] = df_part["prompt_truncated"].to_numpy(), df_part["response_truncated"].to_numpy()


def _scores_table(rating_set: RatingSet, conditions: list[str], items: list[ConditionItem],
                  todo: list[ConditionItem], text_idx: list[int], done: dict[tuple, tuple[float, bool, bool]],
                  uniq_scores: np.ndarray, flags: np.ndarray) -> pd.DataFrame:
    """The scores table of ``items`` (resumed rows from ``done``, new ones from their distinct text), with
    the truncation counts per condition (every row; ``n_resumed`` of them from an earlier run's table),
    donor exclusions and the number of distinct texts in its attrs."""
    trunc: dict[str, dict[str, int]] = {c: {"n": 0, "n_resumed": 0, "prompt_truncated": 0, "response_truncated": 0}
                                        for c in conditions}
    new = {it.key: (float(uniq_scores[u]), bool(flags[u, 0]), bool(flags[u, 1])) for it, u in zip(todo, text_idx)}
    rows = []
    for it in items:
        score, p_cut, r_cut = done[it.key] if it.key in done else new[it.key]
        t = trunc[it.condition]
        t["n"] += 1
        t["n_resumed"] += int(it.key in done)
        t["prompt_truncated"] += int(p_cut)
        t["response_truncated"] += int(r_cut)
        rows.append(dict(zip(KEY_COLUMNS, it.key), score=score, prompt_truncated=p_cut, response_truncated=r_cut))
    df = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    df["variant"] = df["variant"].astype(int)
    df["donor_prompt_id"] = df["donor_prompt_id"].astype(object).where(df["donor_prompt_id"].notna(), None)
    df.attrs["truncation"] = trunc
    if any(c in TRANSPLANTS for c in conditions):
        df.attrs["donor_exclusions"] = donor_exclusions(rating_set.prompts)
    df.attrs["n_unique_texts"] = len(uniq_scores)
    return df


def _write_scores(out_path: str | os.PathLike, df: pd.DataFrame, prev: pd.DataFrame | None, conditions: list[str],
                  fingerprint: str, digest: str, shard: Shard | None, token: str) -> None:
    """Write the scores table (with the earlier conditions of the same scorer) and its fingerprint file;
    with a ``shard``, delete the merged parts."""
    # The file keeps earlier conditions of the same scorer too; the returned table holds those asked for.
    keep = df
    if prev is not None:
        others = prev[~prev["condition"].isin(conditions)]
        keep = pd.concat([others[SCORE_COLUMNS], df], ignore_index=True) if len(others) else df
    atomic_write_table(out_path, keep)
    atomic_write_text(_fingerprint_file(out_path), json.dumps({"fingerprint": fingerprint, "data": digest}) + "\n")
    if shard is not None:  # merged into the table: the parts are done with
        for r in range(shard.world):
            _part_path(out_path, token, shard, r).unlink(missing_ok=True)
        if not any(_parts_dir(out_path).iterdir()):
            _parts_dir(out_path).rmdir()


def truncation_summary(df: pd.DataFrame) -> dict[str, Any]:
    """Totals over conditions plus the per-condition counts, for reports."""
    per = df.attrs.get("truncation", {})
    tot = {k: sum(v[k] for v in per.values()) for k in ("n", "n_resumed", "prompt_truncated", "response_truncated")}
    return {"total": tot, "by_condition": per}


def truncation_note(total: dict[str, int]) -> str:
    """``truncation_summary``'s totals in words: "53 of 9,320 texts had their prompt cut; 0 responses
    cut". The flags are per scored text (one conversation with one response, a row of the scores
    table), not per prompt; rows resumed from an earlier run's table count with the flags it kept."""
    return (f"{total['prompt_truncated']:,} of {total['n']:,} texts had their prompt cut; "
            f"{total['response_truncated']:,} {'response' if total['response_truncated'] == 1 else 'responses'} cut")
