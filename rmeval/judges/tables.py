"""Items and judgments tables (jsonl or parquet), validated with errors naming file, row and field.

items:     item_id, source, query, response_a, response_b, label   (label A, B or tie; may be empty)
judgments: item_id, judge, attribute, order, direction            (order AB or BA; direction +1 for
           the original response A, -1 for B, 0 unresolved, already mapped back to the original
           A/B; the overall verdict under attribute ``overall``)
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from rmcore.errors import DataError
from rmcore.io.tables import read_table

from .store import JUDGMENT_COLUMNS, ORDERS, is_store, load_store, store_to_table

ITEM_COLUMNS = ("item_id", "source", "query", "response_a", "response_b")
LABELS = ("A", "B", "tie")


def _require(df: pd.DataFrame, cols: tuple[str, ...], file: str | None) -> None:
    for c in cols:
        if c not in df.columns:
            raise DataError("missing column", file=file, field=c)


def validate_judgments(df: pd.DataFrame, *, file: str | None = None) -> pd.DataFrame:
    _require(df, JUDGMENT_COLUMNS, file)
    df = df[list(JUDGMENT_COLUMNS)].copy()
    for c in ("item_id", "judge", "attribute", "order"):
        bad = df[c].isna()
        if bad.any():
            raise DataError("missing value", file=file, row=int(np.flatnonzero(bad)[0]) + 1, field=c)
        df[c] = df[c].astype(str)
    bad = ~df["order"].isin(ORDERS)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"order must be AB or BA, got '{df['order'].iat[i]}'", file=file, row=i + 1, field="order")
    d = pd.to_numeric(df["direction"], errors="coerce")
    bad = ~d.isin([-1, 0, 1])
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"direction must be 1, -1 or 0, got '{df['direction'].iat[i]}'", file=file, row=i + 1,
                        field="direction")
    df["direction"] = d.astype(int)
    dup = df.duplicated(["item_id", "judge", "attribute", "order"])
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise DataError("duplicate (item_id, judge, attribute, order)", file=file, row=i + 1, field="item_id")
    return df


def validate_items(df: pd.DataFrame, *, file: str | None = None, need_labels: bool = False) -> pd.DataFrame:
    _require(df, ITEM_COLUMNS + (("label",) if need_labels else ()), file)
    df = df.copy()
    for c in ITEM_COLUMNS:
        bad = df[c].isna()
        if bad.any():
            raise DataError("missing value", file=file, row=int(np.flatnonzero(bad)[0]) + 1, field=c)
        df[c] = df[c].astype(str)
    if "label" not in df.columns:
        df["label"] = None
    lab = df["label"].where(df["label"].notna(), None)
    bad = lab.notna() & ~lab.isin(LABELS)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"label must be A, B or tie, got '{lab.iat[i]}'", file=file, row=i + 1, field="label")
    df["label"] = lab
    dup = df.duplicated("item_id")
    if dup.any():
        raise DataError("duplicate item_id", file=file, row=int(np.flatnonzero(dup)[0]) + 1, field="item_id")
    return df


def load_judgments(path: str | os.PathLike) -> pd.DataFrame:
    """The long table of a table file, or of a judgment store or shard (``rmeval.judges.store``,
    which is what the analyses read: ``load_store``)."""
    if is_store(path) or str(path).endswith(".npz"):
        return store_to_table(load_store(path))
    df = read_table(path)
    df.attrs.clear()  # a row-number list that every pandas operation would deep-copy
    return validate_judgments(df, file=str(path))


def load_items(path: str | os.PathLike, *, need_labels: bool = False) -> pd.DataFrame:
    df = validate_items(read_table(path), file=str(path), need_labels=need_labels)
    df.attrs.clear()  # the row-number list: every later pandas operation would deep-copy it
    return df
