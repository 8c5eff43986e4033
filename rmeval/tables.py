"""Scores, ratings and preferences tables: validation with errors that name the row and field.

Row numbers count from 1 as the loaders do (``rmcore.io.tables.read_table``): the line number for jsonl
and csv (csv counts the header as line 1), the record number for parquet and for a table passed
in memory. Values in messages are plain Python values (``0``, not ``np.int64(0)``).

Scores table (one row per scored text): prompt_id, response_id, condition, variant,
donor_prompt_id, score (and, as ``rmeval.scoring.run`` writes it, prompt_truncated and
response_truncated: the statistics do not read them). Ratings table: prompt_id, response_id, one column per
rated attribute, single_turn, response_length (optional). Preferences table: prompt_id, chosen_id, rejected_id
and optionally subset, section, chosen_style, rejected_style.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from rmcore.errors import DataError
from rmcore.io.tables import read_table
from rmeval.conditions import CONDITIONS, FIXED_REPLY

TRANSPLANT_KINDS = ("random", "overlap", "embedding", "length", "related")
PROMPT_ONLY_SENTINEL = "__generic_reply__"
SCORE_KEY = ["prompt_id", "response_id", "condition", "variant"]


def condition_names() -> tuple[str, ...]:
    """Known conditions: the registry in ``rmeval.conditions`` is the one source."""
    return tuple(CONDITIONS)


def _plain(v: Any) -> Any:
    """numpy scalar -> Python scalar, so messages print 0 and 'a', not np.int64(0)."""
    return v.item() if isinstance(v, np.generic) else v


def _rows(df: pd.DataFrame) -> list[int]:
    """Row number of each position, as the loaders count (1-based records if read in memory)."""
    rows = df.attrs.get("source_rows")
    return list(rows) if rows is not None and len(rows) == len(df) else list(range(1, len(df) + 1))


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA or v is pd.NaT


def norm_id(v: Any) -> str:
    """An id as a string. Integer ids read back as floats (a column of ints and nulls is float64
    in parquet/jsonl/csv) become '2', not '2.0', so they still match the ratings table."""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _require(df: pd.DataFrame, cols: list[str], what: str, file: str | None) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(f"{what} table lacks column(s) {missing}; it has {list(df.columns)}", file=file,
                        field=missing[0])


def _ids(df: pd.DataFrame, col: str, file: str | None, rows: list[int]) -> pd.Series:
    """The id column as strings; a missing id is an error naming its row."""
    vals = df[col].tolist()
    for i, v in enumerate(vals):
        if _missing(v) or (isinstance(v, str) and not v.strip()):
            raise DataError("missing id", file=file, row=rows[i], field=col)
    return pd.Series([norm_id(v) for v in vals], index=df.index, dtype=object)


def _check_duplicates(df: pd.DataFrame, key: list[str], what: str, file: str | None, rows: list[int]) -> None:
    dup = df.duplicated(key, keep=False)
    if dup.any():
        pos = np.flatnonzero(dup.to_numpy())
        first = int(pos[0])
        row_key = tuple(_plain(v) for v in df.iloc[first][key].tolist())
        again = [int(p) for p in pos[1:] if tuple(_plain(v) for v in df.iloc[p][key].tolist()) == row_key]
        raise DataError(f"duplicate {what} key {dict(zip(key, row_key))} (first at row {rows[first]})",
                        file=file, row=rows[again[0] if again else first], field=key[-1])


def validate_ratings(ratings: pd.DataFrame, *, attribute: str | None = None,
                     file: str | None = None) -> pd.DataFrame:
    """Normalised copy: string ids, bool single_turn, float attribute / response_length."""
    _require(ratings, ["prompt_id", "response_id"], "ratings", file)
    rows = _rows(ratings)
    df = ratings.reset_index(drop=True).copy()
    df["prompt_id"] = _ids(df, "prompt_id", file, rows)
    df["response_id"] = _ids(df, "response_id", file, rows)
    _check_duplicates(df, ["prompt_id", "response_id"], "(prompt_id, response_id)", file, rows)
    if attribute is not None and attribute not in df.columns:
        raise DataError(f"ratings table has no attribute '{attribute}'; it has columns {list(df.columns)}",
                        file=file, field=attribute)
    numeric = [c for c in (attribute, "response_length") if c is not None and c in df.columns]
    for col in numeric:
        raw = df[col].tolist()
        vals = pd.to_numeric(df[col], errors="coerce")
        for i, v in enumerate(vals.to_numpy(float)):
            if np.isfinite(v) or (col == "response_length" and raw[i] is None):
                continue
            if raw[i] is None:
                # A rated response without its rating would silently leave every rating-based statistic.
                raise DataError("missing rating", file=file, row=rows[i], field=col)
            what = "rating" if col == attribute else "value"
            raise DataError(f"{what} is not a finite number, got {_plain(raw[i])!r}", file=file, row=rows[i],
                            field=col)
        df[col] = vals.astype(float)
    if "response_length" in df.columns:
        bad = df["response_length"] < 0
        if bad.any():
            raise DataError("response length must be >= 0", file=file,
                            row=rows[int(np.flatnonzero(bad.to_numpy())[0])], field="response_length")
    if "single_turn" in df.columns:
        for i, v in enumerate(df["single_turn"].tolist()):
            if _missing(v) or v not in (True, False, 0, 1):
                raise DataError(f"single_turn must be true/false, got {_plain(v)!r}", file=file, row=rows[i],
                                field="single_turn")
        df["single_turn"] = df["single_turn"].astype(bool)
    return df


def validate_scores(scores: pd.DataFrame, ratings: pd.DataFrame | None = None, *,
                    file: str | None = None) -> pd.DataFrame:
    """Normalised copy of a scores table; with ``ratings``, every scored response must be rated and
    every prompt_id / donor_prompt_id must exist in the ratings table."""
    _require(scores, ["prompt_id", "response_id", "condition", "score"], "scores", file)
    rows = _rows(scores)
    df = scores.reset_index(drop=True).copy()
    df["prompt_id"] = _ids(df, "prompt_id", file, rows)
    df["response_id"] = _ids(df, "response_id", file, rows)
    known = condition_names()
    cond = df["condition"].tolist()
    for i, c in enumerate(cond):
        if c not in known:
            raise DataError(f"unknown condition {_plain(c)!r}; expected one of {list(known)}", file=file,
                            row=rows[i], field="condition")
    raw = df["score"].tolist()
    vals = pd.to_numeric(df["score"], errors="coerce").to_numpy(float)
    for i, v in enumerate(vals):
        if not np.isfinite(v):
            what = "missing score" if raw[i] is None else f"score is not a finite number, got {_plain(raw[i])!r}"
            raise DataError(what, file=file, row=rows[i], field="score")
    df["score"] = vals
    if "variant" not in df.columns:
        df["variant"] = 0
    var = pd.to_numeric(df["variant"], errors="coerce")
    if var.isna().any():
        i = int(np.flatnonzero(var.isna().to_numpy())[0])
        raise DataError(f"variant must be an integer, got {_plain(df['variant'].iloc[i])!r}", file=file,
                        row=rows[i], field="variant")
    df["variant"] = var.astype(int)
    if "donor_prompt_id" not in df.columns:
        df["donor_prompt_id"] = None
    df["donor_prompt_id"] = [None if _missing(v) else norm_id(v) for v in df["donor_prompt_id"].tolist()]
    _check_duplicates(df, SCORE_KEY, "(prompt_id, response_id, condition, variant)", file, rows)
    if ratings is not None:
        rkeys = set(zip(ratings["prompt_id"].astype(str), ratings["response_id"].astype(str)))
        rprompts = set(ratings["prompt_id"].astype(str))
        for i, (p, r, c, d) in enumerate(zip(df["prompt_id"], df["response_id"], df["condition"],
                                             df["donor_prompt_id"])):
            if p not in rprompts:
                raise DataError(f"prompt '{p}' is not in the ratings table", file=file, row=rows[i],
                                field="prompt_id")
            if not _missing(d) and d not in rprompts:
                raise DataError(f"donor prompt '{d}' is not in the ratings table", file=file, row=rows[i],
                                field="donor_prompt_id")
            if c not in FIXED_REPLY and (p, r) not in rkeys:
                raise DataError(f"response '{r}' of prompt '{p}' has no rating", file=file, row=rows[i],
                                field="response_id")
    return df


def validate_preferences(preferences: pd.DataFrame, *, file: str | None = None) -> pd.DataFrame:
    _require(preferences, ["prompt_id", "chosen_id", "rejected_id"], "preferences", file)
    rows = _rows(preferences)
    df = preferences.reset_index(drop=True).copy()
    for col in ("prompt_id", "chosen_id", "rejected_id"):
        df[col] = _ids(df, col, file, rows)
    for col in ("chosen_style", "rejected_style"):
        if col in df.columns:
            for i, v in enumerate(df[col].tolist()):
                if not _missing(v) and v not in (0, 1, 2):
                    raise DataError(f"style level must be 0, 1 or 2, got {_plain(v)!r}", file=file, row=rows[i],
                                    field=col)
    return df


def load_ratings(path: str | os.PathLike, *, attribute: str | None = None) -> pd.DataFrame:
    return validate_ratings(read_table(path, "ratings table"), attribute=attribute, file=str(path))


def load_scores(path: str | os.PathLike, ratings: pd.DataFrame | None = None) -> pd.DataFrame:
    return validate_scores(read_table(path, "scores table"), ratings, file=str(path))


def load_preferences(path: str | os.PathLike) -> pd.DataFrame:
    return validate_preferences(read_table(path, "preferences table"), file=str(path))
