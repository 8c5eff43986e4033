"""``rmeval`` console script: score + audit checkpoints, recompute an audit from tables, and
pairwise accuracy on preference sets. Thin: every step is a library call.

    rmeval audit --checkpoint DIR --data SPEC --out OUT [--conditions original generic ...]
                 [--related-file F] [--paraphrase-file F] [--max-prompts N] [--batch-size 32]
                 [--max-length 2048] [--n-boot 2000] [--wandb-mode offline|online|disabled] [--seed 0]
    rmeval stats --scores FILE --ratings FILE --out OUT [--preferences FILE]
    rmeval pairwise --checkpoint DIR --data SPEC --out OUT [--ties half|wrong]
    rmeval judges elicit|analyze|reweight ...   (LLM-judge profiling; see rmeval.judges.cli)
    rmeval human --data SPEC --out OUT [--annotations FILE --raters-per-rating 3] [--reliability NAME=R ...]
    rmeval suitability --checkpoint DIR --data SPEC --out OUT [--perturbations EF PH ... SP@rmbench]
                       [--rewriter hf:MODEL|openai:MODEL|file:PATH] [--n-permutations 10000] [--q 0.05]
                       [--eta 0.5] [--margin M]
    rmeval suitability-stats --pairs FILE --out OUT [--groups CODE=GROUP ...]

SPEC: a JSON/YAML data-spec file, a JSON string, or a short form ``simulated``,
``simulated:n_prompts=100,seed=3``, ``rm_bench:/path/chat_filtered.json``, ``helpsteer2:validation``
(after the colon: ``key=value`` pairs, and at most one bare value -- a split name for the
HelpSteer sets when it has no path characters, otherwise a path).
If DIR holds several checkpoints (subdirectories with config.json: checkpoint-*/, arm dirs), each is
audited into OUT/<name>/ and a comparison is written to OUT/summary.md and OUT/summary.json.
Every path given is checked first: a missing, empty or wrong-kind path is a one-line error. A
--checkpoint that is not a local path and looks like a Hub id (owner/name) is loaded from the Hub.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from rmcore.checkpoints import display_name, find_checkpoints, provenance
from rmcore.errors import ConfigError, DataError

log = logging.getLogger("rmeval")

SPLITS = ("train", "validation", "test")


# -- data specs ----------------------------------------------------------------------------------

def _value(text: str) -> Any:
    import yaml

    v = yaml.safe_load(text)
    return text if v is None or isinstance(v, (dict, list)) else v


def parse_data_spec(spec: str) -> dict[str, Any]:
    """SPEC string -> loader spec dict (see module doc)."""
    path = Path(spec)
    if path.suffix in (".json", ".yaml", ".yml") and path.is_file() and ":" not in spec.split("/")[0]:
        import yaml

        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(loaded, dict) or "name" not in loaded:
            raise ConfigError(f"{path}: a data-spec file must be a mapping with a 'name' "
                              "(for a raw data file use NAME:PATH, e.g. rm_bench:{path})")
        return loaded
    if spec.lstrip().startswith("{"):
        try:
            loaded = json.loads(spec)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--data: invalid JSON ({e.msg})") from None
        if "name" not in loaded:
            raise ConfigError("--data: a JSON spec needs a 'name'")
        return loaded
    name, _, rest = spec.partition(":")
    out: dict[str, Any] = {"name": name}
    if rest:
        for part in rest.split(","):
            if "=" in part and not Path(part).exists():
                k, _, v = part.partition("=")
                out[k.strip()] = _value(v.strip())
            elif part:
                is_split = part in SPLITS and name in ("helpsteer", "helpsteer2", "hh_rlhf", "shp")
                out["split" if is_split else "path"] = part
    return out


def load_data(spec: str, max_prompts: int | None = None, seed: int = 0):
    """Rating set for SPEC; with ``max_prompts`` a seeded sample of prompts (input order kept)."""
    import numpy as np

    from rmcore.data.registry import load_rating_set

    rs = load_rating_set(parse_data_spec(spec))
    if max_prompts is not None and len(rs) > max_prompts:
        keep = np.sort(np.random.default_rng(seed).choice(len(rs), size=max_prompts, replace=False))
        rs = rs.subset([rs.prompts[i].prompt_id for i in keep])
    return rs


def preferences_table(rating_set) -> pd.DataFrame | None:
    """Released preference labels as the audit's preferences table (None when there are none)."""
    if not rating_set.preferences:
        return None
    meta = {p.prompt_id: p.meta for p in rating_set.prompts}
    rows = []
    for q in rating_set.preferences:
        m = q.meta_dict()
        rows.append({"prompt_id": q.prompt_id, "chosen_id": q.chosen_id, "rejected_id": q.rejected_id,
                     "strength": q.strength, "subset": q.subset or meta.get(q.prompt_id, {}).get("subset"),
                     "section": meta.get(q.prompt_id, {}).get("section"),
                     "chosen_style": m.get("chosen_style"), "rejected_style": m.get("rejected_style")})
    df = pd.DataFrame(rows)
    return df.dropna(axis=1, how="all")


# -- checkpoints ---------------------------------------------------------------------------------

def make_cli_scorer(args: argparse.Namespace, checkpoint: Path | str):
    from rmeval.scoring import make_scorer

    # every scorer gets every batching setting; max_length None is the model's own limit
    common = {"max_length": args.max_length, "batch_size": args.batch_size, "max_tokens": args.max_tokens}
    if args.scorer == "seq_classifier":
        return make_scorer("seq_classifier", model=checkpoint, **common)
    if args.scorer == "generative_judge":
        return make_scorer("generative_judge", model=checkpoint, **common)
    if args.scorer == "dpo_implicit":
        if not args.reference:
            raise ConfigError("--scorer dpo_implicit needs --reference (the DPO reference model)")
        from rmcore.io import check_path

        check_path(args.reference, "--reference", kind="dir", hub_ok=True)
        return make_scorer("dpo_implicit", policy=checkpoint, reference=args.reference, beta=args.beta, **common)
    raise ConfigError(f"unknown --scorer {args.scorer}")


def _tracker(args: argparse.Namespace, name: str, out: Path, config: dict[str, Any],
             checkpoint: Path | str | None = None):
    from rmcore.tracking import Tracker

    prov = provenance(checkpoint) if checkpoint is not None else {}
    tags = [f"{k}:{prov[k]}" for k in ("arm", "seed") if k in prov]
    return Tracker(project=args.wandb_project, name=name, config={**config, **prov}, mode=args.wandb_mode,
                   dir=out, job_type="audit", group=prov.get("group"), tags=tags)


# -- commands ------------------------------------------------------------------------------------

def resolve_conditions(args: argparse.Namespace) -> list[str]:
    """--conditions, checked against the registry (rmeval.conditions.CONDITIONS); by default every
    registered condition whose inputs are at hand."""
    from rmeval.conditions import CONDITIONS, NEEDS, check_condition_names

    given = {"related_file": args.related_file, "paraphrase_file": args.paraphrase_file}
    if args.conditions:
        conds = [c for part in args.conditions for c in part.split(",") if c]
        check_condition_names(conds)
        for c in conds:
            if c in NEEDS and not given.get(NEEDS[c]):
                raise ConfigError(f"condition '{c}' needs --{NEEDS[c].replace('_', '-')}")
        return conds
    return [c for c in CONDITIONS if c not in NEEDS or given.get(NEEDS[c])]


def audit_checkpoint(args: argparse.Namespace, name: str, checkpoint: Path, rating_set, conditions: list[str],
                     out: Path) -> dict[str, Any]:
    from rmcore.io import atomic_write_table
    from rmeval.callback import pick_attribute
    from rmeval.report import log_audit, write_report
    from rmeval.scoring_run import score_conditions, truncation_summary
    from rmeval.stats.audit import compute_audit

    scorer = make_cli_scorer(args, checkpoint)
    label = display_name(name, checkpoint)
    opts: dict[str, Any] = {"seed": args.seed, "n_donors": args.n_donors}
    if args.related_file:
        opts["related_file"] = args.related_file
    if args.paraphrase_file:
        opts["paraphrase_file"] = args.paraphrase_file
    if args.embedder:
        opts["embedder"] = args.embedder
    try:
        scores = score_conditions(scorer, rating_set, conditions, out_path=out / "scores.parquet",
                                  cache_path=Path(args.cache) if args.cache else out / "score_cache.sqlite",
                                  progress=not args.no_progress, label=label, **opts)
        ratings = rating_set.ratings_table(scorer.tokenizer)
        suitability = None
        if getattr(args, "suitability", None) is not None:
            from rmeval.suitability_cmd import audit_suitability

            suitability = audit_suitability(args, scorer, rating_set, out, checkpoint)
    finally:
        scorer.close()
    atomic_write_table(out / "ratings.parquet", ratings)
    prefs = preferences_table(rating_set)
    if prefs is not None:
        atomic_write_table(out / "preferences.parquet", prefs)
    attribute = pick_attribute(rating_set, args.attribute)
    audit = compute_audit(scores, ratings, preferences=prefs, attribute=attribute, n_boot=args.n_boot,
                          n_boot_regression=args.n_boot_regression, seed=args.seed,
                          human_reliability=_reliabilities(args.human_reliability))
    audit["truncation"] = truncation_summary(scores)
    judge_images: dict[str, Path] = {}
    if getattr(args, "judge_items", None):  # a judge checkpoint: its attribute profile joins the audit
        from rmeval.judges.audit_hook import profile_checkpoint

        audit["judge_profile"], judge_images = profile_checkpoint(
            checkpoint, args.judge_items, out / "judge_profile", attribute_names=args.judge_attributes.split(","),
            max_length=args.max_length, batch_size=args.batch_size, seed=args.seed)
    if "donor_exclusions" in scores.attrs:
        audit["donor_exclusions"] = scores.attrs["donor_exclusions"]
    # the run's seed goes in as run_seed: meta's seed is the audit's own (bootstrap, donors)
    prov = {("run_seed" if k == "seed" else k): v for k, v in provenance(checkpoint).items()}
    audit["meta"].update({"checkpoint": str(checkpoint), "data": args.data, "scorer": args.scorer, **prov})
    paths = write_report(audit, out, title=f"Audit of {label}")
    tracker = _tracker(args, f"audit-{name}", out, {"checkpoint": str(checkpoint), "data": args.data,
                                                    "conditions": conditions, "n_boot": args.n_boot}, checkpoint)
    try:
        log_audit(tracker, audit, paths)
        for key, path in judge_images.items():
            tracker.log_image(f"audit/judge_profile/{key}", path)
        if suitability is not None:
            from rmeval.suitability import log_suitability

            log_suitability(tracker, *suitability)
        tracker.summary({"checkpoint": str(checkpoint)})
    finally:
        tracker.finish()
    tr = audit["truncation"]["total"]
    print(f"{name}: {len(scores)} scores ({tr['prompt_truncated']} prompts, {tr['response_truncated']} responses "
          f"truncated) -> {out}")
    return audit


SUMMARY_KEYS = re.compile(r"(estimate|accuracy|margin)$|/(hard|normal|easy|average)/estimate$")


def write_summary(audits: dict[str, dict[str, Any]], out: Path) -> dict[str, Path]:
    """Comparison of checkpoints: every numeric figure to JSON; point estimates to a Markdown table."""
    from rmcore.io import atomic_write_json, atomic_write_text
    from rmcore.tracking import flatten

    flat = {name: {k: v for k, v in flatten(a).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            for name, a in audits.items()}
    keys: list[str] = []
    for f in flat.values():
        keys += [k for k in f if k not in keys and SUMMARY_KEYS.search(k) and not k.startswith("truncation")]
    names = list(audits)
    lines = ["# Checkpoint comparison", "", "| figure | " + " | ".join(names) + " |",
             "|---|" + "---|" * len(names)]
    for k in keys:
        cells = [f"{flat[n][k]:.3f}" if k in flat[n] else "—" for n in names]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return {"json": atomic_write_json(out / "summary.json", flat),
            "markdown": atomic_write_text(out / "summary.md", "\n".join(lines) + "\n")}


def cmd_audit(args: argparse.Namespace) -> int:
    from rmcore.io import check_path

    out = Path(args.out)
    checkpoints = find_checkpoints(args.checkpoint)
    for flag in ("related_file", "paraphrase_file"):
        if getattr(args, flag):
            check_path(getattr(args, flag), "--" + flag.replace("_", "-"))
    conditions = resolve_conditions(args)
    rating_set = load_data(args.data, args.max_prompts, args.seed)
    if not rating_set.attributes:
        # checked before any scoring: every audit figure is read against the human ratings
        raise ConfigError(f"--data {args.data}: no rated attribute (a preference set such as RM-Bench or HH-RLHF "
                          "carries labels, not ratings); rmeval audit needs a rating set. For preference sets use "
                          "rmeval pairwise or rmeval suitability")
    single = len(checkpoints) == 1
    audits = {}
    for name, ckpt in checkpoints:
        audits[name] = audit_checkpoint(args, name, ckpt, rating_set, conditions, out if single else out / name)
    if not single:
        paths = write_summary(audits, out)
        print(f"comparison of {len(audits)} checkpoints -> {paths['markdown']}")
    return 0


def _default_attribute(ratings: pd.DataFrame) -> str:
    """helpfulness if rated, else the first attribute column of the ratings table."""
    attrs = [c for c in ratings.columns if c not in ("prompt_id", "response_id", "single_turn", "response_length")]
    if not attrs:
        raise DataError(f"ratings table has no attribute column; it has columns {list(ratings.columns)}",
                        field="helpfulness")
    return "helpfulness" if "helpfulness" in attrs else attrs[0]


def cmd_stats(args: argparse.Namespace) -> int:
    from rmcore.io import read_table
    from rmeval.report import log_audit, write_report
    from rmeval.stats.audit import compute_audit
    from rmeval.tables import load_preferences, load_ratings, load_scores

    # Validated here, file by file, so an error names the file it is in.
    attribute = args.attribute or _default_attribute(read_table(args.ratings, "ratings table"))
    ratings = load_ratings(args.ratings, attribute=attribute)
    scores = load_scores(args.scores, ratings)
    pref_path = args.preferences
    beside = Path(args.scores).with_name("preferences.parquet")
    if pref_path is None and beside.is_file():
        # `rmeval audit` writes preferences.parquet beside scores.parquet: without it the
        # pairwise section would silently vanish from the recomputed audit
        pref_path = str(beside)
        print(f"using preferences {beside} (found beside the scores)", file=sys.stderr)
    prefs = load_preferences(pref_path) if pref_path else None
    pool = read_table(args.reference_scores, "reference scores") if args.reference_scores else None
    if pool is not None and not {"prompt_id", "score"} <= set(pool.columns):
        raise DataError(f"reference scores need columns prompt_id and score; the file has {list(pool.columns)}",
                        file=args.reference_scores)
    audit = compute_audit(scores, ratings, preferences=prefs, attribute=attribute, n_boot=args.n_boot,
                          n_boot_regression=args.n_boot_regression, seed=args.seed, reference_scores=pool,
                          human_reliability=_reliabilities(args.human_reliability))
    out = Path(args.out)
    paths = write_report(audit, out, title=f"Audit of {Path(args.scores).name}")
    tracker = _tracker(args, f"stats-{Path(args.scores).stem}", out, {"scores": args.scores, "ratings": args.ratings})
    try:
        log_audit(tracker, audit, paths)
    finally:
        tracker.finish()
    print(f"audit -> {paths['markdown']}")
    return 0


def _pairwise_markdown(name: str, res: dict[str, Any]) -> str:
    def fmt(r: dict[str, Any]) -> str:
        ci = r.get("ci95") or [float("nan")] * 2
        return f"{r['estimate']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"

    lines = [f"# Pairwise accuracy: {name}", "", f"Accuracy: {fmt(res['accuracy'])} "
             f"(ties count {'0.5' if res.get('ties', 'half') == 'half' else '0'}; {res.get('n_ties', 0)} tied pairs)", ""]
    if "rewardbench" in res:
        rb = res["rewardbench"]
        lines += ["## RewardBench sections (subsets weighted by RewardBench's example counts)", "",
                  "| section | accuracy |", "|---|---|"]
        lines += [f"| {k} | {fmt(v)} |" for k, v in rb["sections"].items()]
        lines += [f"| score (mean of sections) | {fmt(rb['score'])} |", ""]
    for key in ("by_section", "by_subset"):
        if key in res:
            lines += [f"## {key.replace('_', ' ')}", "", "| group | accuracy |", "|---|---|"]
            lines += [f"| {g} | {fmt(r)} |" for g, r in res[key].items()] + [""]
    if "rmbench" in res:
        rb = res["rmbench"]
        lines += ["## RM-Bench style matrix (rows: chosen style, columns: rejected style)", "",
                  "| chosen \\ rejected | concise | detailed | markdown |", "|---|---|---|---|"]
        for i, row in enumerate(rb["matrix"]):
            lines.append(f"| {['concise', 'detailed', 'markdown'][i]} | " +
                         " | ".join("—" if v is None else f"{v:.3f}" for v in row) + " |")
        lines += ["", " ".join(f"{k}: {fmt(rb[k])}" for k in ("hard", "normal", "easy", "average") if k in rb)]
    return "\n".join(lines) + "\n"


def cmd_pairwise(args: argparse.Namespace) -> int:
    import numpy as np

    from rmcore.io import atomic_write_json, atomic_write_table, atomic_write_text
    from rmcore.tracking import flatten
    from rmeval.scoring_run import score_conditions, truncation_summary
    from rmeval.stats.pairwise import pairwise_accuracy

    out = Path(args.out)
    checkpoints = find_checkpoints(args.checkpoint)
    rating_set = load_data(args.data, args.max_prompts, args.seed)
    prefs = preferences_table(rating_set)
    if prefs is None:
        raise DataError(f"{args.data}: the rating set has no preference labels")
    results = {}
    for name, ckpt in checkpoints:
        dest = out if len(checkpoints) == 1 else out / name
        scorer = make_cli_scorer(args, ckpt)
        label = display_name(name, ckpt)
        try:
            scores = score_conditions(scorer, rating_set, ["original"], out_path=dest / "scores.parquet",
                                      cache_path=Path(args.cache) if args.cache else dest / "score_cache.sqlite",
                                      progress=not args.no_progress, label=label)
        finally:
            scorer.close()
        res = pairwise_accuracy(prefs, scores[["prompt_id", "response_id", "score"]], n_boot=args.n_boot,
                                rng=np.random.default_rng(args.seed), ties=args.ties)
        res["truncation"] = truncation_summary(scores)["total"]
        atomic_write_table(dest / "preferences.parquet", prefs)
        atomic_write_json(dest / "pairwise.json", res)
        atomic_write_text(dest / "pairwise.md", _pairwise_markdown(label, res))
        tracker = _tracker(args, f"pairwise-{name}", dest, {"checkpoint": str(ckpt), "data": args.data}, ckpt)
        try:
            tracker.log({k: v for k, v in flatten(res, "pairwise").items() if isinstance(v, (int, float))})
        finally:
            tracker.finish()
        results[name] = res
        tr = res["truncation"]
        print(f"{label}: pairwise accuracy {res['accuracy']['estimate']:.3f} on {len(prefs)} pairs "
              f"({tr['prompt_truncated']} prompts, {tr['response_truncated']} responses truncated) -> {dest}")
    if len(checkpoints) > 1:
        atomic_write_json(out / "summary.json", {n: flatten(r) for n, r in results.items()})
    return 0


def _reliabilities(items: list[str] | None) -> dict[str, float]:
    """NAME=R (or a bare R) arguments -> {NAME: R}."""
    out: dict[str, float] = {}
    for item in items or []:
        label, _, value = item.rpartition("=")
        try:
            out[label or value] = float(value)
        except ValueError:
            raise ConfigError(f"a reliability must be NAME=R or R with R a number, got {item!r}") from None
    return out


def cmd_human(args: argparse.Namespace) -> int:
    """Every ratings-only statistic of SPEC (no model) -> OUT/human.json, OUT/human.md."""
    from rmeval.human import compute_human, human_table, write_human_report

    rs = load_data(args.data, args.max_prompts, args.seed)
    if not rs.attributes:
        raise ConfigError(f"--data {args.data}: no rated attribute (a preference set such as RM-Bench or HH-RLHF "
                          "carries labels, not ratings); rmeval human needs a rating set: helpsteer, helpsteer2, "
                          "shp, simulated or a generic file with rating columns")
    annotations = None
    if args.annotations:
        from rmcore.data.helpsteer_annotations import load_helpsteer2_annotations

        annotations, skipped = load_helpsteer2_annotations(args.annotations, rs)
        if annotations.empty:
            raise DataError(f"{args.annotations}: no annotation matches a response of {args.data} "
                            f"(skipped: {dict(skipped)})")
    borrowed = _reliabilities(args.reliability)
    attrs = [args.attribute] if args.attribute else None
    res = compute_human(human_table(rs), attributes=attrs, n_boot=args.n_boot, seed=args.seed,
                        annotations=annotations, raters_per_rating=args.raters_per_rating, reliabilities=borrowed,
                        main_attribute=args.attribute)
    res["meta"].update({"data": args.data, "rating_set": rs.name, "skipped": dict(rs.skipped)})
    if annotations is not None:
        res["meta"]["annotations"] = {"file": args.annotations, "n_ratings": int(len(annotations)),
                                      "skipped": dict(skipped)}
    paths = write_human_report(res, args.out, title=f"Human ratings: {rs.name}")
    main = res["meta"]["main_attribute"]
    r = res["attributes"][main]["share"]["all"]
    print(f"{rs.name}: {main} share {r['estimate']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}] on "
          f"{r['n_prompts']} prompts -> {paths['markdown']}")
    return 0


def cmd_variants(args: argparse.Namespace) -> int:
    """Paraphrases or related tasks for every prompt of SPEC, written as a FileGenerator jsonl."""
    from rmeval.generators import make_generator, write_variants

    rs = load_data(args.data, args.max_prompts, args.seed)
    kind, _, model = args.generator.partition(":")
    kwargs: dict[str, Any] = {"seed": args.seed}
    if kind in ("hf", "openai"):
        if not model:
            raise ConfigError(f"--generator {kind} needs a model: {kind}:MODEL")
        kwargs["model"] = model
        if kind == "openai" and args.base_url:
            kwargs["base_url"] = args.base_url
    elif kind == "file":
        raise ConfigError("--generator file reads variants; it cannot write them")
    gen = make_generator(kind, **kwargs)
    texts = gen.generate(rs.prompts, args.task, args.n)
    path = write_variants(texts, args.out)
    missing = sum(1 for p in rs.prompts if not texts.get(p.prompt_id))
    print(f"wrote {sum(len(v) for v in texts.values())} {args.task} texts for {len(rs.prompts) - missing} prompts "
          f"to {path} ({missing} prompts got none)")
    return 0


# -- argument parsing ----------------------------------------------------------------------------

def _common(p: argparse.ArgumentParser, audit: bool = True) -> None:
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples over prompts")
    if audit:  # pairwise accuracy reads no rating and fits no regression
        p.add_argument("--n-boot-regression", type=int, default=5000, help="resamples for the sibling regression")
        p.add_argument("--attribute", default=None, help="rated attribute (default helpfulness, else the first)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--wandb-mode", default=None, choices=["online", "offline", "disabled"],
                   help="default: online with an API key, else offline")
    p.add_argument("--wandb-project", default="matchrm")


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="checkpoint dir, dir of checkpoints, or Hub id")
    p.add_argument("--data", required=True, help="data SPEC (file, JSON, or name[:k=v,...])")
    p.add_argument("--scorer", default="seq_classifier", choices=["seq_classifier", "generative_judge", "dpo_implicit"])
    p.add_argument("--reference", default=None, help="DPO reference model (dpo_implicit)")
    p.add_argument("--beta", type=float, default=0.1, help="DPO beta (dpo_implicit)")
    p.add_argument("--max-prompts", type=int, default=None, help="seeded sample of this many prompts")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=None,
                   help="tokens per text (default and ceiling: the model's own limit)")
    p.add_argument("--max-tokens", type=int, default=None, help="cap on padded tokens per batch")
    p.add_argument("--cache", default=None, help="score cache file (default OUT/score_cache.sqlite)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (they go to stderr, "
                   "and only when it is a terminal)")


def build_parser() -> argparse.ArgumentParser:
    from rmeval.suitability_cmd import add_audit_suitability_args, add_suitability_parsers

    parser = argparse.ArgumentParser(prog="rmeval", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("audit", help="score a checkpoint under prompt conditions and audit it")
    _model_args(a)
    _common(a)
    a.add_argument("--conditions", nargs="+", default=None, help="default: all with their inputs at hand")
    a.add_argument("--related-file", default=None, help="jsonl {prompt_id, variant, text} of related tasks")
    a.add_argument("--paraphrase-file", default=None, help="jsonl {prompt_id, variant, text} of paraphrases")
    a.add_argument("--n-donors", type=int, default=4, help="donor prompts per transplant condition")
    a.add_argument("--embedder", default=None, help="sentence encoder for the embedding condition")
    a.add_argument("--judge-items", default=None,
                   help="items table: also profile the checkpoint as a pairwise judge (rmeval judges)")
    a.add_argument("--judge-attributes", default="core", help="attributes for --judge-items (comma-separated)")
    a.add_argument("--human-reliability", nargs="+", default=None,
                   help="rater reliabilities NAME=R for the reliability-corrected human share")
    add_audit_suitability_args(a)
    a.set_defaults(func=cmd_audit)
    s = sub.add_parser("stats", help="audit an existing scores table")
    s.add_argument("--scores", required=True)
    s.add_argument("--ratings", required=True)
    s.add_argument("--preferences", default=None)
    s.add_argument("--reference-scores", default=None,
                   help="table (prompt_id, score) of independent reference responses, for pool centring")
    s.add_argument("--human-reliability", nargs="+", default=None,
                   help="rater reliabilities NAME=R for the reliability-corrected human share")
    _common(s)
    s.set_defaults(func=cmd_stats)
    pw = sub.add_parser("pairwise", help="accuracy on a preference set (RM-Bench matrix, HH-RLHF)")
    _model_args(pw)
    _common(pw, audit=False)
    pw.add_argument("--ties", default="half", choices=["half", "wrong"],
                    help="a tied pair counts 0.5 (half) or 0 (wrong: RM-Bench's and RewardBench's rule)")
    pw.set_defaults(func=cmd_pairwise)
    h = sub.add_parser("human", help="ratings-only statistics of a rating set (no model)")
    h.add_argument("--data", required=True, help="data SPEC")
    h.add_argument("--out", required=True, help="output directory")
    h.add_argument("--attribute", default=None, help="only this attribute (default: all; helpfulness is the main one)")
    h.add_argument("--annotations", default=None,
                   help="per-annotator ratings (HelpSteer2 disagreements.jsonl.gz, or 'hub') for reliabilities")
    h.add_argument("--raters-per-rating", type=float, default=1.0,
                   help="raters the data's ratings average (1 HelpSteer, 3 HelpSteer2's released label)")
    h.add_argument("--reliability", nargs="+", default=None, help="borrowed reliabilities NAME=R for the corrected share")
    h.add_argument("--max-prompts", type=int, default=None, help="seeded sample of this many prompts")
    h.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples over prompts")
    h.add_argument("--seed", type=int, default=0)
    h.set_defaults(func=cmd_human)
    add_suitability_parsers(sub, _model_args, _common)
    v = sub.add_parser("variants", help="generate paraphrases or related tasks into a jsonl file")
    v.add_argument("--data", required=True, help="data SPEC")
    v.add_argument("--task", required=True, choices=["paraphrase", "related"])
    v.add_argument("--generator", default="simulated",
                   help="simulated | hf:MODEL (local path or Hub id) | openai:MODEL (with --base-url)")
    v.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint base URL")
    v.add_argument("--n", type=int, default=4, help="variants per prompt")
    v.add_argument("--max-prompts", type=int, default=None)
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--out", required=True, help="output jsonl")
    v.set_defaults(func=cmd_variants)
    from rmeval.judges.cli import add_judges_parser

    add_judges_parser(sub)
    sr = sub.add_parser("serve-reward", help="serve a reward model over HTTP (OpenRLHF's remote reward protocol)")
    sr.add_argument("--checkpoint", required=True, help="one-label sequence classifier (an rmtrain checkpoint)")
    sr.add_argument("--host", default="127.0.0.1", help="bind address (default: local only)")
    sr.add_argument("--port", type=int, default=5000)
    sr.add_argument("--max-length", type=int, default=2048)
    sr.add_argument("--batch-size", type=int, default=32)
    sr.add_argument("--device", default=None)
    sr.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    sr.set_defaults(func=cmd_serve_reward)
    return parser


def cmd_serve_reward(args: argparse.Namespace) -> int:
    from rmeval.reward_server import serve_reward

    serve_reward(args.checkpoint, host=args.host, port=args.port, max_length=args.max_length,
                 batch_size=args.batch_size, device=args.device, dtype=args.dtype)
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ConfigError, DataError, OSError) as e:
        # one line: a Hub lookup that failed (OSError from transformers) explains itself in its first
        lines = str(e).strip().splitlines()
        print(f"rmeval: error: {lines[0] if lines else type(e).__name__}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
