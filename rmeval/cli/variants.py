"""``rmeval variants``: paraphrases or related tasks for every prompt of a rating set, written as
the jsonl the paraphrase and related conditions read (rmeval.generators)."""

from __future__ import annotations

import argparse
from typing import Any

from rmcore.errors import ConfigError
from rmeval.cli.flags import add_placement, placement


def add_parser(sub: argparse._SubParsersAction) -> None:
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
    add_placement(v)  # where an hf: generator runs
    v.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmcore.data.registry import load_data
    from rmeval.generators import make_generator, write_variants

    where = placement(args)  # a bad --device fails before the data is read
    rs = load_data(args.data, args.max_prompts, args.seed)
    kind, _, model = args.generator.partition(":")
    kwargs: dict[str, Any] = {"seed": args.seed}
    if kind in ("hf", "openai"):
        if not model:
            raise ConfigError(f"--generator {kind} needs a model: {kind}:MODEL")
        kwargs["model"] = model
        if kind == "hf":
            from rmcore.modeling import check_model_name

            check_model_name(model, "--generator hf:MODEL")
            where.resolve()  # an unavailable device is an error here, not after loading the model
            kwargs["placement"] = where
        if kind == "openai" and args.base_url:
            kwargs["base_url"] = args.base_url
    elif kind == "file":
        raise ConfigError("--generator file reads variants; it cannot write them")
    texts = make_generator(kind, **kwargs).generate(rs.prompts, args.task, args.n)
    path = write_variants(texts, args.out)
    missing = sum(1 for p in rs.prompts if not texts.get(p.prompt_id))
    print(f"wrote {sum(len(v) for v in texts.values())} {args.task} texts for {len(rs.prompts) - missing} prompts "
          f"to {path} ({missing} prompts got none)")
    return 0
