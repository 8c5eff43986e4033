#!/usr/bin/env bash
# Sets up .venv and runs the default test suite (heavy tests: add `-m heavy`) on two pytest-xdist
# workers, one torch thread each (tests/conftest.py); a later `-n 0` runs it in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export WANDB_MODE=offline WANDB_SILENT=true TOKENIZERS_PARALLELISM=false
# compiled modules and pytest's rewritten test files are written once and reused by every worker and
# every process a test starts; where PYTHONDONTWRITEBYTECODE is set (some CI images and sandboxes)
# each of them recompiles the sources (on the project's 2-core machine: collection 22 s a worker -> 13 s)
unset PYTHONDONTWRITEBYTECODE
exec .venv/bin/pytest -n 2 --dist load --maxschedchunk 1 "$@"
