"""Markdown for every report matchrm writes: one number format and one table builder.

A missing or non-finite figure prints as an em dash, never as ``nan``, so a reader sees "not
measured" rather than a number. Intervals are 95% intervals printed as ``[lo, hi]``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

MISSING = "—"


def num(value: Any, digits: int = 3) -> str:
    """``value`` with ``digits`` decimals; None, NaN, infinities and non-numbers print as a dash."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return MISSING
    return f"{x:.{digits}f}" if math.isfinite(x) else MISSING


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
