#!/usr/bin/env bash
# The GPU check: one command, one table (under 8 minutes on one GPU). On a randomly initialised
# Qwen3-0.6B-shaped reward model in bfloat16 (config and tokenizer built here, nothing from the Hub):
# training pairs/s and tokens/s of rmtrain (shared prompt on and off) against trl's RewardTrainer at
# its best settings, rmeval audit's scoring texts/s in float32 and bfloat16 with the largest score
# difference, the reward server's rewards/s over HTTP, `pytest -m gpu`, and one GRPO step with vLLM
# when scripts/gpu_grpo_step.py is there. Without CUDA it stops where the GPU is needed and says so.
#   bash scripts/gpu_check.sh [--out DIR] [--skip train,score,server,pytest,grpo] [--train-pairs 2048]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export WANDB_MODE=${WANDB_MODE:-disabled} TOKENIZERS_PARALLELISM=false
exec "$PY" scripts/gpu_check.py "$@"
