"""``rmtrain policy`` (a LoRA policy trained against a reward model: GRPO, RLOO; PPO via OpenRLHF)
and ``rmtrain policy-eval`` (win rate of the perturbed policy over the clean one, Spearman table)."""

from __future__ import annotations

import argparse
import json

from rmcore.errors import ConfigError
from rmtrain.cli.flags import add_common, overrides

TRAIN_KEYS = ("algorithm", "environment", "reward_model", "steps", "reward_mean_first", "reward_mean_last",
              "kl_last", "n_prompts", "rollouts", "resumed_from", "train_command")
PAIR_KEYS = ("win_rate", "ci95", "wins", "ties", "losses", "n_prompts")


def add_placement(p: argparse.ArgumentParser, what: str) -> None:
    from rmcore.device import DTYPES

    p.add_argument("--device", default=None,
                   help=f"{what}: auto (this process's GPU where CUDA is, else cpu), cpu, cuda, cuda:N "
                        "(default: the recipe's, auto)")
    p.add_argument("--dtype", default=None, choices=list(DTYPES),
                   help=f"{what}: auto = bfloat16 on a GPU, float32 on the CPU (default: the recipe's, auto)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    po = sub.add_parser("policy", help="train a LoRA policy against a reward model (grpo, rloo; ppo via OpenRLHF)")
    add_common(po)
    po.add_argument("--reward-model", required=True,
                    help="a name from the recipe (reward_models, reward_models_from.arms) or a checkpoint dir")
    po.add_argument("--environment", required=True, help="clean | perturbed")
    po.add_argument("--output-dir", help="default: output_root/<reward model name>/<environment>")
    po.add_argument("--launch", action="store_true",
                    help="ppo: start the reward server, run OpenRLHF, write policy_summary.json")
    po.add_argument("--collect", action="store_true",
                    help="ppo: write policy_summary.json from the OpenRLHF run's train.log and adapter")
    add_placement(po, "the reward model")
    po.set_defaults(func=run)
    pe = sub.add_parser("policy-eval", help="win rate of the perturbed policy over the clean one; Spearman table")
    add_common(pe)
    pe.add_argument("--clean", help="clean policy dir (with --perturbed; default: every reward model of the recipe)")
    pe.add_argument("--perturbed", help="perturbed policy dir")
    pe.add_argument("--judge", help="hf:PATH | openai:MODEL (default: evaluation.judge)")
    pe.add_argument("--judge-base-url", help="OpenAI-compatible endpoint base URL")
    pe.add_argument("--out", required=True)
    add_placement(pe, "the policies' generation and an hf: judge")
    pe.set_defaults(func=run_eval)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rmtrain.policy.config import load_policy_config
    from rmtrain.policy.evaluate import policy_dir
    from rmtrain.policy.train import train_policy

    ov = overrides(args)
    ov.pop("output_dir", None)  # the policy's directory is set below, from the reward model's name
    for key in ("training", "openrlhf"):
        ov.update({f"{key}.reward_device": args.device, f"{key}.reward_dtype": args.dtype})
    cfg = load_policy_config(args.config, {**ov, "environment": args.environment})
    name = args.reward_model
    cfg.reward_model = cfg.reward_model_path(name)
    cfg.output_dir = args.output_dir or str(policy_dir(cfg, Path(name).name, cfg.environment))
    if args.collect:
        from rmtrain.policy.openrlhf import collect_ppo

        summary = collect_ppo(cfg.output_dir)
    else:
        collect = ["rmtrain", "policy", "--config", args.config, "--reward-model", name, "--environment",
                   args.environment, "--output-dir", cfg.output_dir, *[a for o in args.overrides for a in ("--set", o)],
                   "--collect"]
        summary = train_policy(cfg, force=args.force, launch=args.launch, collect_command=collect)
    print(json.dumps({k: summary[k] for k in TRAIN_KEYS if k in summary}, indent=2))
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from rmtrain.policy.config import load_policy_config
    from rmtrain.policy.evaluate import evaluate_all, evaluate_pair, judge_from_config

    ov = overrides(args)
    ov.pop("output_dir", None)  # the evaluation writes to --out
    ov.update({"evaluation.judge": args.judge, "evaluation.judge_base_url": args.judge_base_url,
               "evaluation.device": args.device, "evaluation.dtype": args.dtype})
    cfg = load_policy_config(args.config, ov)
    if bool(args.clean) != bool(args.perturbed):
        raise ConfigError("pass both --clean and --perturbed, or neither (every reward model of the recipe)")
    if args.clean:
        res = evaluate_pair(cfg, args.clean, args.perturbed, args.out, judge_from_config(cfg))
        print(json.dumps({k: res[k] for k in PAIR_KEYS}, indent=2))
    else:
        from rmeval.experiments.winrate import spearman_markdown

        print(spearman_markdown(evaluate_all(cfg, args.out)))
    return 0
