"""Atomic writes (a crash never leaves a half-written output behind), strict JSON (``to_json``: no
NaN or Infinity, in files and in the commands' printed results), the one reader of local
tables, the check every user-given path goes through first, and the check of a checkpoint's
safetensors files before a model is built from them.

Row numbers are those a user finds in the file: the line number for jsonl and csv (csv counts
the header as line 1) and the 1-based record number for json and parquet. ``read_table`` keeps
them in ``df.attrs["source_rows"]`` so table errors can name the row as the loaders do.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from rmcore.errors import DataError, PathNotFoundError, invalid_json

Record = tuple[int, dict[str, Any]]  # (row number, row)
TABLE_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv", ".parquet")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def looks_like_hub_id(source: str | os.PathLike) -> bool:
    """'owner/name' that is not an existing path: a Hugging Face Hub repository id."""
    s = str(source)
    return not Path(s).exists() and bool(_HUB_ID.match(s))


def looks_local(source: str | os.PathLike) -> bool:
    """Written as a local path: starts with / . ~, or has a path separator and is not 'owner/name',
    or is 'owner/name' whose owner is a directory here (``outputs/rm`` beside ``outputs/``: a
    missing run, not a Hub repository)."""
    s = str(source)
    if s.startswith(("/", ".", "~")) or ((os.sep in s or "/" in s) and not _HUB_ID.match(s)):
        return True
    return bool(_HUB_ID.match(s)) and Path(s.split("/", 1)[0]).is_dir()


def check_path(path: str | os.PathLike, what: str, *, kind: str = "file", hub_ok: bool = False) -> Path:
    """``path`` as given by a user, checked before anything reads it: a one-line DataError saying
    it is not found, is a directory (``kind="file"``), not a directory (``kind="dir"``) or is an
    empty file. ``kind="any"`` accepts a file or a directory. With ``hub_ok`` a missing path that
    is a valid-looking Hub id ('owner/name') is let through for the Hub to resolve."""
    p = Path(os.path.expanduser(str(path)))
    if not p.exists():
        if hub_ok and not looks_local(path) and looks_like_hub_id(path):
            return p
        raise PathNotFoundError(f"{what}: not found" + (" (not a local path, nor a Hub id owner/name)" if hub_ok
                                                         else ""), file=str(path))
    if kind == "file" and p.is_dir():
        raise DataError(f"{what}: is a directory, expected a file", file=str(path))
    if kind == "dir" and not p.is_dir():
        raise DataError(f"{what}: is a file, expected a directory", file=str(path))
    if p.is_file() and p.stat().st_size == 0:
        raise DataError(f"{what}: is empty", file=str(path))
    return p


def _safetensors_problem(f: Path) -> str | None:
    """What is wrong with safetensors file ``f`` (None: nothing seen): its 8-byte little-endian
    header length, the JSON header of that length, and the byte range of every tensor it names."""
    size = f.stat().st_size
    with open(f, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return "empty" if size == 0 else f"{size} bytes, shorter than a header"
        n = int.from_bytes(head, "little")
        if 8 + n > size:
            return f"its header says {n} bytes, the file holds {size - 8} after it"
        try:
            header = json.loads(fh.read(n))
            end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return "its header is not a safetensors header"
    return f"cut short: its tensors need {8 + n + end} bytes, it holds {size}" if 8 + n + end > size else None


def check_safetensors(path: str | os.PathLike) -> None:
    """Every ``*.safetensors`` file of the checkpoint directory ``path`` whole, checked from its
    header before any model is built: an empty, cut or garbled file is a one-line DataError naming
    it (safetensors' own error names no file). Anything but a local directory passes (a Hub id)."""
    p = Path(os.path.expanduser(str(path)))
    for f in sorted(p.glob("*.safetensors")) if p.is_dir() else ():
        why = _safetensors_problem(f)
        if why is not None:
            raise DataError(f"not a readable safetensors file ({why}); save or download the checkpoint again",
                            file=str(f))


def current_umask() -> int:
    """The process's file-creation mask, read without changing it where Linux says it
    (/proc/self/status), else by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """``text`` written to a temporary file beside ``path``, then renamed over it. The file gets the
    mode an ordinary ``open`` would give (0644 under umask 022), not the temporary file's 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_save_figure(fig: Any, path: str | os.PathLike, dpi: int = 110) -> Path:
    """A matplotlib figure written then renamed (never a half-written image), then closed."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def finite_json(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float (Python or numpy, in dicts, lists, tuples and
    arrays at any depth) replaced by None: what strict JSON can hold. A record that had such a
    value says why beside it (a ``status``, a ``reason``)."""
    import numpy as np

    if isinstance(obj, float):  # np.float64 too
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return finite_json(obj.tolist())
    if isinstance(obj, np.generic):
        return finite_json(obj.item())
    return obj


def is_finite(value: Any) -> bool:
    """Whether ``value`` is a finite number; None (how strict JSON holds a figure that was not
    finite, ``finite_json``) and non-numbers are not."""
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def to_json(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON text of ``obj`` (RFC 8259: no NaN or Infinity, which Python's json writes by
    default and other readers refuse): non-finite floats become null (``finite_json``). Every JSON
    file the tools write (``atomic_write_json``) and every JSON result a command prints goes
    through here."""
    return json.dumps(finite_json(obj), indent=indent, default=_json_default, allow_nan=False)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, to_json(obj) + "\n")


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
