"""``rmeval variants``: paraphrases or related tasks for every prompt of a rating set, written as
the jsonl the paraphrase and related conditions read, with a summary beside it; paraphrases can be
checked by a judge (``rmeval.audit.variants.write_prompt_variants``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rmcore.data.loading import load_data
from rmcore.settings.commands import add_command
from rmcore.settings.fields import nested, option
from rmeval.audit.settings import PromptVariantSettings
from rmeval.audit.variants import summary_line, write_prompt_variants
from rmeval.backends.spec import is_local


@dataclass
class VariantsCommand:
    """``rmeval variants``' settings: the rating set, the output file, and what is generated and how
    it is checked (``PromptVariantSettings``, with where an hf: generator or validity judge runs)."""

    data: str = option("", required=True, help="data SPEC")
    out: str = option("", required=True, help="output jsonl (the summary goes to OUT.summary.json)")
    max_prompts: int | None = option(None, ge=1, help="seeded sample of this many prompts")
    variants: PromptVariantSettings = nested(PromptVariantSettings)


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "variants", VariantsCommand, run, help="generate paraphrases or related tasks into a jsonl file")


def run(s: VariantsCommand) -> int:
    settings = s.variants
    settings.placement.validate()  # a bad --device fails before the data is read
    settings.check()  # before the data are read
    if any(is_local(spec) for spec in (settings.generator, settings.validity_judge) if spec):
        settings.placement.resolve()  # an unavailable device is an error here, not after loading the model
    rs = load_data(s.data, s.max_prompts, settings.seed)
    print(summary_line(write_prompt_variants(rs, settings, s.out)))
    return 0
