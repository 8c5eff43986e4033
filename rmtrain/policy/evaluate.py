"""``rmtrain policy-eval``: the perturbed policy of a reward model against its clean policy.

Both policies (base model + LoRA adapter from ``rmtrain policy``) answer the same held-out clean
prompts (``environment/heldout.jsonl`` of the clean run, ``evaluation.n_prompts`` of them, 100 by
default as in the study), greedily so a rerun gives the same texts; responses are cached per policy
in ``<policy dir>/eval_responses.jsonl``. A pairwise judge (``rmeval.experiments.winrate``) compares them in
both orders; ``OUT/winrate.json`` holds the win rate with its bootstrap interval and the counts,
``OUT/judgments.jsonl`` every verdict. Across reward models (``evaluate_all``), each one's win
rate is set against its suitability risk and accuracy change: ``spearman.json``, ``spearman.md``
and ``spearman.png``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io.files import atomic_write_json, atomic_write_text
from rmcore.models.device import Placement, dtype_name, resolve_device, resolve_dtype
from rmcore.models.modeling import load_tokenizer, resolve_model_path
from rmeval.backends.spec import is_local, parse_backend_spec
from rmeval.experiments.winrate import (
    PairwiseJudge,
    make_judge,
    read_suitability,
    scatter_plot,
    spearman_markdown,
    spearman_table,
    win_rate,
)
from rmeval.scoring.judge import conversation_text
from rmtrain.policy.config import PolicyConfig
from rmtrain.policy.environment import read_rows
from rmtrain.policy.summary import SUMMARY_FILE
from rmtrain.policy.train import check_policy_model, check_prompt_format, policy_prompt

log = logging.getLogger(__name__)
RESPONSES_FILE = "eval_responses.jsonl"


def _summary(policy_dir: Path) -> dict[str, Any]:
    """{policy, adapter, reward_model} of a policy run: its policy_summary.json (trl runs write it;
    a PPO run's comes from `rmtrain policy --collect` after OpenRLHF)."""
    p = policy_dir / SUMMARY_FILE
    if not p.exists():
        ppo = (policy_dir / "openrlhf" / "plan.json").exists()
        raise ConfigError(f"{p}: not found; " + ("collect the OpenRLHF run first: `rmtrain policy ... --collect` "
                                                 "(train_ppo.sh ends with it)" if ppo else
                                                 "train the policy with `rmtrain policy` first"))
    s = json.loads(p.read_text())
    if not s.get("adapter"):
        raise ConfigError(f"{policy_dir}: no saved adapter (training.save_adapter was false, or OpenRLHF saved none "
                          "in openrlhf/policy)")
    return s


def generate_responses(cfg: PolicyConfig, policy_dir: str | os.PathLike, rows: list[dict[str, Any]]) -> dict[str, str]:
    """prompt_id -> response of the policy in ``policy_dir``; cached in the directory."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    policy_dir = Path(policy_dir)
    cache = policy_dir / RESPONSES_FILE
    done: dict[str, str] = {}
    if cache.exists():
        for line in cache.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                done[r["prompt_id"]] = r["response"]
    todo = [r for r in rows if r["prompt_id"] not in done]
    if todo:
        s = _summary(policy_dir)
        adapter = Path(s["adapter"])
        tok = load_tokenizer(str(adapter))
        check_prompt_format(cfg, tok)
        device = resolve_device(cfg.evaluation.device)
        base = AutoModelForCausalLM.from_pretrained(resolve_model_path(s["policy"]),
                                                    dtype=resolve_dtype(cfg.evaluation.dtype, device))
        model = PeftModel.from_pretrained(base, str(adapter)).to(device).eval()
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        torch.manual_seed(cfg.evaluation.seed)
        for i in range(0, len(todo), 8):
            chunk = todo[i:i + 8]
            texts = []
            for r in chunk:
                p = policy_prompt(r["messages"], cfg.policy.prompt_format)
                texts.append(tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
                             if isinstance(p, list) else p)
            special = cfg.policy.prompt_format != "chat"  # a chat template already holds BOS
            enc = [tok(t, add_special_tokens=special)["input_ids"] for t in texts]
            width = max(len(e) for e in enc)
            ids = torch.tensor([[pad] * (width - len(e)) + e for e in enc])
            mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc])
            with torch.inference_mode():
                gen = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=False,
                                     pad_token_id=pad, max_new_tokens=cfg.evaluation.max_new_tokens,
                                     repetition_penalty=cfg.training.repetition_penalty)
            for r, g in zip(chunk, gen[:, width:].cpu()):
                done[r["prompt_id"]] = tok.decode(g, skip_special_tokens=True).strip()
        atomic_write_text(cache, "".join(json.dumps({"prompt_id": pid, "response": t}, ensure_ascii=False) + "\n"
                                         for pid, t in done.items()))
    return {r["prompt_id"]: done[r["prompt_id"]] for r in rows}


def heldout_rows(cfg: PolicyConfig, clean_dir: Path) -> list[dict[str, Any]]:
    rows = read_rows(clean_dir / "environment" / "heldout.jsonl")
    if not rows:
        raise ConfigError(f"{clean_dir}: no held-out prompts (set heldout_prompts > 0 in the recipe)")
    return rows[: cfg.evaluation.n_prompts]


def evaluate_pair(cfg: PolicyConfig, clean_dir: str | os.PathLike, perturbed_dir: str | os.PathLike,
                  out: str | os.PathLike, judge: PairwiseJudge) -> dict[str, Any]:
    clean_dir, perturbed_dir, out = Path(clean_dir), Path(perturbed_dir), Path(out)
    rows = heldout_rows(cfg, clean_dir)
    clean = generate_responses(cfg, clean_dir, rows)
    pert = generate_responses(cfg, perturbed_dir, rows)
    prompts = [conversation_text(r["messages"]) for r in rows]
    first = judge.judge([(p, pert[r["prompt_id"]], clean[r["prompt_id"]]) for p, r in zip(prompts, rows)])
    second = judge.judge([(p, clean[r["prompt_id"]], pert[r["prompt_id"]]) for p, r in zip(prompts, rows)])
    atomic_write_text(out / "judgments.jsonl", "".join(
        json.dumps({"prompt_id": r["prompt_id"], "perturbed": pert[r["prompt_id"]], "clean": clean[r["prompt_id"]],
                    "verdict_perturbed_first": v1, "verdict_perturbed_second": v2}, ensure_ascii=False) + "\n"
        for r, v1, v2 in zip(rows, first, second)))
    res = win_rate(first, second, n_boot=cfg.evaluation.n_boot, seed=cfg.evaluation.seed)
    res.update({"clean_policy": str(clean_dir), "perturbed_policy": str(perturbed_dir),
                "reward_model": _summary(perturbed_dir).get("reward_model")})
    atomic_write_json(out / "winrate.json", res)
    return res


def policy_dir(cfg: PolicyConfig, name: str, environment: str) -> Path:
    """Where a recipe's policy runs live: ``output_root/<reward model name>/<environment>``."""
    return Path(cfg.output_root) / name / environment


def evaluate_all(cfg: PolicyConfig, out: str | os.PathLike, judge: PairwiseJudge | None = None) -> dict[str, Any]:
    """Win rate per reward model of the recipe, then the Spearman table across them."""
    out = Path(out)
    names = cfg.reward_model_names()
    if not names:
        raise ConfigError("no reward models: name them in the recipe (reward_models: {name: checkpoint}, or "
                          "reward_models_from a sweep)")
    missing = [n for n in names if n not in cfg.evaluation.suitability]
    if missing:
        raise ConfigError(f"evaluation.suitability has no suitability.json for {missing}: run `rmeval suitability` "
                          "on each reward model and list its output under evaluation.suitability")
    rows = []
    for name in names:
        wr_path = out / name / "winrate.json"
        if wr_path.exists():
            wr = json.loads(wr_path.read_text())
        else:
            if judge is None:
                judge = judge_from_config(cfg)
            wr = evaluate_pair(cfg, policy_dir(cfg, name, "clean"), policy_dir(cfg, name, "perturbed"),
                               out / name, judge)
        s = read_suitability(cfg.evaluation.suitability[name])
        rows.append({"name": name, "win_rate": wr["win_rate"], **s})
    table = spearman_table(rows)
    atomic_write_json(out / "spearman.json", table)
    atomic_write_text(out / "spearman.md", spearman_markdown(table))
    scatter_plot(table, out / "spearman.png")
    return table


def judge_from_config(cfg: PolicyConfig) -> PairwiseJudge:
    """``evaluation.judge``: any backend kind that judges (``rmeval.backends.spec``); a local one runs
    where the evaluation runs (``evaluation.device``/``dtype``)."""
    ev = cfg.evaluation
    if not ev.judge:
        raise ConfigError("no judge: set evaluation.judge (hf:PATH or openai:MODEL) or pass --judge")
    spec = parse_backend_spec(ev.judge, what="evaluation.judge")
    placement = None
    if is_local(spec) and spec.value:
        check_policy_model(spec.value, "evaluation.judge")
        device = resolve_device(ev.device)
        placement = Placement(device=str(device), dtype=dtype_name(resolve_dtype(ev.dtype, device)))
    return make_judge(ev.judge, base_url=ev.judge_base_url, max_length=ev.judge_max_length, placement=placement,
                      what="evaluation.judge")
