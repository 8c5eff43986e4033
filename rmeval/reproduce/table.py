"""The table in the paper's layout: one line per row (human references, models, panel rows), and for
every column three cells: published (the paper's value and interval), ours (with our interval) and
the difference published − ours, marked † where the published value lies outside our interval.
Written as ``table.md`` and ``table.csv`` (the same layout), with ``figures.csv`` (one line per
cell, numbers only) beside them. Below the table: statements over several rows, the cells still
missing and why, every published figure's source in the paper, what cannot be reproduced from
public artifacts, and how each row was scored. A stand-in run's table opens with a banner: its
figures come from tiny untrained local models and mean nothing; table.csv marks every row label and
figures.csv has a ``stand_in`` column, and a cell it leaves undefined says why
(``undefined_reason``). ``console_text`` is what the command prints: the table and the statements."""

from __future__ import annotations

import csv
import io
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from rmcore.io.files import atomic_write_text
from rmcore.io.markdown import table
from rmeval.reproduce.figures import Cell, Statement, Value, cell_mark, cell_value, doc_for, lookup, statement
from rmeval.reproduce.recipe import STUDIES

STAND_IN_BANNER = ("> **STAND-IN RUN.** Every model below is a tiny untrained local stand-in of the same kind "
                   "and the data are small local files in the released schemas: the *ours* cells exercise the "
                   "pipeline end to end and mean nothing. Only the *published* cells are the paper's.")
STAND_IN_LABEL = " [stand-in: ours means nothing]"  # each row of table.csv in a stand-in run
MARK = "†"
NOT_REPRODUCIBLE = "not reproducible"


def build_cells(recipe: Any, docs: dict[str, dict[str, Any] | None], panel: dict[str, Any] | None,
                reasons: dict[str, str], *, stand_in: bool = False
                ) -> tuple[dict[tuple[str, str], Cell], list[Statement]]:
    """Every (row, column) cell with our figure or why it is missing (``undefined_reason``), the
    published figures attached, and the statements over several rows."""
    human = {h.name for h in recipe.human}
    panel_rows = {p.name for p in recipe.panel_rows}
    cells: dict[tuple[str, str], Cell] = {}
    for row in recipe.row_names():
        doc = panel if row in panel_rows else docs.get(row)
        for col in recipe.columns:
            c = Cell(row, col.name)
            if not recipe.applies(col, row):
                cells[(row, col.name)] = c
                continue
            if row in panel_rows:
                doc = None if not panel else (panel.get(col.data) if col.data else panel)
                c.ours = None if doc is None else cell_value(row, {"_": doc}, replace(col, data=None))
            else:
                c.ours = cell_value(row, doc, col, human=row in human)
                c.ours_mark = cell_mark(row, doc, col) if c.ours is not None else ""
            if col.card and c.ours is not None:
                card = recipe.model_cards.get(row, {}).get(col.card)
                c.ours = None if card is None else shift(c.ours, -float(card))
                if card is None:
                    c.missing = f"no model-card score in the recipe (model_cards.{row}.{col.card})"
            if c.ours is None and c.missing is None:
                c.missing = (reasons.get(f"{row}|{col.name}") or reasons.get(row)
                             or ("not yet computed" if doc is None or not doc
                                 else undefined_reason(row, *(({"_": doc}, replace(col, data=None))
                                                              if row in panel_rows else (doc, col)),
                                                       human=row in human, stand_in=stand_in)))
            cells[(row, col.name)] = c
    for f in recipe.published:
        if f.row is not None:
            cells[(f.row, f.column)].published = f
    statements = [statement(recipe, f, cells) for f in recipe.published if f.rows is not None]
    return cells, statements


def truncation_counts(doc: Any) -> tuple[int, int, int] | None:
    """(texts scored, prompts cut, responses cut) of a row's document: an audit's
    ``truncation.total`` or a suitability run's ``meta.truncation``; None when it records none."""
    t = lookup(doc, "truncation.total") or lookup(doc, "meta.truncation")
    if not isinstance(t, dict):
        return None
    n = t.get("n", t.get("n_scored"))
    return None if n is None else (int(n), int(t.get("prompt_truncated", 0)), int(t.get("response_truncated", 0)))


def undefined_reason(row: str, row_doc: dict[str, Any], col: Any, *, human: bool = False,
                     stand_in: bool = False) -> str:
    """Why a computed row has no figure at the column's key. In a stand-in run, what made it
    undefined where the document says: the record the key names absent (the stand-in leaves that
    part out), every perturbed input reaching the scorer as its original, the stand-in's token cap
    cutting the scored texts."""
    key = ((col.human_key or col.key) if human else col.key).replace("{row}", row)
    base = f"no figure at {key!r}"
    if not stand_in:
        return base + " (absent, or undefined here)"
    from rmeval.reproduce.standins import STANDIN_MAX_LENGTH

    doc = next(iter(row_doc.values())) if human else doc_for(row_doc, col)
    parts = key.split(".")
    rec = lookup(doc, ".".join(parts[:-1])) if len(parts) > 1 else doc
    why = []
    if rec is None:  # the shortest absent prefix: what this run did not compute
        have = max((i for i in range(1, len(parts)) if lookup(doc, ".".join(parts[:i])) is not None), default=0)
        why.append(f"this stand-in run computed no {'.'.join(parts[:have + 1])!r} (see the stand-in note)")
    elif isinstance(rec, dict) and rec.get("n") and (rec.get("n_invisible") or 0) >= rec["n"]:
        why.append(f"all {rec['n']} perturbed inputs reached the scorer as their originals")
    cut = truncation_counts(doc) if rec is not None else None
    if cut and (cut[1] or cut[2]):
        why.append(f"the {STANDIN_MAX_LENGTH}-token stand-in cap cut the prompt of {cut[1]} and a response of "
                   f"{cut[2]} of the {cut[0]} scored texts")
    if not why:
        why.append("undefined for tiny untrained stand-ins on a few items (see the stand-in note)")
    return f"{base}: {'; '.join(why)}"


def shift(v: Value, by: float) -> Value:
    return Value(v.estimate + by, None if v.lo is None else v.lo + by, None if v.hi is None else v.hi + by)


def _num(x: float | None, digits: int) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _published(f: Any, digits: int) -> str:
    if f is None:
        return "—"
    text = _num(f.value, digits) + (f.mark or "")
    if f.interval:
        text += f" [{_num(f.interval[0], digits)}, {_num(f.interval[1], digits)}]"
    return text


def _ours(c: Cell, digits: int) -> str:
    if c.ours is None:
        if c.missing and c.missing.startswith(NOT_REPRODUCIBLE):
            return c.missing if c.published is not None else NOT_REPRODUCIBLE
        return "missing" if c.published is not None else "—"
    text = _num(c.ours.estimate, digits) + c.ours_mark
    if c.ours.lo is not None:
        text += f" [{_num(c.ours.lo, digits)}, {_num(c.ours.hi, digits)}]"
    return text


def _diff(c: Cell, digits: int) -> str:
    d = c.difference
    if d is None:
        return "—"
    return f"{d:+.{digits}f}" + (f" {MARK}" if c.outside else "")


def table_rows(recipe: Any, cells: dict[tuple[str, str], Cell], *, stand_in: bool = False
               ) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the paper-layout table: three cells per column; a row no column applies to
    (a model whose runs feed the panel rows only) is left out (its status is under "Rows"); in a
    stand-in run every row's label carries ``STAND_IN_LABEL`` (table.csv has no banner)."""
    header = ["row"]
    for col in recipe.columns:
        label = col.label or col.name
        header += [f"{label}: published", f"{label}: ours", f"{label}: Δ"]
    rows = []
    for row in recipe.row_names():
        if not any(recipe.applies(col, row) for col in recipe.columns):
            continue
        line = [recipe.row_label(row) + (STAND_IN_LABEL if stand_in else "")]
        for col in recipe.columns:
            c = cells[(row, col.name)]
            line += [_published(c.published, col.digits), _ours(c, col.digits), _diff(c, col.digits)]
        rows.append(line)
    return header, rows


def _statement_lines(recipe: Any, statements: list[Statement]) -> list[str]:
    if not statements:
        return []
    digits = {c.name: c.digits for c in recipe.columns}
    rows = []
    for s in statements:
        f, d = s.figure, digits[s.figure.column]
        agg = f.aggregate or "range"
        pub = f"{_num(f.range[0], d)} to {_num(f.range[1], d)}" if agg == "range" else f"{agg} {_num(f.value, d)}"
        ours = "missing" if s.missing else (f"{_num(s.ours[0], d)} to {_num(s.ours[1], d)}" if agg == "range"
                                             else f"{agg} {_num(s.ours[0], d)}")
        diff = "—" if s.differences is None else ", ".join(f"{x:+.{d}f}" for x in s.differences)
        what = f.column + (f" − {f.minus_column}" if f.minus_column else "") + \
            "".join(f", {c}" for c in f.also_columns or [])
        rows.append([f"{f.table}, {what}", ", ".join(recipe.row_label(r) for r in s.rows), pub, ours, diff,
                     s.missing or ""])
    return ["## Statements over several rows", "",
            *table(["figure", "rows", "published", "ours", "Δ (published − ours)", "missing"], rows), ""]


def markdown(recipe: Any, cells: dict[tuple[str, str], Cell], statements: list[Statement], *, stand_in: bool,
             rows_info: dict[str, dict[str, Any]]) -> str:
    r = recipe.reproduce
    lines = [f"# {r.table}: {r.title}", "",
             f"*{STUDIES[r.study]}*; recipe `{recipe.path}` (analysis: {r.analysis}).", ""]
    if stand_in:
        lines += [STAND_IN_BANNER, ""] + ([f"Stand-in: {recipe.stand_in.note.strip()}", ""]
                                          if recipe.stand_in.note else [])
    lines += [f"Three cells per figure: published (the paper's value and interval), ours [our 95% interval], and "
              f"Δ = published − ours; {MARK}: the published value lies outside our interval; —: not published or "
              "not computed.", ""]
    header, rows = table_rows(recipe, cells)
    lines += [*table(header, rows), ""]
    lines += _statement_lines(recipe, statements)
    missing = [c for c in cells.values() if c.ours is None and c.published is not None]
    missing_st = [s for s in statements if s.missing]
    if missing or missing_st:
        lines += ["## Missing cells", ""]
        lines += [f"- {recipe.row_label(c.row)} × {c.column}: {c.missing}" for c in missing]
        lines += [f"- {s.figure.table}, {s.figure.column} over {len(s.rows)} rows: {s.missing}" for s in missing_st]
        lines += [""]
    lines += ["## Published figures and where they are in the paper", ""]
    for f in recipe.published:
        where = f.row if f.row is not None else ", ".join(f.rows or [])
        lines.append(f"- {f.table} · {where} · {f.column}: {f.source}" + (f" ({f.note})" if f.note else ""))
    if recipe.not_reproducible:
        lines += ["", "## Not reproducible from public artifacts", ""]
        lines += [f"- {x}" for x in recipe.not_reproducible]
    lines += ["", "## Rows", ""]
    lines += table(["row", "model", "how", "status", "seconds"],
                   [[recipe.row_label(n), i.get("model", ""), i.get("how", ""), i.get("status", ""),
                     i.get("seconds", "")] for n, i in rows_info.items()])
    return "\n".join(lines) + "\n"


def console_text(recipe: Any, cells: dict[tuple[str, str], Cell], statements: list[Statement], *,
                 stand_in: bool) -> str:
    """What a run prints: the title, the stand-in banner, the table and the statements over several
    rows, one blank line between parts and none doubled (table.md has the rest)."""
    r = recipe.reproduce
    parts = [[f"# {r.table}: {r.title}"], [STAND_IN_BANNER] if stand_in else [],
             table(*table_rows(recipe, cells)), _statement_lines(recipe, statements)]
    lines: list[str] = []
    for part in parts:
        for line in part:
            if line or (lines and lines[-1]):
                lines.append(line)
        if lines and lines[-1]:
            lines.append("")
    return "\n".join(lines).strip("\n")


def csv_text(header: list[str], rows: list[list[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def figures_rows(recipe: Any, cells: dict[tuple[str, str], Cell], *, stand_in: bool = False
                 ) -> tuple[list[str], list[list[Any]]]:
    """One line per cell; ``stand_in`` True on every line of a stand-in run (its ours mean nothing)."""
    header = ["row", "column", "published", "published_lo", "published_hi", "ours", "ours_lo", "ours_hi",
              "difference", "outside_interval", "missing", "source", "published_mark", "ours_mark", "stand_in"]
    rows = []
    for (row, col), c in cells.items():
        f, o = c.published, c.ours
        iv = (f.interval if f is not None and f.interval else [None, None])
        rows.append([row, col, None if f is None else f.value, *iv, *(([o.estimate, o.lo, o.hi]) if o else [None] * 3),
                     c.difference, c.outside, c.missing or "", "" if f is None else f.source,
                     "" if f is None else f.mark, c.ours_mark, stand_in])
    return header, rows


def write_table(recipe: Any, cells: dict[tuple[str, str], Cell], statements: list[Statement],
                out: str | os.PathLike, *, stand_in: bool, rows_info: dict[str, dict[str, Any]]) -> dict[str, Path]:
    out = Path(out)
    header, rows = table_rows(recipe, cells, stand_in=stand_in)
    fh, fr = figures_rows(recipe, cells, stand_in=stand_in)
    return {"markdown": atomic_write_text(out / "table.md", markdown(recipe, cells, statements, stand_in=stand_in,
                                                                      rows_info=rows_info)),
            "csv": atomic_write_text(out / "table.csv", csv_text(header, rows)),
            "figures": atomic_write_text(out / "figures.csv", csv_text(fh, fr))}
