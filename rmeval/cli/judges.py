"""``rmeval judges elicit|analyze|reweight``: LLM-judge profiling (rmeval.judges.pipeline).

    rmeval judges elicit  --out OUT (--items FILE | --data SPEC ...) (--model PATH | --endpoint URL --endpoint-model NAME)
                          [--attribute-names core,...] [--attributes FILE [--extend-attributes]]
                          [--n-shards N [--shard I] [--executor none|local|slurm|debug]] [--table judgments.jsonl]
    rmeval judges analyze --judgments STORE|FILE --out OUT [--items FILE] [--null-repeats 20] [--donor JUDGE]
    rmeval judges reweight --judgments STORE|FILE --items FILE --out OUT [--baseline-model PATH --baseline-judge NAME]
"""

from __future__ import annotations

import argparse
from typing import Any

from rmeval.cli.flags import add_placement, add_wandb, csv, ints, placement, wandb_target


def add_parser(sub: argparse._SubParsersAction) -> None:
    j = sub.add_parser("judges", help="profile LLM judges: elicit attribute judgments, analyze, reweight")
    js = j.add_subparsers(dest="judges_command", required=True)

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
    add_placement(e)  # where a local --model judge runs
    e.add_argument("--no-prefix-reuse", action="store_true", help="one full forward per call (slower)")
    e.add_argument("--margin", type=float, default=0.0, help="unresolved when |p(A)-0.5| <= margin (local)")
    e.add_argument("--concurrency", type=int, default=8, help="parallel requests (endpoint)")
    e.add_argument("--chunk-items", type=int, default=2, help="items per committed chunk")
    e.add_argument("--no-progress", action="store_true")
    e.add_argument("--seed", type=int, default=0, help="A/B assignment of --data pairs")
    e.add_argument("--table", default=None, help="also write the merged judgments as a long table OUT/TABLE "
                                                 "(judgments.jsonl or .parquet) for inspection")
    e.set_defaults(func=run_elicit)

    a = js.add_parser("analyze", help="agreement, consistency, position bias, priority weights and the "
                                      "JudgeProfile controls")
    a.add_argument("--judgments", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--items", default=None, help="items table with reference labels: adds the difficulty strata "
                                                 "and the attribute-label associations")
    a.add_argument("--attribute-names", default=None)
    a.add_argument("--attributes-file", default=None, help="attribute YAML used at elicitation, if custom (families)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--n-splits", type=int, default=20, help="random half splits for split-half reliability")
    a.add_argument("--null-repeats", type=int, default=20,
                   help="repetitions of the identical-preference null (0: skip it)")
    a.add_argument("--donor", default=None, help="donor judge of the component swaps (default: highest stable rate)")
    a.add_argument("--min-shared-attributes", type=int, default=20,
                   help="jointly resolved attributes a no-conflict case needs (the paper's 20)")
    a.add_argument("--min-n-source", type=int, default=50,
                   help="usable comparisons a reader needs in a source to enter a label association")
    a.add_argument("--min-n-pooled", type=int, default=200,
                   help="the same over all sources pooled")
    add_wandb(a)
    a.set_defaults(func=run_analyze)

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
    add_wandb(r)
    r.set_defaults(func=run_reweight)


def run_elicit(args: argparse.Namespace) -> int:
    from rmeval.judges.pipeline import ElicitConfig, run_elicit

    placement(args)  # malformed device flags fail here; the device itself is resolved where the judge runs

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
                       extend_attributes=args.extend_attributes, attribute_names=csv(args.attribute_names),
                       overall=not args.no_overall, n_shards=args.n_shards, shard=args.shard, executor=args.executor,
                       executor_params=params, batch_size=args.batch_size, max_length=args.max_length,
                       dtype=args.dtype, device=args.device, attn_implementation=args.attn_implementation,
                       trust_remote_code=args.trust_remote_code, device_map=args.device_map,
                       prefix_reuse=not args.no_prefix_reuse,
                       margin=args.margin, concurrency=args.concurrency, chunk_items=args.chunk_items,
                       progress=not args.no_progress, seed=args.seed, table=args.table)
    s = run_elicit(cfg)
    print(f"elicited {s['n_cells']} calls ({s['n_made']} asked now, {s['n_cached']} from the cache; "
          f"{s['n_unresolved']} unresolved, {s['n_malformed']} malformed) -> {s.get('judgments', args.out)}")
    return 0


def run_analyze(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rmcore.markdown import num
    from rmeval.judges.analysis import AnalysisSettings
    from rmeval.judges.pipeline import analyze_judgments

    settings = AnalysisSettings(attributes=csv(args.attribute_names) or None, seed=args.seed, n_splits=args.n_splits,
                                null_repeats=args.null_repeats, donor=args.donor,
                                min_shared=args.min_shared_attributes, min_n_source=args.min_n_source,
                                min_n_pooled=args.min_n_pooled, attributes_file=args.attributes_file)
    res = analyze_judgments(args.judgments, args.out, items=args.items, settings=settings, **wandb_target(args))
    ag = res["agreement"]

    def f(x: float | None) -> str:
        return num(x, missing="n/a")

    line = (f"{len(res['judges'])} judges: overall agreement {f(ag['overall'])}, attribute agreement "
            f"{f(ag['attribute'])} (coverage {f(ag['attribute_coverage'])})")
    null = res.get("identical_preference_null")
    if null:
        line += (f"; weight SD above the identical-preference null on {null['n_attributes_exceeding']} of "
                 f"{null['n_attributes']} attributes")
    print(f"{line} -> {Path(args.out) / 'analysis.json'}")
    return 0


def run_reweight(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rmeval.judges.pipeline import reweight_judgments
    from rmeval.judges.reweight import gain_line

    baselines = None
    if args.baselines:
        from rmeval.judges.baselines import BaselineSettings

        baselines = BaselineSettings(model=args.baseline_model, judge=args.baseline_judge,
                                     kinds=tuple(csv(args.baselines)), attributes_file=args.attributes_file,
                                     rubric_k=args.rubric_k, lora_budget=args.lora_budget, lora_steps=args.lora_steps,
                                     lora_lr=args.lora_lr, lora_batch_size=args.lora_batch_size,
                                     max_length=args.max_length, batch_size=args.batch_size, device=args.device,
                                     seed=args.seed)
    res = reweight_judgments(args.judgments, args.items, args.out, budgets=ints(args.budgets),
                             n_repeats=args.n_repeats, top_k=ints(args.top_k), seed=args.seed, baselines=baselines,
                             **wandb_target(args))
    for j, jr in res["judges"].items():
        if jr["mean_gain"] is not None:
            n = sum(r.get("gain") is not None for r in jr["sources"].values())
            print(gain_line(f"{j} (mean over {n} sources)", jr))
    sm = res["summary"]
    if sm["n_cells"]:
        print(gain_line(f"all judges (mean over {sm['n_cells']} judge-source cells)", sm)
              + f"; {sm['n_judges_improved']} of {sm['n_judges']} judges improve")
    print(f"-> {Path(args.out) / 'reweight.json'}")
    return 0
