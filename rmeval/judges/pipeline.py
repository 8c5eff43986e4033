"""JudgeProfile end to end, one call per step: elicit a judge's attribute and overall verdicts on
an items table (sharded, cached, resumable), analyze a judgments table (agreement, consistency,
position bias, priority weights and the paper's controls), and reweight attributes toward reference labels (with the rubric
and LoRA baselines under the same label budgets). ``rmeval judges`` is a thin layer over these."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rmcore.device import PLACEMENT_GROUP, Placement
from rmcore.errors import ConfigError
from rmcore.settings import check_ranges, comma_list, nested, option, output_folder
from rmcore.tracking import DEFAULT_PROJECT, flatten

from .inventory import load_inventory
from .shards import make_executor, run_shards


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(t) for t in comma_list(text))
    except ValueError:
        raise ConfigError(f"expected comma-separated integers, got '{text}'") from None


@dataclass
class ExecutorSettings:
    """The submitit parameters of the shards' jobs (``rmcore.jobs.make_executor``); unset ones are
    submitit's defaults."""

    slurm_partition: str | None = option(None, flag="--partition", deprecated=("--slurm-partition",),
                                         metavar="PARTITION", help="SLURM partition of the shards' jobs")
    timeout_min: int | None = option(None, ge=1, help="minutes a shard's job may run")
    gpus_per_node: int | None = option(None, ge=0, help="GPUs of each shard's job")

    def params(self) -> dict[str, Any]:
        """The parameters given (a timeout or partition that is empty or 0 is not)."""
        params: dict[str, Any] = {}
        if self.timeout_min:
            params["timeout_min"] = self.timeout_min
        if self.slurm_partition:
            params["slurm_partition"] = self.slurm_partition
        if self.gpus_per_node is not None:
            params["gpus_per_node"] = self.gpus_per_node
        return params


@dataclass
class ElicitConfig:
    """One elicitation (``rmeval judges elicit``, whose flags are these fields): the items, the
    judge, the attributes asked, the shards and how the judge runs."""

    out: str = option(required=True, parse=output_folder("--out"), help="output directory")
    items: str | None = option(None, help="items table (jsonl/parquet): item_id, source, query, response_a, "
                                          "response_b[, label]")
    data: list[str] = option(default_factory=list, action="append",
                             help="preference-set SPEC, one source each (repeatable)")
    max_items_per_source: int | None = option(None, ge=1, help="first N items of each --data source")
    model: str | None = option(None, help="local causal LM judge (path, Hub id, or a LoRA adapter dir)")
    endpoint: str | None = option(None, help="OpenAI-compatible base URL (e.g. a vLLM server's /v1)")
    # the endpoint's settings and the local judge's: each has an effect with its judge only
    endpoint_model: str | None = option(None, needs=("--endpoint", None), help="the served model's name (--endpoint)")
    api_key_env: str = option("OPENAI_API_KEY", needs=("--endpoint", None),
                              help="environment variable holding the endpoint's API key")
    judge_name: str | None = option(None, help="name in the judgments table (default: model name)")
    attributes: str | None = option(None, help="attribute YAML (replaces the shipped inventory)")
    extend_attributes: bool = option(False, help="add --attributes to the shipped inventory")
    attribute_names: list[str] = option(default_factory=list, parse=comma_list,
                                        help="comma-separated subset; 'core' = the 20 core attributes")
    overall: bool = option(True, flag="--no-overall", action="store_false", help="skip the overall verdict")
    n_shards: int = option(1, ge=1, help="shards of the items (one job each with --executor)")
    shard: int | None = option(None, ge=0, help="run only this shard (no merge)")
    executor: str = option("none", choices=["none", "local", "slurm", "debug"],
                           help="submitit executor for the shards (slurm: one job array)")
    executor_params: ExecutorSettings = nested(ExecutorSettings)
    batch_size: int = option(32, ge=1, needs=("--model", None), help="texts per forward (local)")
    max_length: int = option(4096, ge=1, needs=("--model", None), help="tokens per prompt (local)")
    # device (auto: this process's GPU, else the CPU), dtype (auto: bfloat16 on a GPU, float32 on the
    # CPU), kernel, remote code, device map: where a local --model judge runs
    placement: Placement = nested(Placement, group=PLACEMENT_GROUP)
    prefix_reuse: bool = option(True, flag="--no-prefix-reuse", action="store_false", needs=("--model", None),
                                help="one full forward per call (slower)")
    margin: float = option(0.0, ge=0, lt=0.5, needs=("--model", None),
                           help="unresolved when |p(A)-0.5| <= margin (local)")
    concurrency: int = option(8, ge=1, needs=("--endpoint", None), help="parallel requests (endpoint)")
    reasoning_tokens: int | None = option(None, ge=1, needs=("--endpoint", None),
                                          help="a judge that reasons before it answers (DeepSeek-R1): its reply "
                                               "budget in tokens (default: 4, a letter), the letter read after the "
                                               "reasoning (endpoint)")
    chunk_items: int = option(2, ge=1, help="items per committed chunk")
    progress: bool = option(True, flag="--no-progress", action="store_false", help="no progress bars")
    seed: int = option(0, ge=0, help="A/B assignment of --data pairs")
    table: str | None = option(None, help="also write the merged judgments as a long table OUT/TABLE "
                                          "(judgments.jsonl or .parquet) for inspection")

    def judge_spec(self) -> dict[str, Any]:
        if bool(self.model) == bool(self.endpoint):
            raise ConfigError("give exactly one judge: --model PATH (local causal LM) or --endpoint URL")
        if self.model:
            return {"kind": "hf", "model": self.model, "name": self.judge_name, "batch_size": self.batch_size,
                    "max_length": self.max_length, "dtype": self.placement.dtype, "device": self.placement.device,
                    "prefix_reuse": self.prefix_reuse, "margin": self.margin,
                    "attn_implementation": self.placement.attn_implementation,
                    "trust_remote_code": self.placement.trust_remote_code, "device_map": self.placement.device_map}
        if not self.endpoint_model:
            raise ConfigError("--endpoint needs --endpoint-model (the served model's name)")
        spec = {"kind": "openai", "model": self.endpoint_model, "base_url": self.endpoint, "name": self.judge_name,
                "api_key_env": self.api_key_env, "concurrency": self.concurrency}
        return {**spec, "reasoning_tokens": self.reasoning_tokens} if self.reasoning_tokens else spec


def prepare_items(cfg: ElicitConfig) -> tuple[Path, dict[str, dict[str, int]]]:
    """The items file: --items as given, or OUT/items.jsonl built from --data preference sets (each
    spec one source; the same seed gives the same file, so a restarted run sees the same items);
    and the rows each source's loader skipped (``on_bad=skip``), by reason."""
    import pandas as pd

    # scipy, pandas: --help stays cheap
    from rmcore.data.registry import load_data, parse_data_spec
    from rmcore.io import atomic_write_table

    # torch, pandas: --help stays cheap
    from .elicit import items_from_rating_set
    from .tables import load_items

    if cfg.items:
        load_items(cfg.items)  # fail early on a bad row
        return Path(cfg.items), {}
    if not cfg.data:
        raise ConfigError("give --items FILE or at least one --data SPEC")
    frames, skipped = [], {}
    for k, spec in enumerate(cfg.data):
        rs = load_data(spec)
        if not rs.preferences:
            raise ConfigError(f"--data {spec}: no preference pairs (use a preference set such as hh_rlhf or rm_bench)")
        parsed = parse_data_spec(spec)
        source = rs.name or parsed["name"]
        if parsed.get("path"):
            source = f"{parsed['name']}:{Path(parsed['path']).name.split('.')[0]}"
        frames.append(items_from_rating_set(rs, source, limit=cfg.max_items_per_source, seed=cfg.seed + k))
        if rs.skipped:
            skipped[source] = {reason: int(n) for reason, n in sorted(rs.skipped.items())}
    return atomic_write_table(Path(cfg.out) / "items.jsonl", pd.concat(frames, ignore_index=True)), skipped


def run_elicit(cfg: ElicitConfig) -> dict[str, Any]:
    # pandas: --help stays cheap
    from rmcore.io import atomic_write_json

    # torch: --help stays cheap
    from .elicit import ElicitJob, merge_shards, questions_for

    spec = cfg.judge_spec()  # the judge and the attributes are checked before OUT/items.jsonl is written
    if cfg.model:
        # torch: --help stays cheap
        from rmcore.modeling import check_model_name

        check_model_name(cfg.model, "--model")  # a local path, or a Hub id that exists
    attrs = load_inventory(cfg.attributes, extend=cfg.extend_attributes, names=cfg.attribute_names or None)
    questions = questions_for(attrs, overall=cfg.overall)
    items_path, skipped = prepare_items(cfg)
    shards = [cfg.shard] if cfg.shard is not None else list(range(cfg.n_shards))
    jobs = [ElicitJob(str(items_path), spec, questions, cfg.out, shard=i, n_shards=cfg.n_shards,
                      chunk_items=cfg.chunk_items, progress=cfg.progress) for i in shards]
    executor = None
    if cfg.executor != "none":
        executor = make_executor(cfg.executor, str(Path(cfg.out) / "submitit"), **cfg.executor_params.params())
    stats = run_shards(jobs, executor)
    summary: dict[str, Any] = {"shards": stats, "n_attributes": len(attrs), "items": str(items_path),
                               "rows_skipped": skipped}
    for key in ("n_cells", "n_cached", "n_made", "n_malformed", "n_unresolved"):
        summary[key] = int(sum(s[key] for s in stats))
    if any("generated_tokens" in s.get("extra", {}) for s in stats):  # an endpoint's tokens for this run's calls
        summary["generated_tokens"] = int(sum(s.get("extra", {}).get("generated_tokens", 0) for s in stats))
    if cfg.shard is None:
        summary["judgments"] = str(merge_shards(cfg.out, table=cfg.table))
    atomic_write_json(Path(cfg.out) / "elicit_stats.json", summary)
    return summary


def _log(tracker: Any, prefix: str, doc: dict[str, Any], images: dict[str, Path]) -> None:
    scalars = {k: v for k, v in flatten(doc, prefix).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    tracker.log(scalars)
    for key, path in images.items():
        tracker.log_image(f"{prefix}/{key}", path)


def _log_run(name: str, out: Path, config: dict[str, Any], prefix: str, doc: dict[str, Any], images: dict[str, Path],
             wandb_project: str, wandb_mode: str | None) -> None:
    # pandas: --help stays cheap
    from rmeval.tracking import evaluation_tracker

    tracker = evaluation_tracker(name, out, config, project=wandb_project, mode=wandb_mode, job_type="judges")
    try:
        _log(tracker, prefix, {k: v for k, v in doc.items() if k != "meta"}, images)
    finally:
        tracker.finish()


# Sections of analysis.json whose per-attribute, per-pair, per-source and per-judge detail stays in
# the file: W&B gets their headline figures only.
CONTROL_SECTIONS = ("single_read_control", "three_category_kappa", "matched_items", "no_conflict",
                    "attribute_importance", "difficulty_strata", "label_associations", "identical_preference_null",
                    "component_swaps")
DETAIL_KEYS = ("attributes", "pairs", "sources", "pooled", "targets", "judges", "thresholds", "quartiles", "families")


def _headline(doc: dict[str, Any]) -> dict[str, Any]:
    def trim(d: Any) -> Any:
        return {k: trim(v) for k, v in d.items() if k not in DETAIL_KEYS} if isinstance(d, dict) else d

    return {k: (trim(v) if k in CONTROL_SECTIONS else v) for k, v in doc.items()}


def analyze_judgments(judgments: str | os.PathLike, out: str | os.PathLike, *, items: str | os.PathLike | None = None,
                      settings: Any | None = None, wandb_project: str = DEFAULT_PROJECT,
                      wandb_mode: str | None = None) -> dict[str, Any]:
    """OUT/analysis.json and .md, the weight profiles and agreement plots, and a W&B run.
    ``settings``: rmeval.judges.analysis.AnalysisSettings; ``items`` (optional): the items table,
    whose reference labels add the difficulty strata and the label associations."""
    # pandas: --help stays cheap
    from rmcore.io import atomic_write_json, atomic_write_text

    # pandas: --help stays cheap
    from .analysis import AnalysisSettings, analysis_markdown, analyze
    from .plots import analysis_plots, plots_not_drawn
    from .store import load_store
    from .tables import load_items

    settings = settings or AnalysisSettings()
    store = load_store(judgments)  # a store, or a long table converted
    item_table = load_items(items) if items is not None else None
    res = analyze(store, item_table, settings=settings)  # bad settings fail before anything is written
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    res["meta"]["judgments"] = str(judgments)
    if items is not None:
        res["meta"]["items"] = str(items)
    atomic_write_json(out / "analysis.json", res)
    notes = "".join(f"\n{note}.\n" for note in plots_not_drawn(res))
    atomic_write_text(out / "analysis.md", analysis_markdown(res) + notes)
    images = analysis_plots(res, out)
    _log_run("judges-analyze", out, {"judgments": str(judgments), "items": None if items is None else str(items),
                                     "seed": settings.seed, "null_repeats": settings.null_repeats},
             "judges", _headline(res), images, wandb_project, wandb_mode)
    return res


MAX_PROFILES = 20  # lines in the reweighted-weights plot before it shows one per source


def _source_means(res: dict[str, Any]) -> dict[str, dict[str, float]]:
    """source -> the mean over judges of the reweighted weights (sources by name)."""
    by_source: dict[str, list[dict[str, float]]] = {}
    for jr in res["judges"].values():
        for s, r in jr["sources"].items():
            if r.get("weights"):
                by_source.setdefault(s, []).append(r["weights"])
    return {s: {a: float(np.mean([w[a] for w in ws])) for a in ws[0]} for s, ws in sorted(by_source.items())}


@dataclass
class ReweightSettings:
    """How attribute weights are refitted to reference labels (``rmeval judges reweight``)."""

    budgets: tuple[int, ...] = option((32, 64, 128, 256), parse=_ints, metavar="N,N,...",
                                      ge=2, help="labels per source the weights are refitted on (comma-separated)")
    n_repeats: int = option(10, ge=1, help="random label draws per budget")
    top_k: tuple[int, ...] = option((6, 12), parse=_ints, metavar="K,K,...",
                                    ge=1, help="attributes kept in the sparse refits (comma-separated)")
    seed: int = option(0, ge=0, help="seed of the label draws (and the baselines)")

    def validate(self) -> None:
        check_ranges(self)  # built by code too: --budgets, --top-k, --n-repeats in their declared ranges


def reweight_judgments(judgments: str | os.PathLike, items: str | os.PathLike, out: str | os.PathLike,
                       settings: ReweightSettings | None = None, *, baselines: Any | None = None,
                       jobs: int | None = None, wandb_project: str = DEFAULT_PROJECT,
                       wandb_mode: str | None = None) -> dict[str, Any]:
    """OUT/reweight.json and .md, the reweighted profiles' plot, and a W&B run, as ``settings`` say
    (default its defaults); with ``baselines`` (rmeval.judges.baselines.BaselineSettings) the rubric
    and LoRA baselines too. ``jobs``: worker processes for the fits (default: this process's CPUs;
    the figures do not depend on it)."""
    # pandas: --help stays cheap
    from rmcore.io import atomic_write_json, atomic_write_text

    # pandas: --help stays cheap
    from .plots import weight_profiles
    from .reweight import reweight, reweight_markdown
    from .store import load_store
    from .tables import load_items

    settings = settings or ReweightSettings()
    settings.validate()
    item_table = load_items(items, need_labels=True)
    res = reweight(item_table, load_store(judgments), budgets=settings.budgets, n_repeats=settings.n_repeats,
                   top_k=settings.top_k, seed=settings.seed, jobs=jobs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if baselines is not None:
        # pandas: --help stays cheap
        from .baselines import run_baselines

        run_baselines(baselines, res, item_table, judgments, out / "baselines")
    res["meta"].update(judgments=str(judgments), items=str(items))
    atomic_write_json(out / "reweight.json", res)
    atomic_write_text(out / "reweight.md", reweight_markdown(res))
    profiles = {f"{j}/{s}": r["weights"] for j, jr in res["judges"].items() for s, r in jr["sources"].items()
                if r.get("weights")}
    title = "reweighted attribute weights (reference labels)"
    if len(profiles) > MAX_PROFILES:  # 357 judge/source lines (the published panel) are no plot: one per source
        profiles, title = _source_means(res), f"{title}, mean over judges per source"
    images = {}
    if profiles:
        images["weight_profiles"] = weight_profiles(profiles, out / "reweight_weights.png", title=title)
    _log_run("judges-reweight", out, {"judgments": str(judgments), "items": str(items)}, "reweight", res, images,
             wandb_project, wandb_mode)
    return res
