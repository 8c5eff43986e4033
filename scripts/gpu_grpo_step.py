"""One short GRPO run on the GPU, with vLLM generating the rollouts where vLLM is installed: the
policy part of the GPU check (scripts/gpu_check.sh).

A tiny randomly initialised Qwen2 policy (head dimension 64, which vLLM's attention kernels take)
and a tiny one-label reward model are built here (rmcore.models.tiny; nothing is downloaded), and
``rmtrain.policy.train.train_policy`` runs two GRPO steps with LoRA on the simulated prompts: the
policy on the GPU in bfloat16, the reward model on the same GPU (``training.reward_device: auto``),
rollouts by vLLM in colocate mode when it is installed (else transformers' generate, and the
output says so), a checkpoint after each step. It prints the run's summary (steps, reward curve,
rollout engine and why, where the reward model ran) and checks it.

    python scripts/gpu_grpo_step.py [--out DIR] [--require-cuda]

Without CUDA it says so and exits 0 (nothing to check here), or 1 with ``--require-cuda``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path


def vllm_version() -> str | None:
    try:
        import vllm

        return vllm.__version__
    except ImportError:
        return None


def build_models(root: Path) -> tuple[Path, Path, list[str]]:
    from transformers import AutoTokenizer

    from rmcore.data.loading import load_rating_set
    from rmcore.models.tiny import PAD, save_tiny, tiny_causal_lm, tiny_model

    rs = load_rating_set({"name": "simulated", "n_prompts": 40, "responses_per_prompt": 2, "seed": 0})
    texts = [m["content"] for p in rs.prompts for m in p.messages] + [r.text for p in rs.prompts for r in p.responses]
    shape = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
             "num_key_value_heads": 2, "max_position_embeddings": 1024}
    policy = tiny_causal_lm(root / "policy", texts, "qwen2", vocab_size=400, pad_token=PAD, **shape)
    tok = AutoTokenizer.from_pretrained(policy)
    rm = save_tiny(root / "reward_model",
                   tiny_model(tok, "qwen2", head="classifier", num_labels=1, seed=1, **shape), tok)
    return policy, rm, texts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/gpu_grpo_step.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="where the models and the run go (default: a temporary directory, removed)")
    ap.add_argument("--require-cuda", action="store_true", help="exit 1, not 0, where CUDA is absent")
    args = ap.parse_args(argv)
    import torch

    vllm = vllm_version()
    if not torch.cuda.is_available():
        print(f"gpu_grpo_step: CUDA is not available (torch {torch.__version__}, CUDA build: "
              f"{torch.version.cuda or 'no'}); vLLM: {vllm or 'not installed'}; nothing to check")
        return 1 if args.require_cuda else 0
    # trl's colocated vLLM joins a torch.distributed group; a single process is rank 0 of 1
    for k, v in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": "29517"}.items():
        os.environ.setdefault(k, v)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out or tmp)
        policy, rm, _ = build_models(root)
        from rmtrain.policy.config import policy_config_from_dict
        from rmtrain.policy.train import train_policy

        cfg = policy_config_from_dict({
            "policy": {"name_or_path": str(policy), "dtype": "bfloat16", "lora": {"r": 8, "alpha": 16, "dropout": 0.0}},
            "data": {"name": "simulated", "n_prompts": 40, "responses_per_prompt": 2, "seed": 0},
            "heldout_prompts": 4, "reward_model": str(rm), "output_dir": str(root / "run"),
            "training": {"algorithm": "grpo", "learning_rate": 1e-3, "max_steps": 2, "per_device_batch_size": 8,
                         "num_generations": 4, "max_completion_length": 16, "gradient_checkpointing": False,
                         "save_steps": 1, "reward_max_length": 256, "vllm_gpu_memory_utilization": 0.2},
            "wandb": {"mode": "disabled"}})
        s = train_policy(cfg)
        report = {k: s.get(k) for k in ("steps", "reward_batch_means", "kl_last", "rollouts", "reward_placement",
                                        "n_rewarded")}
        report.update({"gpu": torch.cuda.get_device_name(0), "vllm": vllm})
        print(json.dumps(report, indent=2))
        problems = []
        if s["steps"] != 2 or s["n_rewarded"] != 16:
            problems.append(f"expected 2 steps of 8 rewarded completions, got {s['steps']} steps, {s['n_rewarded']}")
        if vllm and s["rollouts"]["engine"] != "vllm":
            problems.append(f"vLLM {vllm} is installed but rollouts used {s['rollouts']}")
        if not str(s["reward_placement"]["device"]).startswith("cuda"):
            problems.append(f"the reward model ran on {s['reward_placement']['device']}, not the GPU")
        if not (root / "run" / "trainer" / "checkpoint-2").is_dir():
            problems.append("no checkpoint after step 2")
        for p in problems:
            print(f"gpu_grpo_step: FAILED: {p}", file=sys.stderr)
        if not problems:
            print(f"gpu_grpo_step: ok (rollouts by {s['rollouts']['engine']}: {s['rollouts']['why']})")
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
