"""PPO through OpenRLHF, driven from outside (it pins its own transformers and DeepSpeed, so it
cannot share matchrm's environment).

``prepare_ppo`` writes, under ``OUT/openrlhf/``:
- ``prompts.jsonl``: the environment's rows as OpenRLHF prompt data: ``messages`` (the policy's
  conversation; ``--data.apply_chat_template``) or ``prompt`` (plain text), and ``label``, the JSON
  conversation the reward model scores against (``--data.label_key label``; the reward server reads
  it, so the rollout's style instruction never reaches the reward model);
- ``reward_server.sh`` (``rmeval serve-reward``) and ``train_ppo.sh``: start the reward server,
  wait for its ``/health``, run ``openrlhf.cli.train_ppo_ray`` with its output also in
  ``train.log``, stop the server, collect ``policy_summary.json``; ``plan.json``: the command lines
  as argument lists, the layout's GPU count per role, the study's settings and how each maps to a
  flag.
With ``launch`` it does what ``train_ppo.sh`` does, from Python.

Flags are those of ``openrlhf/cli/train_ppo_ray.py`` in OpenRLHF 0.11 (hierarchical
``--actor.adam.lr`` style); a test parses the command with the parser that file defines. Three
of them need care. ``--ds.lora.target_modules`` has ``nargs="*"``: any value arrives as a list,
and peft reads a list as module names, so ``all-linear`` (peft's "every linear layer but the
output", and OpenRLHF's default as a bare string) is written by leaving the flag out. OpenRLHF
creates its W&B logger only when ``--logger.wandb.key`` is set: the scripts pass
``$WANDB_API_KEY`` from the environment when they run, so the key is never written to a file.
The layout (``openrlhf.layout``) decides the placement flags: ``colocated`` puts actor, reference,
critic and the vLLM engines on the same 8 GPUs with vLLM and DeepSpeed sleep mode
(``--train.colocate_all``), ``multi_node`` gives them their own GPUs on a larger cluster. The
study's repetition penalty (1.1) has no flag (rollouts use temperature and top-p only), so the
plan records it under ``not_supported``.

``collect_ppo`` reads what OpenRLHF wrote: the per-step status it logs (``✨ Global step N:
{...}``, ``PPOTrainer.fit``; ``rollout/reward_mean``, ``kl``, ``rollout/response_length_mean``)
from ``train.log``, and the LoRA adapter it saves in ``--ckpt.output_dir``; it writes
``policy_summary.json`` with the keys a trl run writes, so ``policy-eval`` reads every run alike.
A rerun of ``train_ppo.sh`` resumes from OpenRLHF's last DeepSpeed checkpoint
(``--ckpt.save_steps``, ``--ckpt.load_enable``) and appends to ``train.log``.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError, DataError
from rmcore.io.files import atomic_write_json, atomic_write_text, check_path
from rmcore.models.formatting import plain_prompt
from rmcore.models.modeling import resolve_model_path
from rmcore.runtime.checkpoints import scoring_max_length, training_max_length
from rmcore.runtime.jobs import wait_for_health
from rmtrain.policy.config import PolicyConfig
from rmtrain.policy.environment import read_rows
from rmtrain.policy.summary import SUMMARY_FILE, reward_model_tags, tenth_means

log = logging.getLogger(__name__)

# openrlhf/cli/train_ppo_ray.py (OpenRLHF 0.11.2): the flags this module writes; extra_args are
# checked against it too. tests/rmtrain/test_policy_openrlhf_parser.py checks every one against the parser.
OPENRLHF_FLAGS = frozenset({
    "--ref.num_nodes", "--ref.num_gpus_per_node", "--actor.num_nodes", "--actor.num_gpus_per_node",
    "--critic.num_nodes", "--critic.num_gpus_per_node", "--vllm.num_engines", "--vllm.tensor_parallel_size",
    "--vllm.gpu_memory_utilization", "--vllm.enable_sleep", "--ds.enable_sleep", "--train.colocate_all",
    "--train.colocate_actor_ref", "--ds.adam_offload", "--actor.model_name_or_path", "--reward.remote_url",
    "--ckpt.output_dir", "--ckpt.path", "--ckpt.save_hf", "--ckpt.save_steps", "--ckpt.load_enable",
    "--actor.adam.lr", "--critic.adam.lr", "--actor.max_norm", "--critic.max_norm", "--algo.advantage.gamma",
    "--algo.advantage.estimator", "--rollout.n_samples_per_prompt", "--rollout.temperature", "--rollout.top_p",
    "--rollout.max_new_tokens", "--train.max_epochs", "--train.num_episodes", "--train.batch_size",
    "--rollout.batch_size", "--train.micro_batch_size", "--rollout.micro_batch_size", "--train.seed",
    "--data.max_len", "--data.prompt_dataset", "--data.input_key", "--data.label_key", "--data.apply_chat_template",
    "--ds.zero_stage", "--ds.param_dtype", "--ds.lora.rank", "--ds.lora.alpha", "--ds.lora.dropout",
    "--ds.lora.target_modules", "--algo.kl.init_coef", "--actor.gradient_checkpointing_enable",
    "--logger.wandb.project", "--logger.wandb.group", "--logger.wandb.key", "--logger.wandb.org",
    "--logger.wandb.run_name", "--ds.packing_samples", "--data.max_samples", "--actor.eps_clip",
    "--ds.attn_implementation", "--vllm.enforce_eager", "--train.dynamic_batch_enable",
    "--train.max_tokens_per_gpu", "--reward.normalize_enable", "--ckpt.max_num", "--logger.tensorboard_dir",
})
WANDB_KEY_FLAG = "--logger.wandb.key"
WANDB_KEY_ENV = "WANDB_API_KEY"
TRAIN_LOG = "train.log"
STEP_LINE = re.compile(r"Global step (\d+): (\{.*\})\s*$")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _flag(args: list[str], name: str, *values: Any) -> None:
    if name not in OPENRLHF_FLAGS:
        raise ConfigError(f"'{name}' is not a train_ppo_ray flag of OpenRLHF 0.11")
    args.append(name)
    args.extend(str(v) for v in values)


def prompt_records(rows: list[dict[str, Any]], prompt_format: str) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        rec: dict[str, Any] = {"prompt_id": r["prompt_id"],
                               "label": json.dumps(r["reward_messages"], ensure_ascii=False)}
        if prompt_format == "chat":
            rec["messages"] = r["messages"]
        else:
            rec["prompt"] = plain_prompt(r["messages"])
        out.append(rec)
    return out


def reward_url(cfg: PolicyConfig, path: str = "get_reward") -> str:
    return f"http://{cfg.openrlhf.reward_host}:{cfg.openrlhf.reward_port}/{path}"


def reward_length(cfg: PolicyConfig) -> int | None:
    """Tokens per text the reward server scores: ``training.reward_max_length``, else the length the
    reward model was trained with (``rmcore.runtime.checkpoints.scoring_max_length``, which says a value that
    differs); None: neither, the model's own limit."""
    return scoring_max_length(cfg.reward_model, cfg.training.reward_max_length)


def reward_server_command(cfg: PolicyConfig, max_length: int | None) -> list[str]:
    """``rmeval serve-reward`` of the reward model, at ``max_length`` tokens (``reward_length``; None: the
    server's own default, the model's limit)."""
    o = cfg.openrlhf
    length = ["--max-length", str(max_length)] if max_length is not None else []
    return ["rmeval", "serve-reward", "--checkpoint", str(Path(str(cfg.reward_model)).resolve()),
            "--host", o.reward_host, "--port", str(o.reward_port), *length,
            "--device", o.reward_device, "--dtype", o.reward_dtype]


def lora_flags(cfg: PolicyConfig) -> list[str]:
    """The LoRA flags as OpenRLHF parses them (module docstring: the all-linear trap)."""
    lora, a = cfg.policy.lora, []
    _flag(a, "--ds.lora.rank", lora.r)
    _flag(a, "--ds.lora.alpha", lora.alpha)
    _flag(a, "--ds.lora.dropout", lora.dropout)
    targets = lora.target_modules
    if isinstance(targets, str):
        if targets != "all-linear":
            raise ConfigError(f"policy.lora.target_modules '{targets}': OpenRLHF takes all-linear or a list of names")
        return a  # OpenRLHF's default: the bare string, which peft reads as every linear layer
    if "all-linear" in targets:
        raise ConfigError("policy.lora.target_modules: write all-linear alone, not in a list (peft would look for a "
                          "module named 'all-linear')")
    _flag(a, "--ds.lora.target_modules", *targets)
    return a


def placement_flags(cfg: PolicyConfig) -> list[str]:
    ray, a = cfg.openrlhf.ray, []
    for role in ("ref", "actor", "critic"):
        _flag(a, f"--{role}.num_nodes", getattr(ray, f"{role}_nodes"))
        _flag(a, f"--{role}.num_gpus_per_node", getattr(ray, f"{role}_gpus_per_node"))
    _flag(a, "--vllm.num_engines", ray.vllm_engines)
    _flag(a, "--vllm.tensor_parallel_size", ray.vllm_tensor_parallel_size)
    _flag(a, "--vllm.gpu_memory_utilization", ray.vllm_gpu_memory_utilization)
    if ray.colocate == "all":
        # every model on the same GPUs: each sleeps (weights and optimizer offloaded) while another runs
        _flag(a, "--train.colocate_all")
        _flag(a, "--vllm.enable_sleep")
        _flag(a, "--ds.enable_sleep")
    elif ray.colocate == "actor_ref":
        _flag(a, "--train.colocate_actor_ref")
    if ray.adam_offload:
        _flag(a, "--ds.adam_offload")
    return a


def run_name(cfg: PolicyConfig) -> str:
    return f"{Path(str(cfg.reward_model)).name}-{cfg.environment}"


def train_command(cfg: PolicyConfig, prompts_file: Path, out: Path) -> list[str]:
    """The ``train_ppo_ray`` command line, without the W&B key (added from the environment when it runs)."""
    o, t, pol = cfg.openrlhf, cfg.training, cfg.policy
    out = out.resolve()
    a: list[str] = [o.python, "-m", "openrlhf.cli.train_ppo_ray", *placement_flags(cfg)]
    # a local policy as an absolute path: Ray's workers need not share this directory
    policy = resolve_model_path(pol.name_or_path)
    _flag(a, "--actor.model_name_or_path", str(Path(policy).resolve()) if Path(policy).exists() else policy)
    _flag(a, "--reward.remote_url", reward_url(cfg))
    _flag(a, "--ckpt.output_dir", out / "policy")
    _flag(a, "--ckpt.path", out / "checkpoints")
    _flag(a, "--ckpt.save_hf")
    _flag(a, "--ckpt.save_steps", o.save_steps)
    _flag(a, "--ckpt.load_enable")  # a rerun resumes from the last checkpoint (none the first time)
    _flag(a, "--algo.advantage.estimator", "gae")  # PPO with a critic, as in the study
    _flag(a, "--actor.adam.lr", t.learning_rate)
    _flag(a, "--critic.adam.lr", o.critic_learning_rate)
    _flag(a, "--actor.max_norm", t.max_grad_norm)
    _flag(a, "--critic.max_norm", t.max_grad_norm)
    _flag(a, "--algo.advantage.gamma", o.gamma)
    _flag(a, "--rollout.n_samples_per_prompt", t.num_generations)
    _flag(a, "--rollout.temperature", t.temperature)
    _flag(a, "--rollout.top_p", t.top_p)
    _flag(a, "--rollout.max_new_tokens", t.max_completion_length)
    _flag(a, "--train.max_epochs", t.num_epochs)
    _flag(a, "--train.num_episodes", 1)
    _flag(a, "--train.batch_size", o.train_batch_size)
    _flag(a, "--rollout.batch_size", o.rollout_batch_size)
    _flag(a, "--train.micro_batch_size", o.micro_train_batch_size)
    _flag(a, "--rollout.micro_batch_size", o.micro_rollout_batch_size)
    _flag(a, "--train.seed", cfg.seed)
    _flag(a, "--data.max_len", o.max_len)
    _flag(a, "--data.prompt_dataset", prompts_file.resolve())
    _flag(a, "--data.label_key", "label")
    if pol.prompt_format == "chat":
        _flag(a, "--data.input_key", "messages")
        _flag(a, "--data.apply_chat_template")
    else:
        _flag(a, "--data.input_key", "prompt")
    _flag(a, "--ds.zero_stage", o.zero_stage)
    _flag(a, "--ds.param_dtype", o.param_dtype)
    a += lora_flags(cfg)
    _flag(a, "--algo.kl.init_coef", o.init_kl_coef)
    _flag(a, "--actor.gradient_checkpointing_enable")
    if cfg.wandb.mode != "disabled":
        _flag(a, "--logger.wandb.project", cfg.wandb.project)
        _flag(a, "--logger.wandb.run_name", run_name(cfg))
        if cfg.wandb.group:
            _flag(a, "--logger.wandb.group", cfg.wandb.group)
        if cfg.wandb.entity:
            _flag(a, "--logger.wandb.org", cfg.wandb.entity)
    for x in o.extra_args:
        if x.startswith("--") and x not in OPENRLHF_FLAGS:
            raise ConfigError(f"openrlhf.extra_args: '{x}' is not a train_ppo_ray flag of OpenRLHF 0.11")
        if x == WANDB_KEY_FLAG:
            raise ConfigError(f"openrlhf.extra_args: do not write the W&B key into the recipe; export {WANDB_KEY_ENV}")
    return a + list(o.extra_args)


def _train_script(cfg: PolicyConfig, rm_cmd: list[str], ppo_cmd: list[str], log_file: Path,
                  collect_cmd: list[str] | None) -> str:
    wandb = cfg.wandb.mode != "disabled"
    lines = [
        "#!/usr/bin/env bash",
        f"# PPO of {cfg.policy.name_or_path} against {cfg.reward_model} in the {cfg.environment} environment,",
        "# written by `rmtrain policy`: the reward server, then OpenRLHF (output also in train.log), then",
        "# policy_summary.json. A rerun resumes from OpenRLHF's last checkpoint.",
        "set -euo pipefail",
        shlex.join(rm_cmd) + " &",
        "RM_PID=$!",
        "trap 'kill $RM_PID 2>/dev/null || true' EXIT",
        "# the reward model loads: wait for its health endpoint (10 minutes at most)",
        "for _ in $(seq 600); do",
        f"  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "
        f"{shlex.quote(reward_url(cfg, 'health'))} 2>/dev/null && break",
        "  kill -0 $RM_PID 2>/dev/null || { echo 'train_ppo.sh: the reward server exited' >&2; exit 1; }",
        "  sleep 1",
        "done",
    ]
    if wandb:
        lines += [
            "# OpenRLHF logs to W&B only with --logger.wandb.key: taken from the environment, never written down",
            "WANDB_ARGS=()",
            f'if [ -n "${{{WANDB_KEY_ENV}:-}}" ]; then',
            f'  WANDB_ARGS=({WANDB_KEY_FLAG} "${WANDB_KEY_ENV}")',
            "else",
            f"  echo 'train_ppo.sh: {WANDB_KEY_ENV} is not set: OpenRLHF will not log to W&B "
            f"(project {cfg.wandb.project})' >&2",
            "fi",
            shlex.join(ppo_cmd) + ' ${WANDB_ARGS[@]+"${WANDB_ARGS[@]}"} 2>&1 | tee -a ' + shlex.quote(str(log_file)),
        ]
    else:
        lines.append(shlex.join(ppo_cmd) + " 2>&1 | tee -a " + shlex.quote(str(log_file)))
    if collect_cmd:
        lines.append(shlex.join(collect_cmd))
    return "\n".join(lines) + "\n"


def prepare_ppo(cfg: PolicyConfig, out: Path, tokenizer: Any, *, launch: bool = False,
                collect_command: list[str] | None = None) -> dict[str, Any]:
    rows = read_rows(out / "environment" / f"{cfg.environment}.jsonl")
    d = out / "openrlhf"
    prompts_file = d / "prompts.jsonl"
    atomic_write_text(prompts_file, "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                            for r in prompt_records(rows, cfg.policy.prompt_format)))
    length = reward_length(cfg)
    rm_cmd, ppo_cmd = reward_server_command(cfg, length), train_command(cfg, prompts_file, d)
    t, o = cfg.training, cfg.openrlhf
    plan = {
        "algorithm": "ppo", "engine": "openrlhf", "environment": cfg.environment, "reward_model": str(cfg.reward_model),
        "reward_max_length": length, "reward_training_max_length": training_max_length(cfg.reward_model),
        "n_prompts": len(rows), "prompts_file": str(prompts_file.resolve()),
        "layout": {"name": o.layout, "nodes": o.ray.nodes, "gpus_per_node": o.ray.gpus_per_node,
                   "colocate": o.ray.colocate, "gpus": o.ray.gpus(o.init_kl_coef > 0)},
        "reward_server_command": rm_cmd, "train_command": ppo_cmd, "collect_command": collect_command,
        "train_log": str((d / TRAIN_LOG).resolve()),
        "wandb": ({"project": cfg.wandb.project, "group": cfg.wandb.group, "run_name": run_name(cfg),
                   "key": f"${WANDB_KEY_ENV} when the script runs (never written)"}
                  if cfg.wandb.mode != "disabled" else None),
        "settings": {"actor_learning_rate": t.learning_rate, "critic_learning_rate": o.critic_learning_rate,
                     "rollouts_per_prompt": t.num_generations, "temperature": t.temperature, "top_p": t.top_p,
                     "max_grad_norm": t.max_grad_norm, "gamma": o.gamma, "epochs": t.num_epochs},
        "flags": {"actor_learning_rate": "--actor.adam.lr", "critic_learning_rate": "--critic.adam.lr",
                  "rollouts_per_prompt": "--rollout.n_samples_per_prompt", "temperature": "--rollout.temperature",
                  "top_p": "--rollout.top_p", "max_grad_norm": "--actor.max_norm --critic.max_norm",
                  "gamma": "--algo.advantage.gamma", "epochs": "--train.max_epochs"},
        "not_supported": {"repetition_penalty": {"value": t.repetition_penalty,
                                                 "why": "OpenRLHF 0.11 train_ppo_ray has no repetition-penalty flag"}},
    }
    script = _train_script(cfg, rm_cmd, ppo_cmd, (d / TRAIN_LOG).resolve(), collect_command)
    atomic_write_text(d / "reward_server.sh", "#!/usr/bin/env bash\nset -euo pipefail\n" + shlex.join(rm_cmd) + "\n")
    atomic_write_text(d / "train_ppo.sh", script)
    for name in ("reward_server.sh", "train_ppo.sh"):
        os.chmod(d / name, 0o755)
    atomic_write_json(d / "plan.json", plan)
    if launch:
        plan["returncode"] = launch_ppo(cfg, rm_cmd, ppo_cmd, d / TRAIN_LOG)
        if plan["returncode"] == 0:
            return collect_ppo(out)
    return plan


def launch_ppo(cfg: PolicyConfig, rm_cmd: list[str], ppo_cmd: list[str], log_file: Path,
               wait_s: float = 600.0) -> int:
    """Start the reward server, wait until it is healthy, run OpenRLHF (its output to the terminal
    and ``log_file``), stop the server."""
    server = subprocess.Popen([sys.executable, "-m", "rmeval.cli", *rm_cmd[1:]])
    try:
        wait_for_health(reward_url(cfg, "health"), lambda: server.poll() is None, wait_s, "reward server")
        cmd = list(ppo_cmd)
        key = os.environ.get(WANDB_KEY_ENV)
        if cfg.wandb.mode != "disabled":
            if key:
                cmd += [WANDB_KEY_FLAG, key]
            else:
                log.warning("%s is not set: OpenRLHF will not log to W&B", WANDB_KEY_ENV)
        with open(log_file, "a", encoding="utf-8") as f:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                f.write(line)
            return proc.wait()
    finally:
        server.terminate()
        server.wait(timeout=30)


def _literal(text: str) -> str:
    # the status dict is printed by repr: nan and inf are not Python literals
    return re.sub(r"\bnan\b", "None", re.sub(r"\binf\b", "1e999", text))


def read_train_log(path: str | os.PathLike) -> tuple[dict[int, dict[str, float]], int]:
    """Per global step, the status OpenRLHF's PPOTrainer logged (the last entry of a step wins: a
    resumed run repeats steps after its checkpoint), and the number of step lines not readable."""
    p = check_path(path, "OpenRLHF training log")
    steps: dict[int, dict[str, float]] = {}
    bad = 0
    for raw in p.read_text(encoding="utf-8", errors="replace").replace("\r", "\n").splitlines():
        m = STEP_LINE.search(ANSI.sub("", raw))
        if not m:
            continue
        try:
            status = ast.literal_eval(_literal(m.group(2)))
        except (ValueError, SyntaxError):
            bad += 1
            continue
        if isinstance(status, dict):
            steps[int(m.group(1))] = {str(k): float(v) for k, v in status.items()
                                      if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return steps, bad


def _first(status: dict[str, float], *keys: str) -> float | None:
    return next((status[k] for k in keys if k in status), None)


def collect_ppo(out: str | os.PathLike) -> dict[str, Any]:
    """``OUT/policy_summary.json`` of an OpenRLHF run prepared by ``prepare_ppo`` in ``OUT``."""
    out = Path(out)
    cfg_file = out / "policy_config.json"
    if not cfg_file.exists():
        raise ConfigError(f"{out}: no policy_config.json; prepare the run with `rmtrain policy` (ppo) first")
    c = json.loads(cfg_file.read_text())
    d = out / "openrlhf"
    log_file = d / TRAIN_LOG
    if not log_file.exists():
        raise ConfigError(f"{log_file}: not found; run {d / 'train_ppo.sh'} (or `rmtrain policy --launch`) first")
    steps, bad = read_train_log(log_file)
    if not steps:
        raise DataError("no '✨ Global step N: {...}' line (OpenRLHF's PPOTrainer status): the run has not "
                        "finished a step", file=str(log_file))
    order = sorted(steps)
    curve = [r for r in (_first(steps[s], "rollout/reward_mean", "reward") for s in order) if r is not None]
    kl = [k for k in (_first(steps[s], "kl") for s in order) if k is not None]
    lengths = [v for v in (_first(steps[s], "rollout/response_length_mean", "response_length") for s in order)
               if v is not None]
    first, last = tenth_means(curve)
    adapter = d / "policy"
    ckpts = sorted(int(m.group(1)) for p in (d / "checkpoints" / "_actor").glob("global_step*")
                   if (m := re.fullmatch(r"global_step(\d+)", p.name)))
    rm = c.get("reward_model")
    plan = json.loads((d / "plan.json").read_text()) if (d / "plan.json").is_file() else {}
    summary = {
        "algorithm": "ppo", "engine": "openrlhf", "environment": c.get("environment"), "reward_model": rm,
        "reward_model_tags": reward_model_tags(rm) if rm else {}, "policy": c["policy"]["name_or_path"],
        "steps": order[-1], "n_prompts": len(read_rows(out / "environment" / f"{c.get('environment')}.jsonl")),
        "reward_mean_first": first, "reward_mean_last": last, "reward_batch_means": curve,
        "kl_last": kl[-1] if kl else None, "response_length_last": lengths[-1] if lengths else None,
        "adapter": str(adapter) if (adapter / "adapter_config.json").exists() else None,
        "last_checkpoint_step": ckpts[-1] if ckpts else None, "seed": c.get("seed"),
        "train_log": str(log_file), "unreadable_step_lines": bad,
        **{k: plan.get(k) for k in ("reward_max_length", "reward_training_max_length")},
        "history": [{"step": s, **steps[s]} for s in order],
    }
    atomic_write_json(out / SUMMARY_FILE, summary)
    return summary
