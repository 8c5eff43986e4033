"""``rmeval human``: every ratings-only statistic of a rating set, no model (rmeval.audit.human.human_audit)."""

from __future__ import annotations

import argparse

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
    from pathlib import Path

    from rmeval.audit.human import HumanSettings, human_audit

    settings = HumanSettings(attribute=args.attribute, annotations=args.annotations,
                             raters_per_rating=args.raters_per_rating, reliabilities=reliabilities(args.reliability),
                             max_prompts=args.max_prompts, n_boot=args.n_boot, seed=args.seed)
    res = human_audit(args.data, settings, args.out)
    main = res["meta"]["main_attribute"]
    r = res["attributes"][main]["share"]["all"]
    print(f"{res['meta']['rating_set']}: {main} share {r['estimate']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}] "
          f"on {r['n_prompts']} prompts -> {Path(args.out) / 'human.md'}")
    return 0
