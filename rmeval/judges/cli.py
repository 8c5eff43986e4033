"""``rmeval judges elicit|analyze|reweight``: thin commands over rmeval.judges.

    rmeval judges elicit  --out OUT (--items FILE | --data SPEC ...) (--model PATH | --endpoint URL --endpoint-model NAME)
                          [--attribute-names core,...] [--attributes FILE [--extend-attributes]]
                          [--n-shards N [--shard I] [--executor none|local|slurm|debug]]
    rmeval judges analyze --judgments FILE --out OUT
    rmeval judges reweight --judgments FILE --items FILE --out OUT [--baseline-model PATH --baseline-judge NAME]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError


def _csv(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(t) for t in _csv(text))
    except ValueError:
        raise ConfigError(f"expected comma-separated integers, got '{text}'") from None


@dataclass
class ElicitConfig:
    out: str
    items: str | None = None
    data: list[str] = field(default_factory=list)
    max_items_per_source: int | None = None
    model: str | None = None
    endpoint: str | None = None
    endpoint_model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    judge_name: str | None = None
    attributes: str | None = None
    extend_attributes: bool = False
    attribute_names: list[str] = field(default_factory=list)
    overall: bool = True
    n_shards: int = 1
    shard: int | None = None
    executor: str = "none"
    executor_params: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 32
    max_length: int = 4096
    dtype: str = "float32"
    device: str | None = None
    prefix_reuse: bool = True
    margin: float = 0.0
    concurrency: int = 8
    chunk_items: int = 2
    progress: bool = True
    seed: int = 0

    def judge_spec(self) -> dict[str, Any]:
        if bool(self.model) == bool(self.endpoint):
            raise ConfigError("give exactly one judge: --model PATH (local causal LM) or --endpoint URL")
        if self.model:
            return {"kind": "hf", "model": self.model, "name": self.judge_name, "batch_size": self.batch_size,
                    "max_length": self.max_length, "dtype": self.dtype, "device": self.device,
                    "prefix_reuse": self.prefix_reuse, "margin": self.margin}
        if not self.endpoint_model:
            raise ConfigError("--endpoint needs --endpoint-model (the served model's name)")
        return {"kind": "openai", "model": self.endpoint_model, "base_url": self.endpoint, "name": self.judge_name,
                "api_key_env": self.api_key_env, "concurrency": self.concurrency}


def prepare_items(cfg: ElicitConfig) -> Path:
    """The items file: --items as given, or OUT/items.jsonl built from --data preference sets (each
    spec one source; the same seed gives the same file, so a restarted run sees the same items)."""
    import pandas as pd

    from rmcore.io import atomic_write_table

    from .elicit import items_from_rating_set
    from .tables import load_items

    if cfg.items:
        load_items(cfg.items)  # fail early on a bad row
        return Path(cfg.items)
    if not cfg.data:
        raise ConfigError("give --items FILE or at least one --data SPEC")
    from rmeval.cli import load_data, parse_data_spec

    frames = []
    for k, spec in enumerate(cfg.data):
        rs = load_data(spec)
        if not rs.preferences:
            raise ConfigError(f"--data {spec}: no preference pairs (use a preference set such as hh_rlhf or rm_bench)")
        parsed = parse_data_spec(spec)
        source = rs.name or parsed["name"]
        if parsed.get("path"):
            source = f"{parsed['name']}:{Path(parsed['path']).name.split('.')[0]}"
        frames.append(items_from_rating_set(rs, source, limit=cfg.max_items_per_source, seed=cfg.seed + k))
    return atomic_write_table(Path(cfg.out) / "items.jsonl", pd.concat(frames, ignore_index=True))


def run_elicit(cfg: ElicitConfig) -> dict[str, Any]:
    from rmcore.io import atomic_write_json

    from .elicit import ElicitJob, merge_shards, questions_for
    from .inventory import load_inventory
    from .shards import make_executor, run_shards

    items_path = prepare_items(cfg)
    attrs = load_inventory(cfg.attributes, extend=cfg.extend_attributes, names=cfg.attribute_names or None)
    questions = questions_for(attrs, overall=cfg.overall)
    spec = cfg.judge_spec()
    shards = [cfg.shard] if cfg.shard is not None else list(range(cfg.n_shards))
    jobs = [ElicitJob(str(items_path), spec, questions, cfg.out, shard=i, n_shards=cfg.n_shards,
                      chunk_items=cfg.chunk_items, progress=cfg.progress) for i in shards]
    executor = None
    if cfg.executor != "none":
        executor = make_executor(cfg.executor, str(Path(cfg.out) / "submitit"), **cfg.executor_params)
    stats = run_shards(jobs, executor)
    summary: dict[str, Any] = {"shards": stats, "n_attributes": len(attrs), "items": str(items_path)}
    for key in ("n_cells", "n_cached", "n_made", "n_malformed", "n_unresolved"):
        summary[key] = int(sum(s[key] for s in stats))
    if cfg.shard is None:
        summary["judgments"] = str(merge_shards(cfg.out))
    atomic_write_json(Path(cfg.out) / "elicit_stats.json", summary)
    return summary


def _tracker(args: argparse.Namespace, name: str, out: Path, config: dict[str, Any]):
    from rmcore.tracking import Tracker

    return Tracker(project=args.wandb_project, name=name, config=config, mode=args.wandb_mode, dir=out,
                   job_type="judges")


def _log(tracker: Any, prefix: str, doc: dict[str, Any], images: dict[str, Path]) -> None:
    from rmcore.tracking import flatten

    scalars = {k: v for k, v in flatten(doc, prefix).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    tracker.log(scalars)
    for key, path in images.items():
        tracker.log_image(f"{prefix}/{key}", path)


def cmd_elicit(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {}
    if args.timeout_min:
        params["timeout_min"] = args.timeout_min
    if args.slurm_partition:
        params["slurm_partition"] = args.slurm_partition
    if args.gpus_per_node is not None:
        params["gpus_per_node"] = args.gpus_per_node
    cfg = ElicitConfig(out=args.out, items=args.items, data=args.data or [], max_items_per_source=args.max_items_per_source,
                       model=args.model, endpoint=args.endpoint, endpoint_model=args.endpoint_model,
                       api_key_env=args.api_key_env, judge_name=args.judge_name, attributes=args.attributes,
                       extend_attributes=args.extend_attributes, attribute_names=_csv(args.attribute_names),
                       overall=not args.no_overall, n_shards=args.n_shards, shard=args.shard, executor=args.executor,
                       executor_params=params, batch_size=args.batch_size, max_length=args.max_length,
                       dtype=args.dtype, device=args.device, prefix_reuse=not args.no_prefix_reuse,
                       margin=args.margin, concurrency=args.concurrency, chunk_items=args.chunk_items,
                       progress=not args.no_progress, seed=args.seed)
    s = run_elicit(cfg)
    print(f"elicited {s['n_cells']} calls ({s['n_made']} asked now, {s['n_cached']} from the cache; "
          f"{s['n_unresolved']} unresolved, {s['n_malformed']} malformed) -> {s.get('judgments', args.out)}")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from rmcore.io import atomic_write_json, atomic_write_text

    from .analysis import analysis_markdown, analyze
    from .plots import agreement_heatmap, weight_profiles
    from .tables import load_judgments

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = analyze(load_judgments(args.judgments), attributes=_csv(args.attribute_names) or None, seed=args.seed,
                  n_splits=args.n_splits)
    res["meta"]["judgments"] = str(args.judgments)
    atomic_write_json(out / "analysis.json", res)
    atomic_write_text(out / "analysis.md", analysis_markdown(res))
    images: dict[str, Path] = {}
    fitted = {k: v["weights"] for k, v in res["judges"].items() if v["weights"]}
    if fitted:  # no fit when no judge gave a stable verdict on both classes
        images["weight_profiles"] = weight_profiles(fitted, out / "weight_profiles.png",
                                                    title="priority weights (own verdicts)")
    if len(res["judges"]) > 1:
        images["agreement_heatmap"] = agreement_heatmap(res, out / "agreement_heatmap.png")
    tracker = _tracker(args, "judges-analyze", out, {"judgments": str(args.judgments), "seed": args.seed})
    try:
        _log(tracker, "judges", {k: v for k, v in res.items() if k != "meta"}, images)
    finally:
        tracker.finish()
    ag = res["agreement"]
    f = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
    print(f"{len(res['judges'])} judges: overall agreement {f(ag['overall'])}, attribute agreement "
          f"{f(ag['attribute'])} (coverage {f(ag['attribute_coverage'])}) -> {out / 'analysis.json'}")
    return 0


def cmd_reweight(args: argparse.Namespace) -> int:
    from rmcore.io import atomic_write_json, atomic_write_text

    from .plots import weight_profiles
    from .reweight import reweight, reweight_markdown
    from .tables import load_items, load_judgments

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    items = load_items(args.items, need_labels=True)
    judgments = load_judgments(args.judgments)
    res = reweight(items, judgments, budgets=_ints(args.budgets), n_repeats=args.n_repeats, top_k=_ints(args.top_k),
                   seed=args.seed)
    if args.baselines:
        run_baselines(args, res, items)
    res["meta"].update(judgments=str(args.judgments), items=str(args.items))
    atomic_write_json(out / "reweight.json", res)
    atomic_write_text(out / "reweight.md", reweight_markdown(res))
    profiles = {f"{j}/{s}": r["weights"] for j, jr in res["judges"].items() for s, r in jr["sources"].items()
                if r.get("weights")}
    images = {}
    if profiles:
        images["weight_profiles"] = weight_profiles(profiles, out / "reweight_weights.png",
                                                    title="reweighted attribute weights (reference labels)")
    tracker = _tracker(args, "judges-reweight", out, {"judgments": str(args.judgments), "items": str(args.items)})
    try:
        _log(tracker, "reweight", {k: v for k, v in res.items() if k != "meta"}, images)
    finally:
        tracker.finish()
    for j, jr in res["judges"].items():
        b, r = jr["mean_base_accuracy"], jr["mean_reweighted_accuracy"]
        if b is not None and r is not None:
            print(f"{j}: held-out accuracy {100 * b:.1f}% -> {100 * r:.1f}% reweighted (mean over sources)")
    print(f"-> {out / 'reweight.json'}")
    return 0


def run_baselines(args: argparse.Namespace, res: dict[str, Any], items) -> None:
    """Rubric prompting and LoRA SFT of ``--baseline-model`` (the local model behind judge
    ``--baseline-judge``), per source, on that source's split and training labels."""
    import numpy as np

    from .analysis import build_panel
    from .baselines import lora_sft_accuracy, rubric_accuracy
    from .elicit import LocalPairJudge
    from .inventory import load_inventory
    from .reweight import source_split

    wanted = set(_csv(args.baselines))
    if not wanted <= {"rubric", "lora"}:
        raise ConfigError(f"--baselines: rubric and/or lora, got '{args.baselines}'")
    if not args.baseline_model or not args.baseline_judge:
        raise ConfigError("--baselines needs --baseline-model PATH and --baseline-judge NAME")
    if args.baseline_judge not in res["judges"]:
        raise ConfigError(f"--baseline-judge '{args.baseline_judge}' is not a judge in {args.judgments}")
    from .tables import load_judgments

    panel = build_panel(load_judgments(args.judgments), res["meta"]["attributes"])
    splits = source_split(items, panel, args.seed)
    inv = {a.name: a for a in load_inventory(args.attributes_file, extend=bool(args.attributes_file))}
    judge = LocalPairJudge(args.baseline_model, max_length=args.max_length, batch_size=args.batch_size,
                           device=args.device) if "rubric" in wanted else None
    out = Path(args.out) / "baselines"
    for source, sp in splits.items():
        r = res["judges"][args.baseline_judge]["sources"][source]
        pos = np.array(panel.items)
        test = items.set_index("item_id").loc[pos[sp["idx"][sp["test"]]]].reset_index()
        train_ids = pos[sp["idx"][sp["train"]]]
        rng = np.random.default_rng([args.seed, 17])
        if args.lora_budget and args.lora_budget < len(train_ids):
            train_ids = rng.choice(train_ids, size=args.lora_budget, replace=False)
        train = items.set_index("item_id").loc[train_ids].reset_index()
        base: dict[str, Any] = {}
        if judge is not None and r.get("weights"):
            top = r["top_k"].get(str(args.rubric_k), r["top_k"]["all"])["attributes"][: args.rubric_k]
            missing = [a for a in top if a not in inv]
            if missing:
                raise ConfigError(f"rubric criteria {missing} are not in the attribute inventory (--attributes-file)")
            base["rubric"] = rubric_accuracy(judge, test, [inv[a] for a in top], out / source / "rubric")
        if "lora" in wanted:
            base["lora_sft"] = lora_sft_accuracy(args.baseline_model, train, test, out / source / "lora",
                                                 steps=args.lora_steps, lr=args.lora_lr, max_length=args.max_length,
                                                 batch_size=args.lora_batch_size, device=args.device, seed=args.seed)
            base["lora_sft"]["budget"] = int(len(train))
        r["baselines"] = base
    if judge is not None:
        judge.close()


def add_judges_parser(sub: argparse._SubParsersAction) -> None:
    j = sub.add_parser("judges", help="profile LLM judges: elicit attribute judgments, analyze, reweight")
    js = j.add_subparsers(dest="judges_command", required=True)

    def wandb(p: argparse.ArgumentParser) -> None:
        p.add_argument("--wandb-mode", default=None, choices=["online", "offline", "disabled"])
        p.add_argument("--wandb-project", default="matchrm")

    e = js.add_parser("elicit", help="attribute and overall judgments in both presentation orders")
    e.add_argument("--out", required=True)
    e.add_argument("--items", default=None, help="items table (jsonl/parquet): item_id, source, query, response_a, "
                                                 "response_b[, label]")
    e.add_argument("--data", action="append", help="preference-set SPEC, one source each (repeatable)")
    e.add_argument("--max-items-per-source", type=int, default=None)
    e.add_argument("--model", default=None, help="local causal LM judge (path, Hub id, or a LoRA adapter dir)")
    e.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL (e.g. a vLLM server's /v1)")
    e.add_argument("--endpoint-model", default=None)
    e.add_argument("--api-key-env", default="OPENAI_API_KEY")
    e.add_argument("--judge-name", default=None, help="name in the judgments table (default: model name)")
    e.add_argument("--attributes", default=None, help="attribute YAML (replaces the shipped inventory)")
    e.add_argument("--extend-attributes", action="store_true", help="add --attributes to the shipped inventory")
    e.add_argument("--attribute-names", default=None, help="comma-separated subset; 'core' = the 20 core attributes")
    e.add_argument("--no-overall", action="store_true", help="skip the overall verdict")
    e.add_argument("--n-shards", type=int, default=1)
    e.add_argument("--shard", type=int, default=None, help="run only this shard (no merge)")
    e.add_argument("--executor", default="none", choices=["none", "local", "slurm", "debug"],
                   help="submitit executor for the shards (slurm: one job array)")
    e.add_argument("--slurm-partition", default=None)
    e.add_argument("--timeout-min", type=int, default=None)
    e.add_argument("--gpus-per-node", type=int, default=None)
    e.add_argument("--batch-size", type=int, default=32)
    e.add_argument("--max-length", type=int, default=4096)
    e.add_argument("--dtype", default="float32")
    e.add_argument("--device", default=None)
    e.add_argument("--no-prefix-reuse", action="store_true", help="one full forward per call (slower)")
    e.add_argument("--margin", type=float, default=0.0, help="unresolved when |p(A)-0.5| <= margin (local)")
    e.add_argument("--concurrency", type=int, default=8, help="parallel requests (endpoint)")
    e.add_argument("--chunk-items", type=int, default=2, help="items per committed chunk")
    e.add_argument("--no-progress", action="store_true")
    e.add_argument("--seed", type=int, default=0, help="A/B assignment of --data pairs")
    e.set_defaults(func=cmd_elicit)

    a = js.add_parser("analyze", help="agreement, consistency, position bias and priority weights")
    a.add_argument("--judgments", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--attribute-names", default=None)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--n-splits", type=int, default=20, help="random half splits for split-half reliability")
    wandb(a)
    a.set_defaults(func=cmd_analyze)

    r = js.add_parser("reweight", help="refit attribute weights to reference labels per source")
    r.add_argument("--judgments", required=True)
    r.add_argument("--items", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--budgets", default="32,64,128,256")
    r.add_argument("--n-repeats", type=int, default=10)
    r.add_argument("--top-k", default="6,12")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--baselines", default=None, help="rubric,lora: baselines with --baseline-model")
    r.add_argument("--baseline-model", default=None, help="local causal LM behind --baseline-judge")
    r.add_argument("--baseline-judge", default=None)
    r.add_argument("--attributes-file", default=None, help="attribute YAML used at elicitation, if custom")
    r.add_argument("--rubric-k", type=int, default=6)
    r.add_argument("--lora-budget", type=int, default=256, help="training labels per source for LoRA SFT")
    r.add_argument("--lora-steps", type=int, default=200)
    r.add_argument("--lora-lr", type=float, default=2e-4)
    r.add_argument("--lora-batch-size", type=int, default=8)
    r.add_argument("--max-length", type=int, default=4096)
    r.add_argument("--batch-size", type=int, default=32)
    r.add_argument("--device", default=None)
    wandb(r)
    r.set_defaults(func=cmd_reweight)


