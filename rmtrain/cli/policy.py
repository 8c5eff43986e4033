"""``rmtrain policy`` (a LoRA policy trained against a reward model: GRPO, RLOO; PPO via OpenRLHF)
and ``rmtrain policy-eval`` (win rate of the perturbed policy over the clean one, Spearman table)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io.files import to_json
from rmcore.models.device import DTYPES
from rmcore.runtime.jobs import is_main_process
from rmcore.settings.commands import add_command, recipe_overrides
from rmcore.settings.fields import option, output_folder
from rmeval.experiments.winrate import spearman_markdown
from rmtrain.cli.flags import RecipeCommand

TRAIN_KEYS = ("algorithm", "environment", "reward_model", "steps", "reward_mean_first", "reward_mean_last",
              "kl_last", "n_prompts", "rollouts", "resumed_from", "train_command")
PAIR_KEYS = ("win_rate", "ci95", "wins", "ties", "losses", "n_prompts")


def _device(what: str, *keys: str) -> Any:
    """``--device`` of ``what``, an override of the recipe keys ``keys``."""
    return option(None, recipe_key=keys,
                  help=f"{what}: auto (this process's GPU where CUDA is, else cpu), cpu, cuda, cuda:N "
                       "(default: the recipe's, auto)")


def _dtype(what: str, *keys: str) -> Any:
    """``--dtype`` of ``what``, an override of the recipe keys ``keys``."""
    return option(None, choices=DTYPES, recipe_key=keys,
                  help=f"{what}: auto = bfloat16 on a GPU, float32 on the CPU (default: the recipe's, auto)")


@dataclass(kw_only=True)
class PolicyCommand(RecipeCommand):
    """``rmtrain policy``'s settings; the reward model's placement overrides the recipe's
    ``training.reward_*`` and ``openrlhf.reward_*`` keys."""

    reward_model: str = option(required=True,
                               help="a name from the recipe (reward_models, reward_models_from.arms) or a "
                                    "checkpoint dir")
    environment: str = option(required=True, recipe_key="environment", help="clean | perturbed")
    # not a recipe override: the policy's directory is set from the reward model's name (run)
    output_dir: str | None = option(None, flag="--out", deprecated=("--output-dir",), metavar="OUT",
                                    parse=output_folder("--out"),
                                    help="policy directory (default: output_root/<reward model name>/<environment>)")
    launch: bool = option(False, help="ppo: start the reward server, run OpenRLHF, write policy_summary.json")
    collect: bool = option(False,
                           help="ppo: write policy_summary.json from the OpenRLHF run's train.log and adapter")
    device: str | None = _device("the reward model", "training.reward_device", "openrlhf.reward_device")
    dtype: str | None = _dtype("the reward model", "training.reward_dtype", "openrlhf.reward_dtype")
    force: bool = option(False, help="retrain from the start even if policy_summary.json or an interrupted "
                                     "run's checkpoints exist")


@dataclass(kw_only=True)
class PolicyEvalCommand(RecipeCommand):
    """``rmtrain policy-eval``'s settings; the judge and placement flags override the recipe's
    ``evaluation`` keys."""

    clean: str | None = option(None,
                               help="clean policy dir (with --perturbed; default: every reward model of the recipe)")
    perturbed: str | None = option(None, help="perturbed policy dir")
    judge: str | None = option(None, recipe_key="evaluation.judge",
                               help="hf:PATH | openai:MODEL (default: evaluation.judge)")
    judge_base_url: str | None = option(None, recipe_key="evaluation.judge_base_url",
                                        help="OpenAI-compatible endpoint base URL")
    out: str = option(required=True, parse=output_folder("--out"), help="output directory of the evaluation")
    device: str | None = _device("the policies' generation and an hf: judge", "evaluation.device")
    dtype: str | None = _dtype("the policies' generation and an hf: judge", "evaluation.dtype")
    force: bool = option(False, help="no effect here (accepted like the other rmtrain commands' --force): the "
                                     "policies' cached responses and, without --clean, each reward model's "
                                     "winrate.json are reused; delete them to recompute")


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "policy", PolicyCommand, run,
                help="train a LoRA policy against a reward model (grpo, rloo; ppo via OpenRLHF)")
    add_command(sub, "policy-eval", PolicyEvalCommand, run_eval,
                help="win rate of the perturbed policy over the clean one; Spearman table")


def run(s: PolicyCommand) -> int:
    from pathlib import Path

    # torch: --help stays cheap
    from rmtrain.policy.config import load_policy_config
    from rmtrain.policy.evaluate import policy_dir
    from rmtrain.policy.train import train_policy

    ov = recipe_overrides(s)
    ov.pop("output_dir", None)  # the policy's directory is set below, from the reward model's name
    cfg = load_policy_config(s.config, ov)
    name = s.reward_model
    cfg.reward_model = cfg.reward_model_path(name)
    cfg.output_dir = s.output_dir or str(policy_dir(cfg, Path(name).name, cfg.environment))
    if s.collect:
        # torch: --help stays cheap
        from rmtrain.policy.openrlhf import collect_ppo

        summary = collect_ppo(cfg.output_dir)
    else:
        collect = ["rmtrain", "policy", "--config", s.config, "--reward-model", name, "--environment",
                   s.environment, "--out", cfg.output_dir, *[a for o in s.overrides for a in ("--set", o)],
                   "--collect"]
        summary = train_policy(cfg, force=s.force, launch=s.launch, collect_command=collect)
    if is_main_process():  # under accelerate launch every process gets here: the result is printed once
        print(to_json({k: summary[k] for k in TRAIN_KEYS if k in summary}))
    return 0


def run_eval(s: PolicyEvalCommand) -> int:
    # torch: --help stays cheap
    from rmtrain.policy.config import load_policy_config
    from rmtrain.policy.evaluate import evaluate_all, evaluate_pair, judge_from_config

    ov = recipe_overrides(s)
    ov.pop("output_dir", None)  # the evaluation writes to --out
    cfg = load_policy_config(s.config, ov)
    if bool(s.clean) != bool(s.perturbed):
        raise ConfigError("pass both --clean and --perturbed, or neither (every reward model of the recipe)")
    if s.clean:
        res = evaluate_pair(cfg, s.clean, s.perturbed, s.out, judge_from_config(cfg))
        print(to_json({k: res[k] for k in PAIR_KEYS}))
    else:
        print(spearman_markdown(evaluate_all(cfg, s.out)))
    return 0
