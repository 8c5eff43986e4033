"""``rmeval`` console script: score + audit checkpoints, recompute an audit from tables, and
pairwise accuracy on preference sets. Thin: every step is a library call.

    rmeval audit --checkpoint DIR --data SPEC --out OUT [--conditions original generic ...]
                 [--related-file F] [--paraphrase-file F] [--max-prompts N] [--batch-size 32]
                 [--max-length 2048] [--n-boot 2000] [--wandb-mode offline|online|disabled] [--seed 0]
    rmeval stats --scores FILE --ratings FILE --out OUT [--preferences FILE]
    rmeval pairwise --checkpoint DIR --data SPEC --out OUT

SPEC: a JSON/YAML data-spec file, a JSON string, or a short form ``simulated``,
``simulated:n_prompts=100,seed=3``, ``rm_bench:/path/chat_filtered.json``, ``helpsteer2:validation``
(after the colon: ``key=value`` pairs, and at most one bare value -- a split name for the
HelpSteer sets when it has no path characters, otherwise a path).
If DIR holds several checkpoints (subdirectories with config.json: checkpoint-*/, arm dirs), each is
audited into OUT/<name>/ and a comparison is written to OUT/summary.md and OUT/summary.json.
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

from rmtrain.errors import ConfigError, DataError

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
                is_split = part in SPLITS and name in ("helpsteer", "helpsteer2", "hh_rlhf")
                out["split" if is_split else "path"] = part
    return out


def load_data(spec: str, max_prompts: int | None = None, seed: int = 0):
    """Rating set for SPEC; with ``max_prompts`` a seeded sample of prompts (input order kept)."""
    import numpy as np

    from rmtrain.data.registry import load_rating_set

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

def _natural_key(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def find_checkpoints(path: str | Path) -> list[tuple[str, Path]]:
    """[(name, dir)]: DIR itself if it holds config.json, else its subdirectories that do
    (searched two levels deep, e.g. ARM/checkpoint-N), in natural order."""
    root = Path(path)
    if (root / "config.json").is_file():
        return [(root.name, root)]
    if not root.is_dir():
        # not a directory: a Hub id
        return [(str(path).rstrip("/").split("/")[-1], Path(str(path)))]
    found = sorted({c.parent for c in root.glob("*/config.json")} | {c.parent for c in root.glob("*/*/config.json")})
    if not found:
        raise ConfigError(f"{root}: no checkpoint (no config.json in it or in its subdirectories)")
    named = [(str(d.relative_to(root)).replace("/", "__"), d) for d in found]
    return sorted(named, key=lambda x: _natural_key(x[0]))


def make_cli_scorer(args: argparse.Namespace, checkpoint: Path | str):
    from rmeval.scoring import make_scorer

    common = {"max_length": args.max_length, "batch_size": args.batch_size}
    if args.scorer == "seq_classifier":
        return make_scorer("seq_classifier", model=checkpoint, max_tokens=args.max_tokens, **common)
    if args.scorer == "generative_judge":
        return make_scorer("generative_judge", model=checkpoint, **common)
    if args.scorer == "dpo_implicit":
        if not args.reference:
            raise ConfigError("--scorer dpo_implicit needs --reference (the DPO reference model)")
        return make_scorer("dpo_implicit", policy=checkpoint, reference=args.reference, beta=args.beta, **common)
    raise ConfigError(f"unknown --scorer {args.scorer}")


def provenance(checkpoint: Path | str) -> dict[str, Any]:
    """arm, seed, model and sweep group of a checkpoint trained by ``rmtrain`` (empty otherwise),
    so audit runs line up with their training runs on W&B."""
    info: dict[str, Any] = {}
    path = Path(checkpoint)
    summary, cfg = path / "train_summary.json", path / "matchrm_config.json"
    if summary.is_file():
        s = json.loads(summary.read_text())
        info.update({k: s[k] for k in ("arm", "seed", "model") if k in s})
    if cfg.is_file():
        group = json.loads(cfg.read_text()).get("wandb", {}).get("group")
        if group:
            info["group"] = group
    return info


def _tracker(args: argparse.Namespace, name: str, out: Path, config: dict[str, Any],
             checkpoint: Path | str | None = None):
    from rmtrain.tracking import Tracker

    prov = provenance(checkpoint) if checkpoint is not None else {}
    tags = [f"{k}:{prov[k]}" for k in ("arm", "seed") if k in prov]
    return Tracker(project=args.wandb_project, name=name, config={**config, **prov}, mode=args.wandb_mode,
                   dir=out, job_type="audit", group=prov.get("group"), tags=tags)


# -- commands ------------------------------------------------------------------------------------

def resolve_conditions(args: argparse.Namespace) -> list[str]:
    from rmeval.conditions import ALL_CONDITIONS

    if args.conditions:
        conds = [c for part in args.conditions for c in part.split(",") if c]
        for c in conds:
            if c not in ALL_CONDITIONS:
                raise ConfigError(f"unknown condition '{c}'; known: {', '.join(ALL_CONDITIONS)}")
        for c, f in (("related", args.related_file), ("paraphrase", args.paraphrase_file)):
            if c in conds and not f:
                raise ConfigError(f"condition '{c}' needs --{c}-file")
        return conds
    # default: every condition whose inputs are at hand
    return [c for c in ALL_CONDITIONS
            if not (c == "related" and not args.related_file) and not (c == "paraphrase" and not args.paraphrase_file)]


def audit_checkpoint(args: argparse.Namespace, name: str, checkpoint: Path, rating_set, conditions: list[str],
                     out: Path) -> dict[str, Any]:
    from rmeval.audit import compute_audit
    from rmeval.callback import pick_attribute
    from rmeval.report import log_audit, write_report
    from rmeval.scoring_run import score_conditions, truncation_summary
    from rmtrain.io import atomic_write_table

    scorer = make_cli_scorer(args, checkpoint)
    opts: dict[str, Any] = {"seed": args.seed, "n_donors": args.n_donors}
    if args.related_file:
        opts["related_file"] = args.related_file
    if args.paraphrase_file:
        opts["paraphrase_file"] = args.paraphrase_file
    if args.embedder:
        opts["embedder"] = args.embedder
    try:
        scores = score_conditions(scorer, rating_set, conditions, out_path=out / "scores.parquet",
                                  cache_path=Path(args.cache) if args.cache else out / "score_cache.sqlite", **opts)
        ratings = rating_set.ratings_table(scorer.tokenizer)
    finally:
        scorer.close()
    atomic_write_table(out / "ratings.parquet", ratings)
    prefs = preferences_table(rating_set)
    if prefs is not None:
        atomic_write_table(out / "preferences.parquet", prefs)
    attribute = pick_attribute(rating_set, args.attribute)
    audit = compute_audit(scores, ratings, preferences=prefs, attribute=attribute, n_boot=args.n_boot,
                          n_boot_regression=args.n_boot_regression, seed=args.seed)
    audit["truncation"] = truncation_summary(scores)
    # the run's seed goes in as run_seed: meta's seed is the audit's own (bootstrap, donors)
    prov = {("run_seed" if k == "seed" else k): v for k, v in provenance(checkpoint).items()}
    audit["meta"].update({"checkpoint": str(checkpoint), "data": args.data, "scorer": args.scorer, **prov})
    paths = write_report(audit, out, title=f"Audit of {name}")
    tracker = _tracker(args, f"audit-{name}", out, {"checkpoint": str(checkpoint), "data": args.data,
                                                    "conditions": conditions, "n_boot": args.n_boot}, checkpoint)
    try:
        log_audit(tracker, audit, paths)
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
    from rmtrain.io import atomic_write_json, atomic_write_text
    from rmtrain.tracking import flatten

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
    out = Path(args.out)
    checkpoints = find_checkpoints(args.checkpoint)
    rating_set = load_data(args.data, args.max_prompts, args.seed)
    conditions = resolve_conditions(args)
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
        raise DataError("ratings table has no attribute column", field="helpfulness")
    return "helpfulness" if "helpfulness" in attrs else attrs[0]


def cmd_stats(args: argparse.Namespace) -> int:
    from rmeval.audit import compute_audit
    from rmeval.report import log_audit, write_report
    from rmtrain.io import read_table

    scores, ratings = read_table(args.scores), read_table(args.ratings)
    prefs = read_table(args.preferences) if args.preferences else None
    attribute = args.attribute or _default_attribute(ratings)
    audit = compute_audit(scores, ratings, preferences=prefs, attribute=attribute, n_boot=args.n_boot,
                          n_boot_regression=args.n_boot_regression, seed=args.seed)
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

    lines = [f"# Pairwise accuracy: {name}", "", f"Accuracy: {fmt(res['accuracy'])}", ""]
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

    from rmeval.scoring_run import score_conditions
    from rmeval.stats.pairwise import pairwise_accuracy
    from rmtrain.io import atomic_write_json, atomic_write_table, atomic_write_text
    from rmtrain.tracking import flatten

    rating_set = load_data(args.data, args.max_prompts, args.seed)
    prefs = preferences_table(rating_set)
    if prefs is None:
        raise DataError(f"{args.data}: the rating set has no preference labels")
    out = Path(args.out)
    checkpoints = find_checkpoints(args.checkpoint)
    results = {}
    for name, ckpt in checkpoints:
        dest = out if len(checkpoints) == 1 else out / name
        scorer = make_cli_scorer(args, ckpt)
        try:
            scores = score_conditions(scorer, rating_set, ["original"], out_path=dest / "scores.parquet",
                                      cache_path=Path(args.cache) if args.cache else dest / "score_cache.sqlite")
        finally:
            scorer.close()
        res = pairwise_accuracy(prefs, scores[["prompt_id", "response_id", "score"]], n_boot=args.n_boot,
                                rng=np.random.default_rng(args.seed))
        atomic_write_table(dest / "preferences.parquet", prefs)
        atomic_write_json(dest / "pairwise.json", res)
        atomic_write_text(dest / "pairwise.md", _pairwise_markdown(name, res))
        tracker = _tracker(args, f"pairwise-{name}", dest, {"checkpoint": str(ckpt), "data": args.data}, ckpt)
        try:
            tracker.log({k: v for k, v in flatten(res, "pairwise").items() if isinstance(v, (int, float))})
        finally:
            tracker.finish()
        results[name] = res
        print(f"{name}: pairwise accuracy {res['accuracy']['estimate']:.3f} on {len(prefs)} pairs -> {dest}")
    if len(checkpoints) > 1:
        atomic_write_json(out / "summary.json", {n: flatten(r) for n, r in results.items()})
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

def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples over prompts")
    p.add_argument("--n-boot-regression", type=int, default=5000, help="resamples for the sibling regression")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--attribute", default=None, help="rated attribute (default helpfulness, else the first)")
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
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--max-tokens", type=int, default=None, help="cap on padded tokens per batch")
    p.add_argument("--cache", default=None, help="score cache file (default OUT/score_cache.sqlite)")


def build_parser() -> argparse.ArgumentParser:
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
    a.set_defaults(func=cmd_audit)
    s = sub.add_parser("stats", help="audit an existing scores table")
    s.add_argument("--scores", required=True)
    s.add_argument("--ratings", required=True)
    s.add_argument("--preferences", default=None)
    _common(s)
    s.set_defaults(func=cmd_stats)
    pw = sub.add_parser("pairwise", help="accuracy on a preference set (RM-Bench matrix, HH-RLHF)")
    _model_args(pw)
    _common(pw)
    pw.set_defaults(func=cmd_pairwise)
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
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ConfigError, DataError, FileNotFoundError) as e:
        print(f"rmeval: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
