"""The settings of a suitability audit, declared once (``SuitabilityAuditSettings``): the flags of
``rmeval suitability``, ``rmeval suitability-stats`` and ``rmeval audit --suitability``, and the keys
of the training recipes' ``audit.suitability`` block, come from its fields. A light module (no
numpy): the recipe blocks of ``rmeval.audit.pipeline`` hold these settings."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmcore.errors import ConfigError
from rmcore.settings.fields import bounded, option
from rmeval.perturbations.rewriters import make_rewriter

if TYPE_CHECKING:
    from rmcore.data.schema import RatingSet
    from rmeval.suitability.run import SuitabilitySettings

# The fields of the inference alone (``rmeval suitability-stats``); every other one is a setting of
# the perturbations, the rewriting, the data or the judge of an audit that scores models.
INFERENCE = ("n_permutations", "q", "eta", "margin", "alpha", "weighting", "null_share", "metric", "robustness",
             "procedure")


def parse_null_shares(items: list[str] | None) -> dict[str, float] | None:
    """['controlled=0.8', 'stylized=0.5'] (or comma-separated) -> {'controlled': 0.8, 'stylized': 0.5}."""
    if not items:
        return None
    out: dict[str, float] = {}
    for part in items:
        for kv in part.split(","):
            if not kv:
                continue
            g, sep, v = kv.partition("=")
            try:
                q = float(v)
            except ValueError:
                q = None
            if not sep or not g.strip() or q is None:
                raise ConfigError(f"--null-share entries look like GROUP=Q with Q in (0, 1], got '{kv}'")
            out[g.strip()] = q
    return out


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


@dataclass
class SuitabilityAuditSettings:
    """What a suitability audit perturbs, how it rewrites, and the inference settings."""

    # codes; None or empty: every one whose inputs are at hand
    perturbations: list[str] | None = option(
        None, metavar="CODE", help="EF PH IU IW CN ST SP LE LC SLC; stylized ones optionally @rule/@lm/@file/@rmbench, "
        "any @auditor (Reward Auditor's files) (default: every one whose inputs are at hand)")
    # a preference-set spec; None: the audit's own rating set
    data: str | dict[str, Any] | None = option(None, flag="--suitability-data",
                                               help="preference set for --suitability (default --data)")
    max_prompts: int | None = bounded(None, ge=1)  # seeded sample of `data`'s prompts (a command's --max-prompts)
    max_items: int | None = option(None, ge=1, help="keep the first N preference items (one chosen/rejected pair per "
                                              "prompt, in the data's order), after --max-prompts has sampled "
                                              "the prompts")
    base_level: int = option(0, choices=[0, 1, 2], ge=0, le=2, help="RM-Bench style level of the base pairs")
    n_permutations: int = option(10_000, ge=1, help="sign-flip permutations B")
    q: float = option(0.05, gt=0, lt=1, help="FDR level of the group-aware BH")
    eta: float = option(0.5, gt=0, lt=1, help="Storey threshold for each group's null share")
    # None: the panel rule for several models, else 0
    margin: float | None = option(None, ge=0, help="effect-size margin m >= 0 (default: panel rule max{d : p >= alpha} "
                                             "for several models, else 0)")
    # storey | fixed | equal (plain BH); None: fixed with null_share, else storey
    weighting: str | None = option(None, choices=["storey", "fixed", "equal"],
                                   help="null share of each group: storey (estimated; default), fixed (--null-share), "
                                        "equal (1: plain BH)")
    null_share: dict[str, float] | None = option(
        None, nargs="+", metavar="GROUP=Q", parse=parse_null_shares,
        gt=0, le=1, help="fixed null share per group in (0, 1], e.g. controlled=0.8 stylized=0.5 (groups not named: 1)")
    alpha: float = option(0.05, gt=0, lt=1, help="level of the panel rule and of the per-subset radar")
    metric: str = option("log_confidence", choices=["log_confidence", "confidence"],
                         help="M tested: log sigma(r_c - r_r) (Reward Auditor's code) or sigma(r_c - r_r)")
    robustness: bool = option(True, flag="--no-robustness", action="store_false",
                              help="skip the B.1 tests (normality, median, trimmed mean, Wilcoxon) and the B.3 "
                                   "structure")
    # both procedures' decisions are kept in suitability.json; this one is shown (rmeval.stats.confidence_drop)
    procedure: str = option("paper", choices=["paper", "released"],
                            help="whose decisions the report shows: paper (the group-aware BH of the paper's text; "
                                 "default) or released (Reward Auditor's released script: plain BH over every "
                                 "perturbation, an untestable one at p = 1); suitability.json holds both")
    judge_style: str = option("verdict", choices=["verdict", "explain"], needs=("--scorer", "generative_judge"),
                              help="generative judge: a one-letter verdict, or Reward Auditor's prompt (an "
                                   "explanation, then [[A]]/[[B]]/[[C]])")
    judge_explain_tokens: int = option(256, ge=1, needs=("--judge-style", "explain"),
                                       help="most tokens of the judge's explanation (--judge-style explain)")
    # CODE -> GROUP for codes outside the ten (suitability-stats)
    groups: dict[str, str] | None = option(None, nargs="+", metavar="CODE=GROUP", parse=parse_groups,
                                           help="groups of codes outside the ten (controlled / stylized or your own)")
    rewriter: str | None = option(None, help="model rewriter for stylized codes: hf:MODEL | openai:MODEL (with "
                                             "--base-url) | file:PATH")
    rewrite_file: str | None = option(None, help="jsonl {item_id, perturbation, side, text} (CODE@file)")
    rewrite_cache: str | None = option(None, help="rewrite cache (default OUT/rewrite_cache.sqlite)")
    base_url: str | None = option(None, help="OpenAI-compatible endpoint base URL")
    language: str = option("Chinese", help="target language of LC and SLC")

    def inference(self, seed: int) -> SuitabilitySettings:
        # scipy, pandas: --help stays cheap
        from rmeval.suitability.run import SuitabilitySettings

        s = SuitabilitySettings(n_permutations=self.n_permutations, seed=seed, q=self.q, eta=self.eta,
                                margin=self.margin, weighting=self.weighting, null_share=self.null_share,
                                alpha=self.alpha, metric=self.metric, robustness=self.robustness,
                                procedure=self.procedure)
        s.validate()
        self.validate()
        return s

    def validate(self) -> None:
        """Every setting outside the inference's in range (one-line ConfigErrors)."""
        # torch: --help stays cheap
        from rmeval.scoring.pairwise_judge import STYLES

        for name, lo in (("max_items", 1), ("max_prompts", 1), ("judge_explain_tokens", 1)):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
                raise ConfigError(f"{name} must be a whole number >= {lo}, got {v!r}")
        if self.base_level not in (0, 1, 2) or isinstance(self.base_level, bool):
            raise ConfigError(f"base_level must be an RM-Bench style level 0, 1 or 2, got {self.base_level!r}")
        if self.judge_style not in STYLES:
            raise ConfigError(f"judge_style must be one of {', '.join(STYLES)}, got '{self.judge_style}'")
        # pandas: --help stays cheap
        from rmeval.perturbations.suite import GROUPS

        known = set(GROUPS.values()) | set((self.groups or {}).values())
        unknown = sorted(set(self.null_share or {}) - known)
        if unknown:
            raise ConfigError(f"--null-share names group(s) {unknown} that no perturbation belongs to; groups: "
                              f"{', '.join(sorted(known))}")

    def specs(self, rating_set: RatingSet) -> list[str]:
        # pandas: --help stays cheap
        from rmeval.perturbations.suite import default_specs

        if self.perturbations:
            return [c for part in self.perturbations for c in part.split(",") if c]
        return default_specs(rating_set, with_lm=bool(self.rewriter))

    def rewriters(self, out: str | os.PathLike, seed: int) -> dict[str, Any]:
        rewriters: dict[str, Any] = {}
        if self.rewriter:
            cache = Path(self.rewrite_cache) if self.rewrite_cache else Path(out) / "rewrite_cache.sqlite"
            rewriters["lm"] = make_rewriter(self.rewriter, seed=seed, language=self.language, base_url=self.base_url,
                                            cache_path=cache)
        if self.rewrite_file:
            rewriters["file"] = make_rewriter(f"file:{self.rewrite_file}")
        return rewriters

    def rating_set(self, default: RatingSet, seed: int) -> RatingSet:
        """The preference set perturbed: ``data`` (sampled like the audit's), else ``default``."""
        # scipy, pandas: --help stays cheap
        from rmcore.data.loading import load_data

        return load_data(self.data, self.max_prompts, seed) if self.data else default
