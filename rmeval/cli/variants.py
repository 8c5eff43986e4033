"""``rmeval variants``: paraphrases or related tasks for every prompt of a rating set, written as
the jsonl the paraphrase and related conditions read, with a summary beside it; paraphrases can be
checked by a judge (``rmeval.audit.variants.write_prompt_variants``)."""

from __future__ import annotations

import argparse

from rmeval.cli.flags import add_placement, placement


def add_parser(sub: argparse._SubParsersAction) -> None:
    from rmeval.backends.generators import RELATED_SUBTYPES

    v = sub.add_parser("variants", help="generate paraphrases or related tasks into a jsonl file")
    v.add_argument("--data", required=True, help="data SPEC")
    v.add_argument("--task", required=True, choices=["paraphrase", "related"])
    v.add_argument("--subtype", default=None, choices=list(RELATED_SUBTYPES),
                   help="related tasks: different (default: another request on the topic), contains (a request "
                        "that contains the original), sub_question (one part of the original)")
    v.add_argument("--generator", default="simulated",
                   help="simulated | hf:MODEL (local path or Hub id) | openai:MODEL (with --base-url) | "
                        "file:PATH (variants written before, to judge again)")
    v.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint base URL of the generator")
    v.add_argument("--n", type=int, default=4, help="variants per prompt")
    v.add_argument("--validity-judge", default=None,
                   help="paraphrases: hf:MODEL | openai:MODEL (with --judge-base-url) asked whether each keeps the "
                        "original's meaning; invalid ones are marked and left out by the paraphrase condition")
    v.add_argument("--judge-base-url", default=None, help="OpenAI-compatible endpoint of the validity judge")
    v.add_argument("--threshold", type=float, default=0.5, help="p(Yes) at or above which a paraphrase is valid")
    v.add_argument("--max-prompts", type=int, default=None)
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--out", required=True, help="output jsonl (the summary goes to OUT.summary.json)")
    add_placement(v)  # where an hf: generator or validity judge runs
    v.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmcore.data.registry import load_data
    from rmeval.audit.variants import VariantSettings, summary_line, write_prompt_variants

    where = placement(args)  # a bad --device fails before the data is read
    settings = VariantSettings(task=args.task, generator=args.generator, base_url=args.base_url, n=args.n,
                               subtype=args.subtype, seed=args.seed, validity_judge=args.validity_judge,
                               judge_base_url=args.judge_base_url, threshold=args.threshold, placement=where)
    settings.check()  # before the data are read
    if "hf:" in f"{args.generator} {args.validity_judge or ''}":
        where.resolve()  # an unavailable device is an error here, not after loading the model
    rs = load_data(args.data, args.max_prompts, args.seed)
    print(summary_line(write_prompt_variants(rs, settings, args.out)))
    return 0
