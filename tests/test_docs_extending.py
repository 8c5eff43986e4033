"""docs/extending.md: every ```python block runs as written, one per extension point, and leaves
no registration behind (other tests count the built-ins)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
SECTIONS = ("A new arm", "A new scorer or reward-model loader", "A new judge or text backend", "A new condition",
            "A new data set", "A new perturbation", "A new audit statistic")


def _blocks() -> list[tuple[str, str]]:
    """(section heading, code) for every python block, in page order."""
    out, section = [], ""
    for m in re.finditer(r"^## ([^\n]+)$|^```python\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.M | re.S):
        if m.group(1):
            section = m.group(1).strip()
        else:
            out.append((section, m.group(2)))
    return out


def _registries() -> list[Any]:
    """Every mapping a registration writes to (the registries, and the side tables of two)."""
    import rmcore.data.loading as data
    import rmeval.audit.report as report
    import rmeval.backends.spec as backends
    import rmeval.conditions as conditions
    import rmeval.perturbations.controlled as controlled
    import rmeval.scoring.base as scoring
    import rmeval.scoring.loaders as loaders
    import rmeval.stats.audit_sections as audit
    import rmtrain.arms.base as arms

    return [arms.ARMS, scoring.SCORERS, loaders.LOADER_KINDS, data.LOADERS, conditions.CONDITIONS,
            conditions.NEEDS, controlled.PROMPT_PERTURBATIONS, controlled.GROUPS,
            backends.BACKENDS, controlled.RESPONSE_PERTURBATIONS, audit.AUDIT_SECTIONS, report.MARKDOWN]


@contextmanager
def _restoring() -> Iterator[None]:
    """Takes back whatever the block registers, so that the registries hold the built-ins again."""
    saved = [(reg, dict(reg)) for reg in _registries()]
    try:
        yield
    finally:
        for reg, before in saved:
            for name in [n for n in reg if n not in before]:
                del reg[name]
            reg.update(before)


def _run(code: str, section: str) -> None:
    exec(compile(code, f"{PAGE.name} ({section})", "exec"), {"__name__": "docs_extending_example"})


def test_the_page_has_an_example_per_extension_point():
    blocks = _blocks()
    assert [s for s in SECTIONS if s not in {b[0] for b in blocks}] == []
    # short enough to read at a glance (the scorer/loader section has one of each)
    assert all(len(code.strip().splitlines()) <= 25 for _, code in blocks)


@pytest.mark.parametrize("section,code", _blocks(), ids=[f"{i}-{s}" for i, (s, _) in enumerate(_blocks())])
def test_example_runs(section: str, code: str) -> None:
    with _restoring():
        _run(code, section)


def test_the_examples_register_and_leave_nothing_behind() -> None:
    before = [dict(reg) for reg in _registries()]
    with _restoring():
        for section, code in _blocks():
            _run(code, section)
        added = [sorted(set(reg) - set(old)) for reg, old in zip(_registries(), before)]
    assert added == [["example_gap_hinge"], ["example_word_count"], ["example_mine"], ["example_tiny"],
                     ["example_shouted"], [], ["PL"], ["PL", "SH"],
                     ["example_longer"], ["SH"], ["example_mean"], ["example_mean"]]
    assert [dict(reg) for reg in _registries()] == before
