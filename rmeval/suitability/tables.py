"""The pairs table: what ``rmeval suitability`` writes and ``rmeval suitability-stats`` reads.

One row per (item, perturbation): ``item_id, perturbation, m_original, m_perturbed`` and optionally
``model`` (a panel of models) and ``changed`` (rows with ``changed`` false are counted, not tested:
a twin identical to its original is no observation of the perturbation). Every problem in a table
read from disk is an error naming the file, row and field.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import numpy as np
import pandas as pd

from rmcore.errors import ConfigError, DataError
from rmeval.perturbations.suite import GROUPS

PAIR_COLUMNS = ["item_id", "perturbation", "m_original", "m_perturbed"]


def _row_no(path: str, i: int) -> int:
    """Row as a user finds it: the line for jsonl (1-based) and csv (after the header), else 1-based."""
    if path.endswith(".csv"):
        return i + 2
    return i + 1


def validate_pairs(df: pd.DataFrame, *, file: str = "<pairs>", groups: Mapping[str, str] | None = None
                   ) -> pd.DataFrame:
    """Check a pairs table; every problem is an error naming the file, row and field."""
    for col in PAIR_COLUMNS:
        if col not in df.columns:
            raise DataError("missing column", file=file, field=col)
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
    keys = ["model", "perturbation", "item_id"] if "model" in df.columns else ["perturbation", "item_id"]
    dup = df.duplicated(keys, keep=False)
    if dup.any():
        rows = [_row_no(file, i) for i in np.nonzero(dup.to_numpy())[0][:2]]
        first = df.loc[dup].iloc[0]
        raise DataError(f"duplicate row for item '{first['item_id']}' and perturbation '{first['perturbation']}' "
                        f"(rows {rows[0]} and {rows[1]})", file=file, row=rows[1], field="item_id")
    df["m_original"] = df["m_original"].astype(float)
    df["m_perturbed"] = df["m_perturbed"].astype(float)
    if "changed" in df.columns:
        truth = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
        for i, v in enumerate(df["changed"]):
            if str(v).strip().lower() not in truth:
                raise DataError(f"changed must be true or false, got {v!r}", file=file, row=_row_no(file, i),
                                field="changed")
        df["changed"] = [truth[str(v).strip().lower()] for v in df["changed"]]
    return df


def read_pairs(path: str | os.PathLike, groups: Mapping[str, str] | None = None) -> pd.DataFrame:
    from rmcore.io import read_table

    return validate_pairs(read_table(path), file=str(path), groups=groups)


def parse_groups(items: list[str] | None) -> dict[str, str]:
    """['XX=controlled', 'YY=mine'] -> {'XX': 'controlled', 'YY': 'mine'}."""
    out = {}
    for part in items or []:
        for kv in part.split(","):
            if not kv:
                continue
            k, sep, v = kv.partition("=")
            if not sep or not k or not v:
                raise ConfigError(f"--groups entries look like CODE=GROUP, got '{kv}'")
            out[k.strip()] = v.strip()
    return out
