#!/usr/bin/env bash
# The toy experiments on CPU: trains the toy reward model (recipes/toy_reward_model.yaml, a MiniLM
# Bradley-Terry run on the simulated set, written to outputs/toy/reward_model; a finished run is
# reused), then runs the toy reference pool, the audit of the same prompts with that pool, the toy
# leaderboard and the toy filtering experiment into outputs/experiments/. Tiny untrained models
# stand in for the policies and judges: the figures mean nothing, the commands are what it shows.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export WANDB_MODE=${WANDB_MODE:-offline} WANDB_SILENT=true TOKENIZERS_PARALLELISM=false
RM=outputs/toy/reward_model
OUT=outputs/experiments
.venv/bin/rmtrain train --config recipes/toy_reward_model.yaml --out "$RM"
.venv/bin/rmeval pool --config recipes/pool_toy.yaml --out "$OUT/pool_toy"
.venv/bin/rmeval audit --checkpoint "$RM" --data simulated:n_prompts=24,responses_per_prompt=4,seed=0 \
  --reference-pool "$OUT/pool_toy/pool.parquet" --conditions original --n-boot 500 --n-boot-regression 100 \
  --out "$OUT/audit_pool_toy"
.venv/bin/rmeval leaderboard --config recipes/leaderboard_toy.yaml --out "$OUT/leaderboard_toy"
.venv/bin/rmtrain filter-experiment --config recipes/filtering_toy.yaml --out "$OUT/filtering_toy"
echo "Reports: $OUT/pool_toy/pool.md, $OUT/audit_pool_toy/audit.md, $OUT/leaderboard_toy/leaderboard.md, $OUT/filtering_toy/filtering.md"
