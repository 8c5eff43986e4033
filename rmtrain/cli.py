"""`rmtrain`: thin command line over rmtrain's Python API."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from rmcore.errors import ConfigError, DataError
from rmtrain.config import load_sweep, load_train_config, parse_override


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
    po = sub.add_parser("policy", help="train a LoRA policy against a reward model (grpo, rloo; ppo via OpenRLHF)")
    _common(po)
    po.add_argument("--reward-model", required=True,
                    help="reward model checkpoint dir, or a name from the recipe's reward_models")
    po.add_argument("--environment", required=True, help="clean | perturbed")
    po.add_argument("--output-dir", help="default: output_root/<reward model name>/<environment>")
    po.add_argument("--launch", action="store_true", help="ppo: start the reward server and run OpenRLHF")
    pe = sub.add_parser("policy-eval", help="win rate of the perturbed policy over the clean one; Spearman table")
    _common(pe)
    pe.add_argument("--clean", help="clean policy dir (with --perturbed; default: every reward model of the recipe)")
    pe.add_argument("--perturbed", help="perturbed policy dir")
    pe.add_argument("--judge", help="hf:PATH | openai:MODEL (default: evaluation.judge)")
    pe.add_argument("--judge-base-url", help="OpenAI-compatible endpoint base URL")
    pe.add_argument("--out", required=True)
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
    from rmcore.console import quiet_libraries

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
        elif args.command == "policy":
            from pathlib import Path

            from rmtrain.policy.config import load_policy_config
            from rmtrain.policy.evaluate import policy_dir
            from rmtrain.policy.train import train_policy

            ov = _overrides(args)
            ov.pop("output_dir", None)
            cfg = load_policy_config(args.config, {**ov, "environment": args.environment})
            name = args.reward_model
            cfg.reward_model = cfg.reward_models.get(name, name)
            cfg.output_dir = args.output_dir or str(policy_dir(cfg, Path(name).name, cfg.environment))
            summary = train_policy(cfg, force=args.force, launch=args.launch)
            keys = ("algorithm", "environment", "reward_model", "steps", "reward_mean_first", "reward_mean_last",
                    "kl_last", "n_prompts", "train_command")
            print(json.dumps({k: summary[k] for k in keys if k in summary}, indent=2))
        elif args.command == "policy-eval":
            from rmtrain.policy.config import load_policy_config
            from rmtrain.policy.evaluate import evaluate_all, evaluate_pair, judge_from_config

            ov = _overrides(args)
            ov.pop("output_dir", None)
            ov.update({"evaluation.judge": args.judge, "evaluation.judge_base_url": args.judge_base_url})
            cfg = load_policy_config(args.config, ov)
            if bool(args.clean) != bool(args.perturbed):
                raise ConfigError("pass both --clean and --perturbed, or neither (every reward model of the recipe)")
            if args.clean:
                res = evaluate_pair(cfg, args.clean, args.perturbed, args.out, judge_from_config(cfg))
                print(json.dumps({k: res[k] for k in ("win_rate", "ci95", "wins", "ties", "losses", "n_prompts")},
                                 indent=2))
            else:
                from rmeval.winrate import spearman_markdown

                print(spearman_markdown(evaluate_all(cfg, args.out)))
        elif args.command == "check":
            from rmtrain.config import load_recipe

            for r in args.recipes:
                if "policy" in load_recipe(r):
                    from rmtrain.policy.config import load_policy_config

                    pc = load_policy_config(r)
                    print(f"{r}: ok (policy, {pc.training.algorithm}, {len(pc.reward_models)} reward models)")
                elif "sweep" in load_recipe(r):
                    sw = load_sweep(r)
                    from rmtrain.sweep import expand

                    m = expand(sw)
                    print(f"{r}: ok ({len(m.seeds)} runs, {len(m.search)} search runs)")
                else:
                    load_train_config(r)
                    print(f"{r}: ok")
    except (ConfigError, DataError, OSError) as e:
        lines = str(e).strip().splitlines()
        print(f"rmtrain: error: {lines[0] if lines else type(e).__name__}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
