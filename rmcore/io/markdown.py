"""Markdown for every report matchrm writes: one number format and one table builder.

A missing or non-finite figure prints as an em dash, never as ``nan``, so a reader sees "not
measured" rather than a number. Intervals are 95% intervals printed as ``[lo, hi]``. A report with
its own long-standing convention names it (``missing="n/a"``; ``large=1e4``: effect sizes of a
nearly constant shift are huge or infinite, and three significant digits say so in a narrow cell)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

MISSING = "—"


def num(value: Any, digits: int = 3, *, missing: str = MISSING, large: float | None = None) -> str:
    """``value`` with ``digits`` decimals; None, NaN, infinities and non-numbers print as ``missing``.
    With ``large``, a magnitude of at least ``large`` (infinity included) prints with 3 significant
    digits (``1.23e+04``, ``inf``)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return missing
    if large is not None and abs(x) >= large:
        return f"{x:.3g}"
    return f"{x:.{digits}f}" if math.isfinite(x) else missing


def percent(value: Any, digits: int = 1, *, missing: str = MISSING) -> str:
    """A proportion as a percentage, ``100 * value`` with ``digits`` decimals (``missing`` as in ``num``)."""
    try:
        x = 100 * float(value)
    except (TypeError, ValueError):
        return missing
    return num(x, digits, missing=missing)


def interval(result: Mapping[str, Any], digits: int = 3) -> str:
    """``[lo, hi]`` of a result's ``ci95`` (dashes where it has none)."""
    lo, hi = result.get("ci95") or (None, None)
    return f"[{num(lo, digits)}, {num(hi, digits)}]"


def estimate(result: Mapping[str, Any], digits: int = 3) -> str:
    """``est [lo, hi]`` of a result with ``estimate`` and ``ci95``."""
    return f"{num(result.get('estimate'), digits)} {interval(result, digits)}"


def table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table as lines: header, rule, one line per row (cells taken as text)."""
    out = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out
