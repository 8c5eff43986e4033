"""Training environments as files a user can read before training.

``build_environment`` writes ``OUT/environment/{clean|perturbed}.jsonl``, one row per training
prompt, and ``heldout.jsonl`` (clean prompts kept out of training for ``policy-eval``):

- ``messages``: the conversation the policy is prompted with;
- ``reward_messages``: the conversation the reward model scores the response against;
- ``perturbation``: the controlled perturbation code applied to the last user turn, or null;
- ``style``: the stylized feature the policy was asked for, or null.

``clean`` is the prompt pool as is. ``perturbed`` (Reward Auditor §5.2.1) replaces a seeded share
``controlled_fraction`` of the prompts by a controlled perturbation of themselves (EF PH IU IW CN,
rmeval.perturbations, cycled so each code gets an equal share), seen by both the policy and the
reward model; and appends to a seeded share ``stylized_fraction`` of the prompts an instruction
asking for one stylized feature (ST LE SP LC SLC, cycled likewise). The instruction is seen by the
policy only: the reward model judges the response as a reply to the user's prompt, which is what
exposes a reward model that rewards the style itself. Both environments hold the same prompts in
the same order, so they train on the same number of prompts and steps.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from rmcore.data.loading import load_rating_set
from rmcore.errors import ConfigError, DataError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.io.tables import read_jsonl_rows
from rmcore.settings.registry import did_you_mean
from rmeval.perturbations import PROMPT_PERTURBATIONS, RESPONSE_PERTURBATIONS, item_seed, perturb_prompt
from rmeval.perturbations.controlled import DEFAULT_LANGUAGE
from rmtrain.policy.config import ENVIRONMENTS, EnvironmentSettings, PolicyConfig


def rollout_instruction(code: str) -> str:
    """Instruction augmentation at rollout: what the policy is asked for, one stylized feature per
    prompt (the code's ``rollout``, ``rmeval.perturbations.RESPONSE_PERTURBATIONS``). It asks for a
    *response* with the feature; the code's ``instruction`` asks a rewriter to restyle a text."""
    return str(RESPONSE_PERTURBATIONS.lookup(code).rollout).format(language=DEFAULT_LANGUAGE)


def split_prompts(cfg: PolicyConfig) -> tuple[list[Any], list[Any]]:
    """(train, heldout) PromptRecords: a seeded split by prompt, independent of the run seed."""
    rs = load_rating_set(cfg.data)
    prompts = list(rs.prompts)
    if not prompts:
        raise DataError(f"prompt pool {cfg.data} is empty")
    order = np.random.default_rng(cfg.split_seed).permutation(len(prompts))
    n_held = min(cfg.heldout_prompts, len(prompts) - 1)
    held = [prompts[i] for i in order[:n_held]]
    train = [prompts[i] for i in order[n_held:]]
    if cfg.n_train_prompts is not None:
        train = train[: cfg.n_train_prompts]
    return train, held


def _assign(ids: list[str], codes: list[str], fraction: float, seed: int) -> list[str | None]:
    """A seeded ``round(fraction * n)`` of the rows get a code; codes are cycled over the chosen rows
    (each code gets an equal share, +-1), in a seeded order."""
    n = len(ids)
    k = int(round(fraction * n))
    rng = np.random.default_rng(seed)
    chosen = rng.permutation(n)[:k]
    out: list[str | None] = [None] * n
    offset = int(rng.integers(len(codes))) if codes else 0
    for j, i in enumerate(sorted(chosen.tolist())):
        out[i] = codes[(j + offset) % len(codes)]
    return out


def _with_last_user(messages: list[dict[str, str]], text: str) -> list[dict[str, str]]:
    msgs = [dict(m) for m in messages]
    for m in reversed(msgs):
        if m["role"] == "user":
            m["content"] = text
            break
    return msgs


def environment_rows(prompts: list[Any], environment: str, settings: EnvironmentSettings) -> list[dict[str, Any]]:
    if environment not in ENVIRONMENTS:
        raise ConfigError(f"unknown environment '{environment}': use one of {', '.join(ENVIRONMENTS)}")
    for code in settings.controlled:
        if code not in PROMPT_PERTURBATIONS:  # the built-in five and any registered code
            raise ConfigError(f"environments.controlled: unknown code '{code}'; known: "
                              f"{', '.join(PROMPT_PERTURBATIONS)}" + did_you_mean(code, PROMPT_PERTURBATIONS))
    offered = [c for c, p in RESPONSE_PERTURBATIONS.items() if p.rollout is not None]
    for code in settings.stylized:
        if code not in offered:  # the built-in five and any registered code with a rollout instruction
            raise ConfigError(f"environments.stylized: unknown code '{code}'; known: {', '.join(offered)}")
    ids = [p.prompt_id for p in prompts]
    if environment == "clean":
        pert: list[str | None] = [None] * len(ids)
        style: list[str | None] = [None] * len(ids)
    else:
        pert = _assign(ids, list(settings.controlled), settings.controlled_fraction, settings.seed)
        style = _assign(ids, list(settings.stylized), settings.stylized_fraction, settings.seed + 1)
    rows = []
    for p, pc, sc in zip(prompts, pert, style):
        messages = [{"role": m["role"], "content": m["content"]} for m in p.messages]
        if pc is not None:
            opts = settings.perturbation_options.get(pc, {})
            text = perturb_prompt(pc, p.last_user_text, item_seed(settings.seed, pc, p.prompt_id), **opts)
            messages = _with_last_user(messages, text)
        reward_messages = messages
        if sc is not None:
            instruction = rollout_instruction(sc)
            last = next(m["content"] for m in reversed(messages) if m["role"] == "user")
            messages = _with_last_user(messages, f"{last}\n\n{instruction}")
        rows.append({"prompt_id": p.prompt_id, "messages": messages, "reward_messages": reward_messages,
                     "perturbation": pc, "style": sc})
    return rows


def write_rows(path: str | os.PathLike, rows: list[dict[str, Any]]) -> Path:
    return atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """An environment file's rows (written by build_environment; `rmtrain policy` writes them first)."""
    return [row for _, row in read_jsonl_rows(path, "environment file", ("prompt_id", "messages", "reward_messages"))]


def build_environment(cfg: PolicyConfig, out_dir: str | os.PathLike) -> dict[str, Any]:
    """Write the environment's training rows and the held-out clean prompts; return counts."""
    out = Path(out_dir)
    train, held = split_prompts(cfg)
    rows = environment_rows(train, cfg.environment, cfg.environments)
    write_rows(out / f"{cfg.environment}.jsonl", rows)
    write_rows(out / "heldout.jsonl", environment_rows(held, "clean", cfg.environments))
    counts: dict[str, Any] = {
        "environment": cfg.environment, "n_prompts": len(rows), "n_heldout": len(held),
        "perturbation": {c: sum(r["perturbation"] == c for r in rows) for c in cfg.environments.controlled},
        "style": {c: sum(r["style"] == c for r in rows) for c in cfg.environments.stylized},
        "settings": {k: v for k, v in vars(cfg.environments).items()},
    }
    counts["n_perturbed"] = sum(r["perturbation"] is not None for r in rows)
    counts["n_styled"] = sum(r["style"] is not None for r in rows)
    atomic_write_json(out / f"{cfg.environment}.summary.json", counts)
    return counts
