"""`rmtrain`: thin command line over rmtrain's Python API."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from rmtrain.config import load_sweep, load_train_config, parse_override
from rmtrain.errors import ConfigError, DataError


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="recipe YAML (recipes/*.yaml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config key, e.g. training.learning_rate=1e-5 (repeatable)")
    p.add_argument("--wandb-mode", choices=["online", "offline", "disabled"], help="W&B mode")
    p.add_argument("--force", action="store_true", help="retrain even if train_summary.json exists")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="rmtrain", description="Train matched reward-model arms.")
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train one arm")
    _common(t)
    t.add_argument("--arm")
    t.add_argument("--seed", type=int)
    t.add_argument("--model", help="Hub id or local path of the base model")
    t.add_argument("--output-dir")
    s = sub.add_parser("sweep", help="the matched sweep of a recipe's 'sweep' section: search stage, seed "
                                     "stage, audits, summary.csv and report.md (resumable)")
    _common(s)
    s.add_argument("--output-dir", help="sweep directory (default: the recipe's sweep.output_root)")
    s.add_argument("--dry-run", action="store_true", help="print the run matrix and launch commands, run nothing")
    s.add_argument("--executor", default="local", choices=["local", "slurm", "submitit-local"],
                   help="local: this machine; slurm: submitit job arrays (sweep.slurm in the recipe); "
                        "submitit-local: the same job arrays through submitit's local executor")
    s.add_argument("--max-parallel", type=int, help="local executor: runs at once (default sweep.max_parallel)")
    c = sub.add_parser("check", help="validate recipes without training")
    c.add_argument("recipes", nargs="+")
    return ap


def _overrides(args: argparse.Namespace) -> dict:
    ov = dict(parse_override(o) for o in args.overrides)
    if getattr(args, "wandb_mode", None):
        ov["wandb.mode"] = args.wandb_mode
    out_key = "sweep.output_root" if args.command == "sweep" else "output_dir"
    for flag, key in (("arm", "arm"), ("seed", "seed"), ("model", "model.name_or_path"), ("output_dir", out_key)):
        v = getattr(args, flag, None)
        if v is not None:
            ov[key] = v
    return ov


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from rmtrain.console import quiet_libraries

    quiet_libraries()
    args = build_parser().parse_args(argv)
    try:
        if args.command == "train":
            from rmtrain.runs import train_run

            cfg = load_train_config(args.config, _overrides(args))
            summary = train_run(cfg, force=args.force)
            print(json.dumps({k: summary[k] for k in ("arm", "seed", "model", "n_train_pairs",
                                                      "heldout_pair_accuracy", "heldout_rmse", "score_sd")}, indent=2))
        elif args.command == "sweep":
            from rmtrain.sweep import run_sweep

            sweep = load_sweep(args.config, _overrides(args))
            run_sweep(sweep, executor=args.executor, max_parallel=args.max_parallel, dry_run=args.dry_run,
                      force=args.force)
        elif args.command == "check":
            from rmtrain.config import load_recipe

            for r in args.recipes:
                if "sweep" in load_recipe(r):
                    sw = load_sweep(r)
                    from rmtrain.sweep import expand

                    m = expand(sw)
                    print(f"{r}: ok ({len(m.seeds)} runs, {len(m.search)} search runs)")
                else:
                    load_train_config(r)
                    print(f"{r}: ok")
    except (ConfigError, DataError) as e:
        print(f"rmtrain: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
