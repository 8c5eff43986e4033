"""Our figure for every cell of a recipe's table, and every published figure set beside ours.

A cell's figure is read from its row's result document (``{data key: document}``) at the
column's dotted key: a mapping with ``estimate`` (and ``ci95``: our interval) or a plain number.
Keys may name mapping keys that contain dots (a model named ``llama-3.1-8b``): at each level the
longest run of segments that is a key is taken. ``{row}`` in a key is the row's name (panel rows).

A published one-cell figure gets three cells: published, ours (with our interval), and the
difference published − ours, marked where the published value lies outside our interval. A
figure stated over several rows (a range "0.34 to 0.64" over the six core models, a count "21 of
26", a median, a bound "all above 0.85") is compared with the same statistic of our rows: lo and hi
for a range (differences of each end), else the sum, mean, median, min, max or largest |value|. A
figure whose rows are not all scored yet is missing, with the rows it waits for."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Value:
    estimate: float
    lo: float | None = None
    hi: float | None = None


@dataclass
class Cell:
    row: str
    column: str
    ours: Value | None = None
    published: Any | None = None  # recipe.Figure
    missing: str | None = None
    ours_mark: str = ""  # our significance mark (the column's mark_key), beside ours as the paper's beside it

    @property
    def applies(self) -> bool:
        return self.ours is not None or self.missing is not None or self.published is not None

    @property
    def difference(self) -> float | None:
        if self.published is None or self.ours is None or self.published.value is None:
            return None
        return float(self.published.value) - self.ours.estimate

    @property
    def outside(self) -> bool:
        """The published value lies outside our interval (no interval: never)."""
        o, p = self.ours, self.published
        if p is None or o is None or o.lo is None or o.hi is None or p.value is None:
            return False
        return not (o.lo <= float(p.value) <= o.hi)


@dataclass
class Statement:
    """A published figure over several rows, beside the same statistic of our rows."""

    figure: Any
    ours: list[float] = field(default_factory=list)  # [lo, hi] for a range, else [value]
    rows: list[str] = field(default_factory=list)
    missing: str | None = None

    @property
    def differences(self) -> list[float] | None:
        if self.missing or not self.ours:
            return None
        pub = self.figure.range if (self.figure.aggregate or "range") == "range" else [self.figure.value]
        return [float(p) - o for p, o in zip(pub, self.ours)]


def lookup(doc: Any, key: str) -> Any:
    """The value at dotted ``key`` of ``doc`` (longest matching run of segments first); None if absent."""
    parts = key.split(".") if key else []
    cur, i = doc, 0
    while i < len(parts):
        if not isinstance(cur, dict):
            return None
        for j in range(len(parts), i, -1):
            name = ".".join(parts[i:j])
            if name in cur:
                cur, i = cur[name], j
                break
        else:
            return None
    return cur


def as_value(x: Any) -> Value | None:
    if isinstance(x, dict) and "estimate" in x:
        ci = x.get("ci95") or [None, None]
        est = x["estimate"]
        if est is None or (isinstance(est, float) and math.isnan(est)):
            return None
        return Value(float(est), *(None if c is None else float(c) for c in ci[:2]))
    if isinstance(x, bool):
        return Value(float(x))
    if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)):
        return Value(float(x))
    return None


def doc_for(row_doc: dict[str, Any], column: Any) -> Any:
    """The document of ``row_doc`` (data key -> document) that ``column`` reads."""
    if column.data is not None:
        return row_doc.get(column.data)
    return next(iter(row_doc.values())) if len(row_doc) == 1 else row_doc


def cell_value(row: str, row_doc: dict[str, Any] | None, column: Any, *, human: bool = False) -> Value | None:
    """Our figure of ``column`` for ``row`` (None when the row or the figure is absent)."""
    if row_doc is None:
        return None
    doc = next(iter(row_doc.values())) if human else doc_for(row_doc, column)  # a human row: its own data set
    key = (column.human_key or column.key) if human else column.key
    v = as_value(lookup(doc, key.replace("{row}", row)))
    if v is None:
        return None
    if column.minus:
        m = as_value(lookup(doc, column.minus.replace("{row}", row)))
        if m is None:
            return None
        v = Value(v.estimate - m.estimate)
    s = column.scale
    lo, hi = (None, None) if v.lo is None else (v.lo * s, v.hi * s)
    return Value(v.estimate * s, *(sorted((lo, hi)) if lo is not None else (None, None)))


def cell_mark(row: str, row_doc: dict[str, Any] | None, column: Any) -> str:
    """Our significance mark of ``column`` for ``row`` (the string at ``column.mark_key``; "" if none)."""
    if row_doc is None or not column.mark_key:
        return ""
    mark = lookup(doc_for(row_doc, column), column.mark_key.replace("{row}", row))
    return mark if isinstance(mark, str) else ""


def figure_rows(recipe: Any, figure: Any) -> list[str]:
    """The figure's rows; ``[all]``: every model, unless a row is named ``all`` (a panel row)."""
    rows = figure.rows or []
    return [m.name for m in recipe.models] if rows == ["all"] and "all" not in recipe.row_names() else list(rows)


def statement(recipe: Any, figure: Any, cells: dict[tuple[str, str], Cell]) -> Statement:
    rows = figure_rows(recipe, figure)
    st = Statement(figure, rows=rows)
    if figure.also_columns:  # over every cell of several columns that has our figure
        keys = [(r, c) for c in [figure.column, *figure.also_columns] for r in rows]
        vals = [cells[k].ours.estimate for k in keys if k in cells and cells[k].ours is not None]
        if figure.expect_rows and len(vals) < figure.expect_rows:
            st.missing = (f"{len(vals)} of the {figure.expect_rows} cells the paper's statement covers have our "
                          "figure")
            return st
    else:
        got = {r: cells[(r, figure.column)].ours for r in rows if (r, figure.column) in cells}
        if figure.minus_column:  # each row's change from another column
            base = {r: cells[(r, figure.minus_column)].ours for r in rows if (r, figure.minus_column) in cells}
            got = {r: None if v is None or base.get(r) is None else Value(v.estimate - base[r].estimate)
                   for r, v in got.items()}
        waiting = [r for r in rows if got.get(r) is None]
        if waiting:
            nr = {r for r in waiting if (r, figure.column) in cells
                  and (cells[(r, figure.column)].missing or "").startswith("not reproducible")}
            st.missing = "waits for " + ", ".join(r + (" (not reproducible)" if r in nr else "") for r in waiting)
            return st
        if figure.expect_rows and len(rows) < figure.expect_rows:
            st.missing = (f"the paper's statement covers {figure.expect_rows} rows; the recipe names {len(rows)} "
                          "(the other row labels were lost in the paper's text extraction)")
            return st
        vals = [got[r].estimate for r in rows]
    if not vals:
        st.missing = "no cell has our figure"
        return st
    import numpy as np

    agg = figure.aggregate or "range"
    if agg == "range":
        st.ours = [min(vals), max(vals)]
    else:
        fn = {"sum": np.sum, "mean": np.mean, "median": np.median, "min": np.min, "max": np.max,
              "max_abs": lambda v: np.max(np.abs(v)), "median_abs": lambda v: np.median(np.abs(v))}[agg]
        st.ours = [float(fn(np.asarray(vals, float)))]
    return st
