"""What an audit section is: one top-level key of ``audit.json``, declared once.

``AuditSection(name, compute, needs, streams, figures)``; the built-in sections and their registry
(``AUDIT_SECTIONS``, ``register_section``) are in ``rmeval.stats.audit_sections``, the Markdown of each in
``rmeval.audit.report`` (``register_markdown``), so that these statistics hold no text layout.

- ``compute(inputs)`` gets the audit's inputs (``AuditInputs``: the scores by condition, the
  per-response frames with their ratings, the settings, the shared prompt resamples, the optional
  tables, the sections computed before it) and returns the section's value, or None: the section
  is then absent from the audit ("not measured", never reported as zero or NaN).
- ``needs``: "original" (original-condition scores) and/or "attribute" (a rated attribute):
  without them ``compute`` is not called and the section is absent.
- ``streams``: {name: index} of the random streams the section draws from; a stream named s
  yields ``numpy.random.default_rng([seed, index])`` (``AuditInputs.rng``), so adding or removing
  one statistic never moves another's interval. The indices form one table, append-only: an index
  is never changed or reused (that would move every interval drawn from it); a new stream takes
  an index above every one in use (``next_stream_index``).
- ``markdown``: a plugin section's part of audit.md (``render(audit)`` -> lines), shown after the
  built-in parts; a section registered in code may give it or use ``register_markdown``.
- ``figures``: {name: Figure} of the numbers a sweep tabulates per run (its ledger, summary.csv,
  report.md and its W&B summary table), each at a ``path`` inside the section's value. A figure's
  ``role`` says where it goes (``ROLES``).

Pure Python: loading it loads no numpy (``AuditInputs.rng`` imports numpy when called).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rmcore.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from .bootstrap import PromptSetResamples
    from .settings import StatsSettings

NEEDS = ("original", "attribute")
# A figure's role in a sweep, in the order of a labelled audit's columns (``<label>:<figure>``):
# "accuracy": the audit's pair accuracy on its prompts' preference pairs: the run's own final audit
#   leaves it out (training's held-out pair accuracy is that audit's column; summary.csv's first);
# "run": the run's figure: a column of its final audit and of each labelled audit;
# "reference": the audited data's own figure, the same for every run (the human share): kept in
#   the ledger for report.md's reference line, a column of each labelled audit only.
ROLES = ("accuracy", "run", "reference")


@dataclass(frozen=True)
class Figure:
    """One number of a section that a sweep tabulates per run."""

    path: tuple[str, ...]  # inside the section's value, e.g. ("original", "estimate")
    label: str  # its heading in the sweep's report.md
    role: str = "run"  # ROLES


@dataclass
class AuditInputs:
    """What every section's ``compute`` reads: the validated tables and what compute_audit derives
    from them once."""

    scores: pd.DataFrame  # the validated scores table, every condition
    ratings: pd.DataFrame  # the validated ratings table
    by_cond: dict[str, pd.DataFrame]  # the scores table by condition
    # original-condition rows with their ratings (None: no original scores), and their ids and scores
    orig: pd.DataFrame | None
    orig_scores: pd.DataFrame | None
    # one row per response of original, generic and the per-response conditions (score averaged over
    # variants and donors), with its ratings
    frames: dict[str, pd.DataFrame]
    attribute: str | None  # the audited rated attribute (None: a preference set)
    rated: list[str]  # the numeric rated attributes, the audited one first
    settings: StatsSettings
    resamples: PromptSetResamples  # one resample matrix per prompt set: paired comparisons
    streams: Mapping[str, int]  # every section's random streams (name -> index)
    preferences: pd.DataFrame | None = None
    reference_scores: pd.DataFrame | None = None
    prompts: pd.DataFrame | None = None
    features: pd.DataFrame | None = None
    prompt_features: pd.DataFrame | None = None
    compare: dict[str, pd.DataFrame] = field(default_factory=dict)
    audit: dict[str, Any] = field(default_factory=dict)  # the sections computed so far

    def rng(self, stream: str) -> np.random.Generator:
        """The generator of a declared stream: ``default_rng([seed, index])``."""
        import numpy as np

        if stream not in self.streams:
            raise ConfigError(f"random stream '{stream}' is declared by no audit section")
        return np.random.default_rng([self.settings.seed, self.streams[stream]])


@dataclass(frozen=True)
class AuditSection:
    """One top-level key of audit.json: how it is computed, what it draws, what a sweep reads (module doc)."""

    name: str
    compute: Callable[[AuditInputs], Any]
    needs: tuple[str, ...] = ()
    streams: Mapping[str, int] = field(default_factory=dict)
    figures: Mapping[str, Figure] = field(default_factory=dict)
    # a plugin's part of audit.md (audit -> Markdown lines); the built-ins' parts are registered in
    # rmeval.audit.report, in the page's order
    markdown: Callable[[dict[str, Any]], list[str]] | None = None

    def ready(self, inputs: AuditInputs) -> bool:
        """Whether the inputs hold what the section needs."""
        return ("original" not in self.needs or inputs.orig is not None) and (
            "attribute" not in self.needs or inputs.attribute is not None)


def stream_table(sections: Iterable[AuditSection]) -> dict[str, int]:
    """{stream: index} of every section's streams, in index order."""
    table = {s: i for sec in sections for s, i in sec.streams.items()}
    return dict(sorted(table.items(), key=lambda kv: kv[1]))


def next_stream_index(sections: Iterable[AuditSection]) -> int:
    """The index a new stream takes: one above every index in use."""
    return max(stream_table(sections).values(), default=-1) + 1


def check_section(section: AuditSection, others: Iterable[AuditSection]) -> None:
    """One-line ConfigErrors for a section that cannot join ``others``: an unknown need or role,
    a stream name or index already taken, a figure name already taken."""
    others = list(others)
    where = f"audit section '{section.name}'"
    for need in section.needs:
        if need not in NEEDS:
            raise ConfigError(f"{where}: unknown need '{need}'; known: {', '.join(NEEDS)}")
    taken = {s: (i, o.name) for o in others for s, i in o.streams.items()}
    by_index = {i: (s, o) for s, (i, o) in taken.items()}
    for s, i in section.streams.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise ConfigError(f"{where}: stream '{s}' needs an index >= 0, got {i!r}")
        if s in taken:
            raise ConfigError(f"{where}: stream '{s}' is already declared by section '{taken[s][1]}'")
        if i in by_index:
            raise ConfigError(f"{where}: stream index {i} of '{s}' is taken by '{by_index[i][0]}' (section "
                              f"'{by_index[i][1]}'); an index never changes, the next free one is "
                              f"{next_stream_index(others)}")
    if len(set(section.streams.values())) < len(section.streams):
        raise ConfigError(f"{where}: two of its streams share an index")
    names = {n: o.name for o in others for n in o.figures}
    for n, fig in section.figures.items():
        if fig.role not in ROLES:
            raise ConfigError(f"{where}: figure '{n}' has unknown role '{fig.role}'; known: {', '.join(ROLES)}")
        if n in names:
            raise ConfigError(f"{where}: figure '{n}' is already declared by section '{names[n]}'")


def section_figures(sections: Iterable[AuditSection], roles: Iterable[str] = ROLES) -> dict[str, Figure]:
    """{name: figure, its path from the top of audit.json} of the sections' figures of ``roles``,
    in section order."""
    roles = tuple(roles)
    return {n: replace(f, path=(sec.name, *f.path)) for sec in sections for n, f in sec.figures.items()
            if f.role in roles}


def value_at(record: Mapping[str, Any], path: Iterable[str]) -> Any:
    """The value at ``path`` of a nested record; None where a key is missing."""
    cur: Any = record
    for k in path:
        cur = cur.get(k) if isinstance(cur, Mapping) else None
    return cur
