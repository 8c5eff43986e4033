"""``rmeval suitability`` (checkpoints under perturbations: inference and risk report) and
``rmeval suitability-stats`` (the inference alone on precomputed confidences); the library is
rmeval.suitability.checkpoints, the settings ``rmeval.suitability.settings.SuitabilityAuditSettings``
(``rmeval audit --suitability`` holds the same, through ``AuditSettings``)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path

from rmcore.errors import ConfigError
from rmcore.settings import nested, option
from rmeval.audit.pipeline import AuditSettings
from rmeval.cli.flags import ScoringCommand, WandbFlags, add_command, dest
from rmeval.scoring import ScorerSettings
from rmeval.suitability.settings import INFERENCE, SuitabilityAuditSettings, parse_null_shares

# The flags these commands share with rmeval audit (its AuditSettings'): the seed, the rated attribute
# and the score cache are read; the resamples and --no-progress are accepted and unused (no bootstrap
# here), so a command line written for rmeval audit runs here too.
SHARED_WITH_AUDIT = ("attribute", "stats.n_boot", "stats.n_boot_regression", "stats.seed")
MODEL_FLAGS = tuple(f.name for f in dataclasses.fields(SuitabilityAuditSettings) if f.name not in ("data", "groups"))


@dataclass
class SuitabilityCommand(ScoringCommand):
    """``rmeval suitability``'s settings: the checkpoints, data and scorer (``ScoringCommand``), the
    suitability audit's perturbations, rewriting and inference, and the flags shared with rmeval audit."""

    suitability: SuitabilityAuditSettings = nested(SuitabilityAuditSettings, only=MODEL_FLAGS)
    common: AuditSettings = nested(AuditSettings, only=(*SHARED_WITH_AUDIT, "cache", "progress"))

    def __post_init__(self) -> None:
        self.suitability.max_prompts = self.max_prompts  # --max-prompts samples the perturbed prompts


@dataclass
class SuitabilityStatsCommand:
    """``rmeval suitability-stats``'s settings: the pairs table and the inference's settings."""

    pairs: str = option("", required=True, help="jsonl/csv/parquet rows item_id, perturbation, m_original, "
                                                "m_perturbed [, model, changed]")
    out: str = option("", required=True, help="output directory")
    suitability: SuitabilityAuditSettings = nested(SuitabilityAuditSettings, only=(*INFERENCE, "groups"))
    common: AuditSettings = nested(AuditSettings, only=SHARED_WITH_AUDIT)
    wandb: WandbFlags = nested(WandbFlags)


def check_model_flags(scorer: ScorerSettings, max_prompts: int | None) -> None:
    """The scorer's numeric flags in range (one-line errors, before any model loads)."""
    for flag, v in (("max_prompts", max_prompts), ("batch_size", scorer.batch_size),
                    ("max_length", scorer.max_length), ("max_tokens", scorer.max_tokens)):
        if v is not None and v < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be >= 1, got {v}")
    beta = scorer.beta
    if beta is not None and not (math.isfinite(beta) and beta > 0):
        raise ConfigError(f"--beta must be a finite number > 0, got {beta}")


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "suitability", SuitabilityCommand, run,
                help="confidence drop under perturbations: inference and risk report")
    add_command(sub, "suitability-stats", SuitabilityStatsCommand, run_stats,
                help="suitability inference on precomputed confidences")


def run(s: SuitabilityCommand) -> int:
    from rmcore.checkpoints import find_checkpoints
    from rmcore.data.registry import load_data
    from rmeval.scoring.loaders import known_hub_ids
    from rmeval.suitability.checkpoints import audit_checkpoints, suitability_line

    seed = s.common.stats.seed
    check_model_flags(s.scorer, s.max_prompts)
    s.suitability.inference(seed)  # validates every setting now: bad flags fail before anything loads
    checkpoints = find_checkpoints(s.checkpoint, known=known_hub_ids())
    if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        raise ConfigError("rmeval suitability scores in one process; run it without accelerate launch (rmeval audit "
                          "and rmeval pairwise share their scoring among processes)")
    rating_set = load_data(s.data, s.max_prompts, seed)
    s.scorer.placement.validate()
    results, joint = audit_checkpoints(checkpoints, rating_set, s.scorer, s.suitability, s.out, seed=seed,
                                       attribute=s.common.attribute, data=s.data, cache=s.common.cache,
                                       **s.wandb.target())
    for name, res in results.items():
        print(suitability_line(name, res, dest(s.out, name, joint is None)))
    if joint is not None:
        print(f"suitability of {len(results)} checkpoints -> {joint['markdown']}")
    return 0


def run_stats(s: SuitabilityStatsCommand) -> int:
    from rmeval.suitability.checkpoints import suitability_from_pairs

    settings = s.suitability.inference(s.common.stats.seed)
    results, paths = suitability_from_pairs(s.pairs, settings, Path(s.out), groups=s.suitability.groups,
                                            **s.wandb.target())
    n_codes = len({code for r in results.values() for code in r["perturbations"]})
    print(f"suitability of {len(results)} model(s), {n_codes} perturbations -> {paths['markdown']}")
    return 0


# -- the --suitability flags of rmeval audit, until its settings declare them ---------------------------

def add_inference_flags(p: argparse.ArgumentParser, *, model: bool = True) -> None:
    p.add_argument("--n-permutations", type=int, default=10_000, help="sign-flip permutations B")
    p.add_argument("--q", type=float, default=0.05, help="FDR level of the group-aware BH")
    p.add_argument("--eta", type=float, default=0.5, help="Storey threshold for each group's null share")
    p.add_argument("--margin", type=float, default=None,
                   help="effect-size margin m >= 0 (default: panel rule max{d : p >= alpha} for several "
                        "models, else 0)")
    p.add_argument("--alpha", type=float, default=0.05, help="level of the panel rule and of the per-subset radar")
    p.add_argument("--weighting", default=None, choices=["storey", "fixed", "equal"],
                   help="null share of each group: storey (estimated; default), fixed (--null-share), "
                        "equal (1: plain BH)")
    p.add_argument("--null-share", nargs="+", default=None, metavar="GROUP=Q",
                   help="fixed null share per group in (0, 1], e.g. controlled=0.8 stylized=0.5 "
                        "(groups not named: 1)")
    p.add_argument("--metric", default="log_confidence", choices=["log_confidence", "confidence"],
                   help="M tested: log sigma(r_c - r_r) (Reward Auditor's code) or sigma(r_c - r_r)")
    p.add_argument("--no-robustness", action="store_true",
                   help="skip the B.1 tests (normality, median, trimmed mean, Wilcoxon) and the B.3 structure")
    if not model:
        return
    p.add_argument("--judge-style", default="verdict", choices=["verdict", "explain"],
                   help="generative judge: a one-letter verdict, or Reward Auditor's prompt (an explanation, "
                        "then [[A]]/[[B]]/[[C]])")
    p.add_argument("--judge-explain-tokens", type=int, default=256,
                   help="most tokens of the judge's explanation (--judge-style explain)")
    p.add_argument("--rewriter", default=None, help="model rewriter for stylized codes: hf:MODEL | openai:MODEL "
                   "(with --base-url) | file:PATH")
    p.add_argument("--rewrite-file", default=None, help="jsonl {item_id, perturbation, side, text} (CODE@file)")
    p.add_argument("--rewrite-cache", default=None, help="rewrite cache (default OUT/rewrite_cache.sqlite)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint base URL")
    p.add_argument("--language", default="Chinese", help="target language of LC and SLC")
    p.add_argument("--max-items", type=int, default=None, help="first N preference items")
    p.add_argument("--base-level", type=int, default=0, choices=[0, 1, 2], help="RM-Bench style level of the base pairs")


def add_audit_suitability(a: argparse.ArgumentParser) -> None:
    a.add_argument("--suitability", nargs="*", default=None, metavar="CODE",
                   help="also run the suitability audit (no codes: every perturbation at hand)")
    a.add_argument("--suitability-data", default=None, help="preference set for --suitability (default --data)")
    add_inference_flags(a)


def _check_model_args(args: argparse.Namespace) -> None:
    """The scorer's numeric flags in range (one-line errors, before any model loads)."""
    for flag in ("max_prompts", "batch_size", "max_length", "max_tokens"):
        v = getattr(args, flag, None)
        if v is not None and v < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be >= 1, got {v}")
    beta = getattr(args, "beta", None)
    if beta is not None and not (math.isfinite(beta) and beta > 0):
        raise ConfigError(f"--beta must be a finite number > 0, got {beta}")


def suitability_settings(args: argparse.Namespace, perturbations: list[str] | None) -> SuitabilityAuditSettings:
    """The flags of ``add_inference_flags`` (and ``--suitability-data``) as settings, validated."""
    model = {}
    if hasattr(args, "rewriter"):
        _check_model_args(args)
        model = {"data": getattr(args, "suitability_data", None), "max_prompts": args.max_prompts,
                 "max_items": args.max_items, "base_level": args.base_level, "rewriter": args.rewriter,
                 "rewrite_file": args.rewrite_file, "rewrite_cache": args.rewrite_cache, "base_url": args.base_url,
                 "language": args.language, "judge_style": args.judge_style,
                 "judge_explain_tokens": args.judge_explain_tokens}
    if hasattr(args, "groups"):
        from rmeval.suitability import parse_groups

        model["groups"] = parse_groups(args.groups)
    settings = SuitabilityAuditSettings(perturbations=perturbations, n_permutations=args.n_permutations, q=args.q,
                                        eta=args.eta, margin=args.margin, weighting=args.weighting,
                                        null_share=parse_null_shares(args.null_share), alpha=args.alpha,
                                        metric=args.metric, robustness=not args.no_robustness, **model)
    settings.inference(args.seed)  # validates every setting now, before data or models load
    return settings
