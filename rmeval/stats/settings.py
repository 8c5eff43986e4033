"""The settings of an audit's statistics (``rmeval.stats.audit_sections.compute_audit``), declared once: the
flags of ``rmeval audit`` and ``rmeval stats`` and the keys of the recipes' audit blocks come from
these fields (``rmeval.audit.settings.AuditSettings`` holds them). No numpy here: a recipe loads
them without loading the statistics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmcore.errors import ConfigError
from rmcore.settings.fields import bounded, option

# Bootstrap resamples over prompts, declared once: every statistic's keyword default, and through
# n_boot_field every settings field (the flags --n-boot, --n-boot-regression and the recipes' keys).
N_BOOT = 2000
N_BOOT_REGRESSION = 5000  # the sibling regression's: its coefficients' intervals need more
N_BOOT_HELP = "bootstrap resamples over prompts"


def n_boot_field(default: int = N_BOOT, *, help: str | None = N_BOOT_HELP) -> Any:
    """A field holding a number of bootstrap resamples (at least 1): a flag with ``help``, or with
    ``help=None`` a key set by a recipe or by code only."""
    return bounded(default, ge=1) if help is None else option(default, ge=1, help=help)


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

    n_boot: int = n_boot_field()
    n_boot_regression: int = n_boot_field(N_BOOT_REGRESSION, help="resamples for the sibling regression")
    seed: int = option(0, ge=0,
                       help="seed of the prompt sample and of every random draw (bootstrap, donors, permutations)")
    # {label: R} rater reliabilities: the reliability-corrected human share (a sensitivity analysis)
    human_reliability: dict[str, float] = option(
        default_factory=dict, nargs="+", parse=parse_reliabilities,
        gt=0, le=1, help="rater reliabilities NAME=R for the reliability-corrected human share")
    top_fraction: float = bounded(0.3, gt=0, le=1)  # the share of each prompt's responses a top selection keeps
    probe_learners: list[str] | None = None  # the response probes' learners; None: all four
    probe_jobs: int | None = bounded(None, ge=1)  # worker processes of the probes' fits; None: this process's CPUs
