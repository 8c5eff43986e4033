#!/usr/bin/env bash
# The demo: the six matched arms on the simulated rating set with all-MiniLM-L6-v2 on CPU, through
# `rmtrain sweep`: a search stage (two learning rates, the same for every arm), two seeds per arm,
# the full audit of every run on held-out prompts no run trained on, then summary.csv, report.md
# (per-arm table, permutation tests, which of the study's findings hold) and the plots.
# DEMO_CONFIG=recipes/demo_helpsteer2_like.yaml runs the HelpSteer2-like regime (human share 0).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export WANDB_MODE=${WANDB_MODE:-offline} WANDB_SILENT=true TOKENIZERS_PARALLELISM=false
CONFIG=${DEMO_CONFIG:-recipes/demo.yaml}
OUT=${DEMO_OUT:-outputs/$(basename "$CONFIG" .yaml)}
.venv/bin/rmtrain sweep --config "$CONFIG" --out "$OUT" "$@"
echo "Report: $OUT/report.md; per-run table: $OUT/summary.csv; plots: $OUT/share_vs_margin.png, $OUT/arm_bars.png"
