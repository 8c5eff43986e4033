"""The settings of an audit's statistics (``rmeval.stats.audit.compute_audit``), declared once: the
flags of ``rmeval audit`` and ``rmeval stats`` and the keys of the recipes' audit blocks come from
these fields (``rmeval.audit.pipeline.AuditSettings`` holds them). No numpy here: a recipe loads
them without loading the statistics."""

from __future__ import annotations

from dataclasses import dataclass

from rmcore.errors import ConfigError
from rmcore.settings import bounded, option


def parse_reliabilities(items: list[str] | None) -> dict[str, float]:
    """NAME=R (or a bare R) arguments -> {NAME: R}."""
    out: dict[str, float] = {}
    for item in items or []:
        label, _, value = item.rpartition("=")
        try:
            out[label or value] = float(value)
        except ValueError:
            raise ConfigError(f"a reliability must be NAME=R or R with R a number, got {item!r}") from None
    return out


@dataclass
class StatsSettings:
    """How the audit's statistics are computed: resamples, seed, and what they correct or probe."""

    n_boot: int = option(2000, ge=1, help="bootstrap resamples over prompts")
    n_boot_regression: int = option(5000, ge=1, help="resamples for the sibling regression")
    seed: int = option(0, ge=0,
                       help="seed of the prompt sample and of every random draw (bootstrap, donors, permutations)")
    # {label: R} rater reliabilities: the reliability-corrected human share (a sensitivity analysis)
    human_reliability: dict[str, float] = option(
        default_factory=dict, nargs="+", parse=parse_reliabilities,
        gt=0, le=1, help="rater reliabilities NAME=R for the reliability-corrected human share")
    top_fraction: float = bounded(0.3, gt=0, le=1)  # the share of each prompt's responses a top selection keeps
    probe_learners: list[str] | None = None  # the response probes' learners; None: all four
    probe_jobs: int | None = bounded(None, ge=1)  # worker processes of the probes' fits; None: this process's CPUs
