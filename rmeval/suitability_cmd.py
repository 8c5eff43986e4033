"""``rmeval suitability`` and ``rmeval suitability-stats``, and the ``--suitability`` part of ``rmeval
audit``: argument parsing and thin command functions over ``rmeval.suitability`` (kept apart from
``rmeval.cli`` so each command family stays in its own file)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmcore.checkpoints import find_checkpoints, provenance
from rmeval.cli import _tracker, load_data, make_cli_scorer


def suitability_settings(args: argparse.Namespace):
    from rmeval.suitability import SuitabilitySettings

    s = SuitabilitySettings(n_permutations=args.n_permutations, seed=args.seed, q=args.q, eta=args.eta,
                            margin=args.margin, weighting=args.weighting)
    s.validate()
    return s


def suitability_rewriters(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from rmeval.perturbations.rewriters import make_rewriter

    rewriters: dict[str, Any] = {}
    cache = Path(args.rewrite_cache) if args.rewrite_cache else out / "rewrite_cache.sqlite"
    if args.rewriter:
        rewriters["lm"] = make_rewriter(args.rewriter, seed=args.seed, language=args.language,
                                        base_url=args.base_url, cache_path=cache)
    if args.rewrite_file:
        rewriters["file"] = make_rewriter(f"file:{args.rewrite_file}")
    return rewriters


def suitability_specs(args: argparse.Namespace, rating_set, requested: list[str] | None) -> list[str]:
    from rmeval.perturbations.suite import default_specs

    if requested:
        return [c for part in requested for c in part.split(",") if c]
    return default_specs(rating_set, with_lm=bool(args.rewriter))


def _suitability_one(args: argparse.Namespace, scorer, rating_set, specs: list[str], dest: Path,
                     rewriters: dict[str, Any], checkpoint: Path | str) -> dict[str, Any]:
    from rmeval.suitability import run_suitability

    res = run_suitability(scorer, rating_set, specs, settings=suitability_settings(args), rewriters=rewriters,
                          cache_path=Path(args.cache) if args.cache else dest / "score_cache.sqlite",
                          pairs_path=dest / "suitability_pairs.parquet", max_items=args.max_items,
                          base_level=args.base_level, attribute=args.attribute or "helpfulness")
    res["meta"].update({"checkpoint": str(checkpoint), "data": getattr(args, "suitability_data", None) or args.data,
                        **provenance(checkpoint)})
    return res


def _print_suitability(name: str, res: dict[str, Any], dest: Path) -> None:
    parts = [f"{s} d={r['cohens_d']:.2f}{r['stars']}{' UNSUITABLE' if r['unsuitable'] else ''}"
             for s, r in res["perturbations"].items()]
    print(f"{name}: suitability on {res['meta'].get('n_items')} items: " + "; ".join(parts) + f" -> {dest}")


def audit_suitability(args: argparse.Namespace, scorer, rating_set, out: Path, checkpoint: Path | str):
    """The suitability part of ``rmeval audit`` (``--suitability``): written beside the audit,
    returned as (results, paths) for the audit's W&B run."""
    from rmeval.suitability import finalize, write_suitability

    rs = load_data(args.suitability_data, args.max_prompts, args.seed) if args.suitability_data else rating_set
    specs = suitability_specs(args, rs, args.suitability)
    res = _suitability_one(args, scorer, rs, specs, out, suitability_rewriters(args, out), checkpoint)
    results = {Path(str(checkpoint)).name: res}
    finalize(results, suitability_settings(args))
    paths = write_suitability(results, out, title=f"Suitability of {Path(str(checkpoint)).name}")
    _print_suitability(Path(str(checkpoint)).name, res, out)
    return results, paths


def cmd_suitability(args: argparse.Namespace) -> int:
    from rmeval.suitability import finalize, log_suitability, write_suitability

    out = Path(args.out)
    checkpoints = find_checkpoints(args.checkpoint)
    rating_set = load_data(args.data, args.max_prompts, args.seed)
    specs = suitability_specs(args, rating_set, args.perturbations)
    settings = suitability_settings(args)
    rewriters = suitability_rewriters(args, out)
    single = len(checkpoints) == 1
    results: dict[str, dict[str, Any]] = {}
    for name, ckpt in checkpoints:
        dest = out if single else out / name
        scorer = make_cli_scorer(args, ckpt)
        try:
            results[name] = _suitability_one(args, scorer, rating_set, specs, dest, rewriters, ckpt)
        finally:
            scorer.close()
    finalize(results, settings)  # margins need every model (the panel rule)
    for name, ckpt in checkpoints:
        dest = out if single else out / name
        paths = write_suitability({name: results[name]}, dest, title=f"Suitability of {name}")
        tracker = _tracker(args, f"suitability-{name}", dest, {"checkpoint": str(ckpt), "data": args.data,
                                                               "perturbations": specs,
                                                               **results[name]["settings"]}, ckpt)
        try:
            log_suitability(tracker, {name: results[name]}, paths)
        finally:
            tracker.finish()
        _print_suitability(name, results[name], dest)
    if not single:
        paths = write_suitability(results, out, title=f"Suitability of {len(results)} checkpoints")
        print(f"suitability of {len(results)} checkpoints -> {paths['markdown']}")
    return 0


def cmd_suitability_stats(args: argparse.Namespace) -> int:
    from rmeval.suitability import (
        finalize,
        infer,
        log_suitability,
        parse_groups,
        read_pairs,
        write_suitability,
    )

    groups = parse_groups(args.groups)
    pairs = read_pairs(args.pairs, groups)
    settings = suitability_settings(args)
    if "model" in pairs.columns:
        results = {str(m): infer(g.drop(columns="model"), settings, groups=groups)
                   for m, g in pairs.groupby("model", sort=False)}
    else:
        results = {Path(args.pairs).stem: infer(pairs, settings, groups=groups)}
    for r in results.values():
        r["meta"] = {"pairs": str(args.pairs)}
    finalize(results, settings)
    out = Path(args.out)
    paths = write_suitability(results, out, title=f"Suitability from {Path(args.pairs).name}")
    tracker = _tracker(args, f"suitability-stats-{Path(args.pairs).stem}", out,
                       {"pairs": str(args.pairs), **next(iter(results.values()))["settings"]})
    try:
        log_suitability(tracker, results, paths)
    finally:
        tracker.finish()
    print(f"suitability of {len(results)} model(s), {pairs['perturbation'].nunique()} perturbations -> "
          f"{paths['markdown']}")
    return 0



# -- argument parsing ----------------------------------------------------------------------------

def suitability_args(p: argparse.ArgumentParser, *, model: bool = True) -> None:
    p.add_argument("--n-permutations", type=int, default=10_000, help="sign-flip permutations B")
    p.add_argument("--q", type=float, default=0.05, help="FDR level of the group-aware BH")
    p.add_argument("--eta", type=float, default=0.5, help="Storey threshold for each group's null share")
    p.add_argument("--margin", type=float, default=None,
                   help="effect-size margin m (default: panel rule for several models, else 0)")
    p.add_argument("--weighting", default="storey", choices=["storey", "equal"], help="equal: plain BH")
    if not model:
        return
    p.add_argument("--rewriter", default=None, help="model rewriter for stylized codes: hf:MODEL | openai:MODEL "
                   "(with --base-url) | file:PATH")
    p.add_argument("--rewrite-file", default=None, help="jsonl {item_id, perturbation, side, text} (CODE@file)")
    p.add_argument("--rewrite-cache", default=None, help="rewrite cache (default OUT/rewrite_cache.sqlite)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint base URL")
    p.add_argument("--language", default="Chinese", help="target language of LC and SLC")
    p.add_argument("--max-items", type=int, default=None, help="first N preference items")
    p.add_argument("--base-level", type=int, default=0, help="RM-Bench style level of the base pairs")


def add_audit_suitability_args(a: argparse.ArgumentParser) -> None:
    a.add_argument("--suitability", nargs="*", default=None, metavar="CODE",
                   help="also run the suitability audit (no codes: every perturbation at hand)")
    a.add_argument("--suitability-data", default=None, help="preference set for --suitability (default --data)")
    suitability_args(a)


def add_suitability_parsers(sub: Any, model_args: Callable[[argparse.ArgumentParser], None],
                            common: Callable[[argparse.ArgumentParser], None]) -> None:
    su = sub.add_parser("suitability", help="confidence drop under perturbations: inference and risk report")
    model_args(su)
    common(su)
    su.add_argument("--perturbations", nargs="+", default=None, metavar="CODE",
                    help="EF PH IU IW CN ST SP LE LC SLC, stylized ones optionally @rule/@lm/@file/@rmbench "
                         "(default: every one whose inputs are at hand)")
    suitability_args(su)
    su.set_defaults(func=cmd_suitability)
    ss = sub.add_parser("suitability-stats", help="suitability inference on precomputed confidences")
    ss.add_argument("--pairs", required=True, help="jsonl/csv/parquet rows item_id, perturbation, m_original, "
                    "m_perturbed [, model, changed]")
    ss.add_argument("--groups", nargs="+", default=None, metavar="CODE=GROUP",
                    help="groups of codes outside the ten (controlled / stylized or your own)")
    common(ss)
    suitability_args(ss, model=False)
    ss.set_defaults(func=cmd_suitability_stats)
