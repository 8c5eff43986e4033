#!/usr/bin/env bash
# Sets up .venv and runs the default test suite (heavy tests: add `-m heavy`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export WANDB_MODE=offline WANDB_SILENT=true TOKENIZERS_PARALLELISM=false
exec .venv/bin/pytest "$@"
