"""``rmeval human``: every ratings-only statistic of a rating set, no model (rmeval.human)."""

from __future__ import annotations

import argparse

from rmcore.errors import ConfigError, DataError
from rmeval.cli.flags import reliabilities


def add_parser(sub: argparse._SubParsersAction) -> None:
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
    h.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """OUT/human.json and OUT/human.md."""
    from rmcore.data.registry import load_data
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
    attrs = [args.attribute] if args.attribute else None
    res = compute_human(human_table(rs), attributes=attrs, n_boot=args.n_boot, seed=args.seed,
                        annotations=annotations, raters_per_rating=args.raters_per_rating,
                        reliabilities=reliabilities(args.reliability), main_attribute=args.attribute)
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
