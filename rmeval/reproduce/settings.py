"""The analysis settings of a reproduction recipe: its ``settings`` block (and, in a stand-in run,
``stand_in.settings`` over it) read strictly into the settings dataclass of the pipeline that computes
the table: the audit's, pairwise accuracy's, the suitability audit's, ``JudgeTableSettings``
(JudgeProfile's tables, below), or the leaderboard table's (``rmeval.reproduce.leaderboard``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmcore.errors import ConfigError
from rmcore.settings.fields import bounded
from rmcore.settings.recipes import build_config
from rmeval.audit.settings import AuditSettings, PairwiseSettings
from rmeval.conditions import check_condition_names
from rmeval.suitability.settings import SuitabilityAuditSettings


@dataclass
class JudgeTableSettings:
    """A JudgeProfile table's settings (the recipe's ``settings``)."""

    attributes: list[str] = field(default_factory=list)  # attribute names ('core': the 20 core); empty: all 87
    attributes_file: str | None = None  # a custom inventory (rmeval judges elicit --attributes)
    max_items_per_source: int | None = bounded(None, ge=1)
    rm_bench_pairing: str | None = "0:2"  # chosen:rejected style levels kept from RM-Bench (the paper's)
    budgets: list[int] = bounded(default_factory=lambda: [32, 64, 128, 256], ge=2)  # labels per source
    n_repeats: int = bounded(10, ge=1)
    top_k: list[int] = bounded(default_factory=lambda: [6, 12], ge=1)
    n_splits: int = bounded(20, ge=0)
    null_repeats: int = bounded(20, ge=0)
    min_shared: int = bounded(20, ge=1)  # jointly resolved attributes of a no-conflict case (the paper's 20)
    chunk_items: int = bounded(2, ge=1)
    seed: int = bounded(0, ge=0)
    # judges left out of the main panel (the paper's 19 of 21: Qwen3.5-0.8B and -2B, position bias)
    main_excludes: list[str] = field(default_factory=list)
    donor: str | None = None  # the component swaps' donor judge (the paper's Qwen3.5-27B; default: highest stable rate)


@dataclass
class LeaderboardTableSettings:
    """A leaderboard table's settings (``rmeval.reproduce.leaderboard``; ``stand_in.settings`` over them)."""

    recipe: str = "recipes/leaderboard_helpsteer2_study.yaml"  # the rmeval leaderboard recipe
    out: str = "outputs/experiments/leaderboard_helpsteer2"  # where its run writes leaderboard.json
    judge: str = ""  # the primary judge (a name in the recipe's judges); empty: the first
    second_judge: str | None = None  # the second-judge check's judge
    data: str | None = None  # the stand-in run's data set (a key of the recipe's data); None: the first
    overrides: dict[str, Any] = field(default_factory=dict)  # the experiment recipe's keys a stand-in run sets

    def experiment(self) -> Any:
        """The experiment recipe with ``overrides`` (``rmeval leaderboard``'s config)."""
        import json

        from rmeval.experiments.settings import load_leaderboard_config

        return load_leaderboard_config(self.recipe, [f"{k}={json.dumps(v)}" for k, v in self.overrides.items()])


def settings_class(analysis: str) -> type:
    if analysis == "audit":
        return AuditSettings
    if analysis == "pairwise":
        return PairwiseSettings
    if analysis in ("suitability", "policy"):
        return SuitabilityAuditSettings
    if analysis == "leaderboard":
        return LeaderboardTableSettings
    return JudgeTableSettings


def analysis_settings(recipe: Any, *, stand_in: bool = False, **fixed: Any) -> Any:
    """The analysis's settings dataclass from the recipe's ``settings`` (and, in a stand-in run,
    ``stand_in.settings`` over them), strictly; ``fixed`` are set by the runner (per data set)."""
    values = {**recipe.settings, **(recipe.stand_in.settings if stand_in else {}), **fixed}
    return strict_settings(settings_class(recipe.reproduce.analysis), values, f"{recipe.path}: settings")


def strict_settings(cls: type, values: dict[str, Any], where: str) -> Any:
    """``cls`` from ``values`` by ``rmcore.settings.recipes.build_config`` (unknown keys are errors); a class
    whose annotations name types imported only for type checking has its keys checked the same way
    and its values taken as given."""
    import dataclasses

    try:
        return build_config(cls, values, where)
    except NameError:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(names)}") from None
        return cls(**values)


def check_settings(recipe: Any) -> None:
    """The settings (and the stand-in's) load into the analysis's dataclass; an audit names its
    conditions per data set (every registered condition would need inputs such as an embedder)."""
    for stand_in in (False, True):
        s = analysis_settings(recipe, stand_in=stand_in)
        if hasattr(s, "validate") and recipe.reproduce.analysis in ("suitability", "policy"):
            s.validate()
    if recipe.reproduce.analysis == "judges":
        s = analysis_settings(recipe)
        names = {m.name for m in recipe.models}
        unknown = sorted({*s.main_excludes, *([s.donor] if s.donor else [])} - names)
        if unknown:
            raise ConfigError(f"{recipe.path}: settings main_excludes / donor name judges that are not rows: {unknown}")
    if recipe.reproduce.analysis == "leaderboard":
        if recipe.models or recipe.human:
            raise ConfigError(f"{recipe.path}: a leaderboard table's rows are panel rows (the experiment scores its "
                              "own reward models): no models or human rows")
        for stand_in in (False, True):
            analysis_settings(recipe, stand_in=stand_in).experiment().validate()
    if recipe.reproduce.analysis == "audit":
        for key, entry in recipe.data.items():
            if not entry.conditions:
                raise ConfigError(f"{recipe.path}: data.{key}: an audit table names its conditions")
            check_condition_names(entry.conditions)
        if "conditions" in recipe.settings:
            raise ConfigError(f"{recipe.path}: settings.conditions: name the conditions per data set "
                              "(data.KEY.conditions)")
