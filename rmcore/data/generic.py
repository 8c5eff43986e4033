"""Generic table loader plus the small reading helpers every loader shares.

A generic rating file is a jsonl / jsonl.gz / json / csv / parquet table with one row per
(prompt, response). A column mapping names which columns hold what::

    columns = {
        "prompt": "question",              # required: str, or a list of {"role", "content"} messages
        "response": "answer",              # required
        "prompt_id": "qid",                # optional; without it rows are grouped by prompt text
        "response_id": "aid",              # optional; default f"{prompt_id}:r{j}"
        "ratings": {"score": "helpfulness", "acc": "correctness"},  # column -> attribute name
    }

Rows are grouped by prompt (all rows of a prompt, not only consecutive ones) in order of first
appearance. Every response records where it came from (``meta["source_file"]``,
``meta["source_row"]``) so later validation errors point at the input row. Row numbers are the line
number for jsonl and csv (csv counts the header as line 1) and the 1-based record number for json
and parquet.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rmcore.data.schema import Message, PromptRecord, RatingSet, Response, check_on_bad
from rmcore.errors import DataError
from rmcore.io.files import is_hub_id
from rmcore.io.tables import Record, py_row, read_records

__all__ = ["Record", "hub_records", "is_missing", "load_generic",
           "read_records", "require_text", "source_records"]


def hub_records(repo_id: str, split: str, **kwargs: Any) -> list[Record]:
    """Rows of a Hub dataset split via `datasets.load_dataset` (row = 1-based record number)."""
    from datasets import load_dataset

    ds = load_dataset(repo_id, split=split, **kwargs)
    return [(i + 1, py_row(dict(r))) for i, r in enumerate(ds)]


def source_records(path: str | os.PathLike, split: str) -> tuple[list[Record], str]:
    """(rows, the name errors give the source): a Hub dataset split or a local file."""
    if is_hub_id(path):
        return hub_records(str(path), split), f"{path}[{split}]"
    return read_records(path), str(path)


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def coerce_rating(value: Any, *, file: str, row: int, field: str) -> float:
    """A rating as float; DataError (naming file/row/field) when missing or not numeric."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise DataError("missing rating", file=file, row=row, field=field)
    if isinstance(value, bool):
        raise DataError(f"rating must be a number, got {value!r}", file=file, row=row, field=field)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise DataError(f"rating must be a number, got {value!r}", file=file, row=row, field=field) from None
    if math.isnan(x) or math.isinf(x):
        raise DataError(f"rating is not a finite number, got {value!r}", file=file, row=row, field=field)
    return x


def require_text(value: Any, *, file: str, row: int, field: str) -> str:
    if is_missing(value) or not isinstance(value, str):
        raise DataError("empty or missing text", file=file, row=row, field=field)
    return value


def prompt_messages(value: Any, *, file: str, row: int, field: str) -> list[Message]:
    """A prompt cell: plain text (one user turn) or a list of chat messages ending with a user turn."""
    if isinstance(value, str):
        return [{"role": "user", "content": require_text(value, file=file, row=row, field=field)}]
    if isinstance(value, list) and value and all(isinstance(m, Mapping) for m in value):
        msgs: list[Message] = []
        for m in value:
            role, content = m.get("role"), m.get("content")
            if role not in ("system", "user", "assistant") or not isinstance(content, str):
                raise DataError(f"bad chat message {dict(m)!r}", file=file, row=row, field=field)
            msgs.append({"role": str(role), "content": content})
        if msgs[-1]["role"] != "user":
            raise DataError("conversation must end with a user turn", file=file, row=row, field=field)
        return msgs
    raise DataError("prompt must be text or a list of chat messages", file=file, row=row, field=field)


def load_generic(path: str | os.PathLike, columns: Mapping[str, Any], *, name: str | None = None,
                 limit: int | None = None, on_bad: str = "raise", split: str = "train",
                 source: str = "generic") -> RatingSet:
    """Load a rating table with a column mapping (see module doc); `limit` keeps the first prompts.

    A Hub id instead of a path is read with `datasets.load_dataset(path, split=split)`.
    With ``on_bad="skip"`` bad rows are dropped and counted in ``RatingSet.skipped`` by reason."""
    check_on_bad(on_bad)
    for key in ("prompt", "response"):
        if key not in columns:
            raise ValueError(f"generic loader: columns needs a {key!r} entry, got {dict(columns)}")
    rating_cols: dict[str, str] = dict(columns.get("ratings") or {})
    pid_col, rid_col = columns.get("prompt_id"), columns.get("response_id")
    records, file = source_records(path, split)

    skipped: Counter = Counter()
    groups: dict[str, PromptRecord] = {}
    prompt_text: dict[str, Any] = {}
    for row_no, row in records:
        try:
            for col in [columns["prompt"], columns["response"], *rating_cols]:
                if col not in row:
                    raise DataError(f"column missing; this row has columns {sorted(row)}", file=file,
                                    row=row_no, field=col)
            msgs = prompt_messages(row[columns["prompt"]], file=file, row=row_no, field=columns["prompt"])
            text = require_text(row[columns["response"]], file=file, row=row_no, field=columns["response"])
            ratings = {attr: coerce_rating(row[col], file=file, row=row_no, field=col)
                       for col, attr in rating_cols.items()}
            key = json.dumps(msgs, sort_keys=True)
            if pid_col is not None:
                if is_missing(row.get(pid_col)):
                    raise DataError("missing prompt id", file=file, row=row_no, field=pid_col)
                pid = str(row[pid_col])
                # one id must not name two different prompts: that would mix two groups silently
                if pid in prompt_text and prompt_text[pid] != key:
                    raise DataError(f"prompt_id {pid!r} has a different prompt than on an earlier row",
                                    file=file, row=row_no, field=pid_col)
                prompt_text[pid] = key
            else:
                pid = prompt_text.setdefault(key, f"p{len(prompt_text):05d}")
        except DataError as e:
            if on_bad == "raise":
                raise e.skippable() from None
            skipped[f"bad_{e.field or 'row'}"] += 1
            continue
        rec = groups.get(pid)
        if rec is None:
            if limit is not None and len(groups) >= limit:
                continue
            rec = groups[pid] = PromptRecord(prompt_id=pid, messages=msgs, responses=[], source=source,
                                             meta={"source_file": file, "source_row": row_no})
        rid = str(row[rid_col]) if rid_col is not None and not is_missing(row.get(rid_col)) \
            else f"{pid}:r{len(rec.responses)}"
        rec.responses.append(Response(response_id=rid, text=text, ratings=ratings,
                                      meta={"source_file": file, "source_row": row_no}))
    return RatingSet(prompts=list(groups.values()), name=name or Path(str(path)).stem,
                     attributes=tuple(dict.fromkeys(rating_cols.values())), skipped=skipped)
