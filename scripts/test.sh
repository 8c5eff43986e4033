#!/usr/bin/env bash
# Sets up .venv and runs the default test suite (heavy tests: add `-m heavy`) on two pytest-xdist
# workers, one torch thread each (tests/conftest.py); a later `-n 0` runs it in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export WANDB_MODE=offline WANDB_SILENT=true TOKENIZERS_PARALLELISM=false
exec .venv/bin/pytest -n 2 --dist load --maxschedchunk 1 "$@"
