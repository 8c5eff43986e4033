"""Tables: the one reader of local tables (jsonl, json, csv, parquet, gzipped or not) and the
atomic writer of parquet and jsonl tables. pandas is imported here, never by ``rmcore.io.files``.

Row numbers are those a user finds in the file: the line number for jsonl and csv (csv counts
the header as line 1) and the 1-based record number for json and parquet. ``read_table`` keeps
them in ``df.attrs["source_rows"]`` so table errors can name the row as the loaders do.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from rmcore.errors import DataError, invalid_json
from rmcore.io.files import TABLE_SUFFIXES, check_path

Record = tuple[int, dict[str, Any]]  # (row number, row)


def atomic_write_table(path: str | os.PathLike, df: pd.DataFrame) -> Path:
    """parquet or jsonl, by extension."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    if path.suffix == ".parquet":
        df.to_parquet(tmp, index=False)
    elif path.suffix in (".jsonl", ".json"):
        df.to_json(tmp, orient="records", lines=True, force_ascii=False)
    else:
        raise ValueError(f"{path}: table must be .parquet or .jsonl")
    os.replace(tmp, path)
    return path


def _open_text(path: Path):
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def py_row(row: dict[str, Any]) -> dict[str, Any]:
    """numpy scalars/arrays from pandas -> plain Python, so all formats look alike downstream."""
    out = {}
    for k, v in row.items():
        if hasattr(v, "tolist"):
            v = v.tolist()
        out[str(k)] = v
    return out


def _suffix_error(path: Path) -> DataError:
    return DataError(f"unknown table format; expected one of {', '.join(TABLE_SUFFIXES)}", file=str(path))


def _read_json_rows(path: Path) -> list[Record]:
    out: list[Record] = []
    if path.name.lower().endswith((".jsonl", ".jsonl.gz")):
        with _open_text(path) as f:
            for lineno, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line.rstrip("\r\n"))  # one line: the decoder's column is the line's
                except json.JSONDecodeError as e:
                    raise DataError(invalid_json(e, line=lineno), file=str(path), row=lineno) from None
                if not isinstance(row, dict):
                    raise DataError("expected a JSON object per line", file=str(path), row=lineno)
                out.append((lineno, row))
        return out
    with _open_text(path) as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise DataError(invalid_json(e), file=str(path)) from None
    if isinstance(data, dict):  # {"data": [...]} style wrappers
        lists = [v for v in data.values() if isinstance(v, list)]
        data = lists[0] if len(lists) == 1 else data
    if not isinstance(data, list):
        raise DataError("expected a JSON list of objects", file=str(path))
    for i, row in enumerate(data, start=1):
        if not isinstance(row, dict):
            raise DataError("expected a JSON object", file=str(path), row=i)
        out.append((i, row))
    return out


def _read_frame(path: Path) -> pd.DataFrame:
    """csv / parquet as a DataFrame with ``attrs["source_rows"]``."""
    name = path.name.lower()
    try:
        if name.endswith(".parquet"):
            df, first = pd.read_parquet(path), 1
        else:
            df, first = pd.read_csv(path, keep_default_na=True), 2  # line 1 is the header
    except (ValueError, OSError) as e:  # pandas' EmptyDataError and ParserError are ValueErrors
        raise DataError(f"cannot read table ({str(e).splitlines()[0]})", file=str(path)) from None
    # a range, not a list: pandas deep-copies attrs on every operation, and a list of a million row
    # numbers made that 87% of an analysis' time (a range is copied as itself)
    df.attrs["source_rows"] = range(first, first + len(df))
    return df


def read_records(path: str | os.PathLike) -> list[Record]:
    """All rows of a local table as (row number, dict): the loaders' view of a file."""
    path = check_path(path, "data file")
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz")):
        return _read_json_rows(path)
    if name.endswith((".parquet", ".csv")):
        df = _read_frame(path)
        return [(n, py_row(r)) for n, r in zip(df.attrs["source_rows"], df.to_dict(orient="records"))]
    raise _suffix_error(path)


def read_jsonl_rows(path: str | os.PathLike, what: str, required: tuple[str, ...] = ()) -> list[Record]:
    """Rows of a user's jsonl file as (line number, dict), each holding the ``required`` fields; a bad
    line is a DataError naming the file, line and field."""
    path = check_path(path, what)
    rows = _read_json_rows(path)
    for line_no, row in rows:
        for key in required:
            if key not in row:
                raise DataError("missing field", file=str(path), row=line_no, field=key)
    return rows


def read_table(path: str | os.PathLike, what: str = "table", *, allow_empty: bool = False) -> pd.DataFrame:
    """A local table as a DataFrame, row numbers in ``attrs["source_rows"]``; a missing, empty or
    unreadable file, a directory, or a table without rows (unless ``allow_empty``) is a one-line
    DataError naming the file."""
    if allow_empty and Path(path).is_file() and Path(path).stat().st_size == 0:
        return pd.DataFrame()
    path = check_path(path, what)
    name = path.name.lower()
    if name.endswith((".parquet", ".csv")):
        df = _read_frame(path)
    elif name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz")):
        rows = _read_json_rows(path)
        df = pd.DataFrame.from_records([r for _, r in rows]) if rows else pd.DataFrame()
        df.attrs["source_rows"] = [n for n, _ in rows]
    else:
        raise _suffix_error(path)
    if len(df) == 0 and not allow_empty:
        raise DataError(f"{what}: has no rows", file=str(path))
    return df
