"""Atomic writes: a crash never leaves a half-written output behind."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
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


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, default=_json_default, allow_nan=True) + "\n")


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


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    name = path.name
    if name.endswith(".parquet"):
        return pd.read_parquet(path)
    if name.endswith((".jsonl", ".jsonl.gz")):
        return pd.read_json(path, lines=True, dtype=False)
    if name.endswith(".csv"):
        return pd.read_csv(path)
    raise ValueError(f"{path}: table must be .parquet, .jsonl(.gz) or .csv")
