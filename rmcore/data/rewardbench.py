"""RewardBench and RewardBench 2 in their released schemas (allenai/reward-bench, allenai/reward-bench-2
on the Hub, or a local json/jsonl/parquet file of the same rows).

RewardBench rows are ``{id, prompt, chosen, rejected, subset, chosen_model?, rejected_model?}``:
one chosen and one rejected completion (strings) of a prompt (a string, or chat messages ending in
a user turn). Each row becomes a prompt ``rb-{id}`` with responses ``{pid}:chosen`` and
``{pid}:rejected`` and one Preference labelled with its subset; ``rmeval pairwise`` reads the
subsets and reports RewardBench's section-weighted score (``rmeval.stats.pairwise``).

RewardBench 2 rows are ``{id, prompt, chosen: [..], rejected: [..], num_correct?, num_incorrect?,
total_completions?, subset, models?, additional_metadata?}``: best-of-N, usually one correct
completion against three incorrect ones; in the Ties subset several correct answers
(``num_correct``) against incorrect ones, each row ``ref:N`` (a reference prompt with one correct
answer) or ``tied:N`` (the same question with several). Each row becomes a prompt ``rb2-{id}``
with responses ``{pid}:chosen:{i}`` and ``{pid}:rejected:{j}`` and a Preference for every
(correct, incorrect) couple; ``rewardbench2_table`` lists every completion with whether it is
correct, which ``rmeval.stats.rewardbench2`` scores by RewardBench 2's rules.

A bad row (missing prompt, empty completion, a list where a string is due, ``num_correct``,
``num_incorrect`` or ``total_completions`` that disagrees with the lists, a Ties id that is not
``ref:N``/``tied:N``) raises a DataError naming file, row and field, or with ``on_bad="skip"`` is
skipped and counted.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pandas as pd

from rmcore.data.generic import is_missing, prompt_messages, source_records
from rmcore.data.schema import Message, Preference, PromptRecord, RatingSet, Response, check_on_bad
from rmcore.errors import DataError
from rmcore.io.files import is_hub_id

REWARDBENCH_HUB_ID = "allenai/reward-bench"
REWARDBENCH2_HUB_ID = "allenai/reward-bench-2"
TIES_SUBSET = "Ties"


class _Rows:
    """Shared bad-row handling of the two loaders."""

    def __init__(self, file: str, on_bad: str) -> None:
        check_on_bad(on_bad)
        self.file, self.on_bad, self.skipped = file, on_bad, Counter()

    def bad(self, reason: str, msg: str, row: int, field: str) -> None:
        if self.on_bad == "raise":
            raise DataError(msg, file=self.file, row=row, field=field).skippable()
        self.skipped[reason] += 1


def _records(path: str | os.PathLike, split: str) -> tuple[list[tuple[int, dict[str, Any]]], str]:
    return source_records(path, split)


def _row_id(row: dict[str, Any], row_no: int) -> str:
    return str(row["id"]) if not is_missing(row.get("id")) else str(row_no)


def _prompted_rows(records: list[tuple[int, dict[str, Any]]], file: str, rows: _Rows, limit: int | None,
                   tag: str) -> Iterator[tuple[int, dict[str, Any], list[Message]]]:
    """(row number, row, prompt messages) of the first ``limit`` rows; a row whose prompt does not
    parse is counted as bad (``<tag>_bad_prompt``) and skipped."""
    for row_no, row in records[:limit] if limit is not None else records:
        try:
            messages = prompt_messages(row.get("prompt"), file=file, row=row_no, field="prompt")
        except DataError as e:
            rows.bad(f"{tag}_bad_prompt", e.message, row_no, "prompt")
            continue
        yield row_no, row, messages


def load_rewardbench(path: str | os.PathLike = REWARDBENCH_HUB_ID, split: str = "filtered", *,
                     limit: int | None = None, on_bad: str = "raise") -> RatingSet:
    """RewardBench (v1): one chosen/rejected pair per row, labelled with its subset."""
    records, file = _records(path, split)
    rows = _Rows(file, on_bad)
    prompts: list[PromptRecord] = []
    prefs: list[Preference] = []
    seen: set[str] = set()
    for row_no, row, messages in _prompted_rows(records, file, rows, limit, "rewardbench"):
        texts = {}
        for field in ("chosen", "rejected"):
            value = row.get(field)
            if not isinstance(value, str) or is_missing(value):
                rows.bad("rewardbench_bad_completion", "expected a non-empty completion string", row_no, field)
                break
            texts[field] = value
        if len(texts) < 2:
            continue
        if is_missing(row.get("subset")):
            rows.bad("rewardbench_no_subset", "missing subset", row_no, "subset")
            continue
        pid = f"rb-{_row_id(row, row_no)}"
        if pid in seen:
            raise DataError(f"duplicate id {pid[3:]!r}", file=file, row=row_no, field="id")
        seen.add(pid)
        subset = str(row["subset"])
        where = {"source_file": file, "source_row": row_no}
        meta = {"subset": subset, **where, **{k: row[k] for k in ("chosen_model", "rejected_model")
                                               if not is_missing(row.get(k))}}
        prompts.append(PromptRecord(pid, messages, [Response(f"{pid}:chosen", texts["chosen"],
                                                             meta={"label": "chosen", **where}),
                                                    Response(f"{pid}:rejected", texts["rejected"],
                                                             meta={"label": "rejected", **where})],
                                    source="rewardbench", meta=meta))
        prefs.append(Preference(pid, f"{pid}:chosen", f"{pid}:rejected", subset=subset))
    name = "rewardbench" if is_hub_id(path) else f"rewardbench-{os.path.basename(str(path)).split('.')[0]}"
    return RatingSet(prompts=prompts, name=name, attributes=(), preferences=prefs, skipped=rows.skipped)


def _count(value: Any) -> int | None:
    """A completion count as an int (3, "3", 3.0 as a table column with gaps reads it), else None."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return int(f) if f.is_integer() and f >= 0 else None


def _ties_key(rb2_id: str) -> tuple[str, int] | None:
    """("ref" | "tied", question number) of a Ties row id, None when it is not one."""
    kind, _, num = rb2_id.partition(":")
    return (kind, int(num)) if kind in ("ref", "tied") and num.isdigit() else None


def load_rewardbench2(path: str | os.PathLike = REWARDBENCH2_HUB_ID, split: str = "test", *,
                      limit: int | None = None, on_bad: str = "raise") -> RatingSet:
    """RewardBench 2: best-of-N rows (lists of correct and incorrect completions) with their subset."""
    records, file = _records(path, split)
    rows = _Rows(file, on_bad)
    prompts: list[PromptRecord] = []
    prefs: list[Preference] = []
    seen: set[str] = set()
    for row_no, row, messages in _prompted_rows(records, file, rows, limit, "rewardbench2"):
        lists: dict[str, list[str]] = {}
        for field in ("chosen", "rejected"):
            value = row.get(field)
            if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
                rows.bad("rewardbench2_bad_completions", "expected a non-empty list of completions", row_no, field)
                break
            bad = next((i for i, t in enumerate(value) if not isinstance(t, str) or is_missing(t)), None)
            if bad is not None:
                rows.bad("rewardbench2_bad_completions", f"completion {bad} is empty or not a string", row_no,
                         f"{field}[{bad}]")
                break
            lists[field] = list(value)
        if len(lists) < 2:
            continue
        # the reference regroups the unrolled completions by total_completions and takes the first
        # num_correct of them as correct: a count that disagrees with the lists would misalign them
        counts = {"num_correct": (len(lists["chosen"]), "chosen holds"),
                  "num_incorrect": (len(lists["rejected"]), "rejected holds"),
                  "total_completions": (len(lists["chosen"]) + len(lists["rejected"]), "chosen and rejected hold")}
        wrong = next(((f, row.get(f), n, what) for f, (n, what) in counts.items()
                      if not is_missing(row.get(f)) and _count(row.get(f)) != n), None)
        if wrong is not None:
            f, v, n, what = wrong
            rows.bad(f"rewardbench2_{f}", f"{f} is {v} but {what} {n} completions", row_no, f)
            continue
        if is_missing(row.get("subset")):
            rows.bad("rewardbench2_no_subset", "missing subset", row_no, "subset")
            continue
        subset, rb2_id = str(row["subset"]), _row_id(row, row_no)
        if subset.lower() == TIES_SUBSET.lower() and _ties_key(rb2_id) is None:
            rows.bad("rewardbench2_ties_id", f"a Ties row's id must be ref:N or tied:N, got {rb2_id!r}", row_no, "id")
            continue
        pid = f"rb2-{rb2_id}"
        if pid in seen:
            raise DataError(f"duplicate id {rb2_id!r}", file=file, row=row_no, field="id")
        seen.add(pid)
        where = {"source_file": file, "source_row": row_no}
        chosen = [Response(f"{pid}:chosen:{i}", t, meta={"label": "chosen", "index": i, **where})
                  for i, t in enumerate(lists["chosen"])]
        rejected = [Response(f"{pid}:rejected:{j}", t, meta={"label": "rejected", "index": j, **where})
                    for j, t in enumerate(lists["rejected"])]
        prompts.append(PromptRecord(pid, messages, chosen + rejected, source="rewardbench2",
                                    meta={"subset": subset, "rb2_id": rb2_id, **where}))
        prefs += [Preference(pid, c.response_id, r.response_id, subset=subset) for c in chosen for r in rejected]
    name = "rewardbench2" if is_hub_id(path) else f"rewardbench2-{os.path.basename(str(path)).split('.')[0]}"
    return RatingSet(prompts=prompts, name=name, attributes=(), preferences=prefs, skipped=rows.skipped)


def rewardbench2_table(rating_set: RatingSet) -> pd.DataFrame | None:
    """One row per completion of a RewardBench 2 set: prompt_id, response_id, subset, rb2_id,
    correct, index (its place among the correct or the incorrect completions); None for any other
    set."""
    rows = []
    for p in rating_set.prompts:
        if "rb2_id" not in p.meta:
            continue
        for r in p.responses:
            rows.append({"prompt_id": p.prompt_id, "response_id": r.response_id, "subset": p.meta["subset"],
                         "rb2_id": p.meta["rb2_id"], "correct": r.meta.get("label") == "chosen",
                         "index": int(r.meta.get("index", 0))})
    return pd.DataFrame(rows) if rows else None
