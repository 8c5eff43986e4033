"""``rmeval suitability`` (checkpoints under perturbations: inference and risk report),
``rmeval suitability-stats`` (the inference alone on precomputed confidences), and the
``--suitability`` flags of ``rmeval audit``; the library is rmeval.suitability.checkpoints."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from rmcore.errors import ConfigError
from rmeval.cli.flags import add_common, add_model, dest, scorer_settings, wandb_target
from rmeval.suitability.settings import SuitabilityAuditSettings, parse_null_shares


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


def check_model_flags(args: argparse.Namespace) -> None:
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
        check_model_flags(args)
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


def add_parser(sub: argparse._SubParsersAction) -> None:
    su = sub.add_parser("suitability", help="confidence drop under perturbations: inference and risk report")
    add_model(su)
    add_common(su)
    su.add_argument("--perturbations", nargs="+", default=None, metavar="CODE",
                    help="EF PH IU IW CN ST SP LE LC SLC; stylized ones optionally @rule/@lm/@file/@rmbench, any "
                         "@auditor (Reward Auditor's files) (default: every one whose inputs are at hand)")
    add_inference_flags(su)
    su.set_defaults(func=run)
    ss = sub.add_parser("suitability-stats", help="suitability inference on precomputed confidences")
    ss.add_argument("--pairs", required=True, help="jsonl/csv/parquet rows item_id, perturbation, m_original, "
                    "m_perturbed [, model, changed]")
    ss.add_argument("--groups", nargs="+", default=None, metavar="CODE=GROUP",
                    help="groups of codes outside the ten (controlled / stylized or your own)")
    add_common(ss)
    add_inference_flags(ss, model=False)
    ss.set_defaults(func=run_stats)


def run(args: argparse.Namespace) -> int:
    from rmcore.checkpoints import find_checkpoints
    from rmcore.data.registry import load_data
    from rmeval.scoring.loaders import known_hub_ids
    from rmeval.suitability.checkpoints import audit_checkpoints, suitability_line

    settings = suitability_settings(args, args.perturbations)  # bad flags fail before anything loads
    checkpoints = find_checkpoints(args.checkpoint, known=known_hub_ids())
    if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        raise ConfigError("rmeval suitability scores in one process; run it without accelerate launch (rmeval audit "
                          "and rmeval pairwise share their scoring among processes)")
    rating_set = load_data(args.data, args.max_prompts, args.seed)
    results, joint = audit_checkpoints(checkpoints, rating_set, scorer_settings(args), settings, args.out, seed=args.seed,
                                       attribute=args.attribute, data=args.data, cache=args.cache,
                                       **wandb_target(args))
    for name, res in results.items():
        print(suitability_line(name, res, dest(args.out, name, joint is None)))
    if joint is not None:
        print(f"suitability of {len(results)} checkpoints -> {joint['markdown']}")
    return 0


def run_stats(args: argparse.Namespace) -> int:
    from rmeval.suitability import parse_groups
    from rmeval.suitability.checkpoints import suitability_from_pairs

    settings = suitability_settings(args, None).inference(args.seed)
    results, paths = suitability_from_pairs(args.pairs, settings, Path(args.out), groups=parse_groups(args.groups),
                                            **wandb_target(args))
    n_codes = len({code for r in results.values() for code in r["perturbations"]})
    print(f"suitability of {len(results)} model(s), {n_codes} perturbations -> {paths['markdown']}")
    return 0
