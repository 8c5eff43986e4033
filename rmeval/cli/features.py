"""``rmeval features``: the prompt table and the probes' features of a data set (rmeval.audit.features),
for ``rmeval stats --features`` (``rmeval audit --probe-*`` computes the same within an audit)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rmcore.data.loading import load_data
from rmcore.settings.commands import add_command
from rmcore.settings.fields import nested, option, output_folder
from rmeval.audit.settings import FeatureSettings
from rmeval.cli.flags import DATA_HELP

# every setting of the probes' models but the learners (the statistics' part, rmeval stats)
MODEL_FLAGS = ("embedders", "base_model", "n_topics", "batch_size", "max_length", "device", "dtype")


@dataclass
class FeaturesCommand:
    """``rmeval features``' settings: the data set, the output, and the probes' models (``FeatureSettings``)."""

    data: str = option("", required=True, help=DATA_HELP)
    out: str = option("", required=True, parse=output_folder("--out"), help="output directory")
    max_prompts: int | None = option(None, ge=1, help="seeded sample of this many prompts")
    seed: int = option(0, ge=0, help="prompt sample and k-means seed")
    features: FeatureSettings = nested(FeatureSettings, only=MODEL_FLAGS)


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "features", FeaturesCommand, run,
                help="write the prompt table and the feature probes' features of a data set")


def run(s: FeaturesCommand) -> int:
    # the pipeline (pandas, scipy): --help loads no tables
    from rmeval.audit.features import write_features

    s.features.validate()
    rating_set = load_data(s.data, s.max_prompts, s.seed)
    tables = write_features(rating_set, s.features, s.out, seed=s.seed)
    f, pf = tables["features"], tables["prompt_features"]
    print(f"{len(tables['prompts'])} prompts, {len(f)} responses: "
          f"{sum(c.startswith('emb_') for c in f.columns)} embedding and "
          f"{sum(c.startswith('txt_') for c in f.columns)} text features per response, "
          f"{sum(c.startswith('pemb_') for c in pf.columns)} embedding and "
          f"{sum(c.startswith('hid_') for c in pf.columns)} hidden-state features per prompt -> {s.out}")
    return 0
