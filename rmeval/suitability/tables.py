"""The pairs table: what ``rmeval suitability`` writes and ``rmeval suitability-stats`` reads.

One row per (item, perturbation): ``item_id, perturbation, m_original, m_perturbed`` (confidences
in [0, 1]) and optionally ``log_m_original, log_m_perturbed`` (log confidences, <= 0: what the
log-confidence metric reads; without them it takes the log of the confidences), ``model`` (a panel
of models), ``subset`` (the per-subset analysis), ``changed`` (false: the scorer's input did not
change, so the twin is a ΔM of 0) and ``text_changed``. Every problem in a table read from disk is
an error naming the file, row and field.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import numpy as np
import pandas as pd

from rmcore.errors import DataError
from rmcore.io.tables import read_table
from rmeval.perturbations.suite import GROUPS

PAIR_COLUMNS = ["item_id", "perturbation", "m_original", "m_perturbed"]
LOG_COLUMNS = ["log_m_original", "log_m_perturbed"]
_TRUTH = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def _row_no(path: str, i: int) -> int:
    """Row as a user finds it: the line for jsonl (1-based) and csv (after the header), else 1-based."""
    if path.endswith(".csv"):
        return i + 2
    return i + 1


def validate_pairs(df: pd.DataFrame, *, file: str = "<pairs>", groups: Mapping[str, str] | None = None,
                   metric: str = "log_confidence") -> pd.DataFrame:
    """Check a pairs table; every problem is an error naming the file, row and field. ``metric``:
    the one the table will be read on (a confidence of 0 has no log)."""
    for col in PAIR_COLUMNS:
        if col not in df.columns:
            raise DataError("missing column", file=file, field=col)
    has_log = [c in df.columns for c in LOG_COLUMNS]
    if any(has_log) and not all(has_log):
        raise DataError("missing column (log confidences come in pairs)", file=file,
                        field=LOG_COLUMNS[has_log.index(False)])
    groups = {**GROUPS, **(groups or {})}
    df = df.reset_index(drop=True).copy()
    df["item_id"] = df["item_id"].map(lambda v: v if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    df["perturbation"] = df["perturbation"].astype(str)
    for i, row in enumerate(df.itertuples(index=False)):
        r = _row_no(file, i)
        if row.item_id is None or (isinstance(row.item_id, float) and math.isnan(row.item_id)) or row.item_id == "":
            raise DataError("missing item id", file=file, row=r, field="item_id")
        code = row.perturbation
        if code not in groups and code.partition("@")[0] not in groups:
            raise DataError(f"unknown perturbation code '{code}' without a group (give it one with --groups "
                            f"{code}=GROUP)", file=file, row=r, field="perturbation")
        for fld in ("m_original", "m_perturbed"):
            v = getattr(row, fld)
            try:
                x = float(v)
            except (TypeError, ValueError):
                raise DataError(f"confidence must be a number in [0, 1], got {v!r}", file=file, row=r,
                                field=fld) from None
            if math.isnan(x):
                if fld == "m_perturbed":
                    raise DataError(f"item '{row.item_id}' has no perturbed twin for '{code}' (m_perturbed "
                                    "missing)", file=file, row=r, field=fld)
                raise DataError("confidence is NaN", file=file, row=r, field=fld)
            if not 0.0 <= x <= 1.0:
                raise DataError(f"confidence must be in [0, 1], got {x}", file=file, row=r, field=fld)
            if x == 0.0 and metric == "log_confidence" and not all(has_log):
                raise DataError("confidence 0 has no log: give log_m_original/log_m_perturbed columns or read "
                                "the table with --metric confidence", file=file, row=r, field=fld)
        for fld in LOG_COLUMNS if all(has_log) else ():
            v = getattr(row, fld)
            try:
                x = float(v)
            except (TypeError, ValueError):
                raise DataError(f"log confidence must be a number <= 0, got {v!r}", file=file, row=r,
                                field=fld) from None
            if not math.isfinite(x) or x > 1e-12:
                raise DataError(f"log confidence must be a finite number <= 0, got {x}", file=file, row=r,
                                field=fld)
    keys = ["model", "perturbation", "item_id"] if "model" in df.columns else ["perturbation", "item_id"]
    dup = df.duplicated(keys, keep=False)
    if dup.any():
        rows = [_row_no(file, i) for i in np.nonzero(dup.to_numpy())[0][:2]]
        first = df.loc[dup].iloc[0]
        raise DataError(f"duplicate row for item '{first['item_id']}' and perturbation '{first['perturbation']}' "
                        f"(rows {rows[0]} and {rows[1]})", file=file, row=rows[1], field="item_id")
    for col in PAIR_COLUMNS[2:] + (LOG_COLUMNS if all(has_log) else []):
        df[col] = df[col].astype(float)
    for col in ("changed", "text_changed"):
        if col in df.columns:
            for i, v in enumerate(df[col]):
                if str(v).strip().lower() not in _TRUTH:
                    raise DataError(f"{col} must be true or false, got {v!r}", file=file, row=_row_no(file, i),
                                    field=col)
            df[col] = [_TRUTH[str(v).strip().lower()] for v in df[col]]
    if "subset" in df.columns:
        for i, v in enumerate(df["subset"]):
            if v is None or (isinstance(v, float) and math.isnan(v)) or not str(v).strip():
                raise DataError("missing subset", file=file, row=_row_no(file, i), field="subset")
        df["subset"] = df["subset"].astype(str)
    return df


def read_pairs(path: str | os.PathLike, groups: Mapping[str, str] | None = None,
               metric: str = "log_confidence") -> pd.DataFrame:
    return validate_pairs(read_table(path, "--pairs"), file=str(path), groups=groups, metric=metric)
