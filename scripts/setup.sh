#!/usr/bin/env bash
# Creates .venv with matchrm, its test extras (the demo's model among them) and DeepSpeed. torch is
# installed first and pinned: on a CPU machine 2.13.0 is the CPU wheel; GPU users: set TORCH_SPEC, e.g.
#   TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128" bash scripts/setup.sh
# Everything else is installed at the versions in constraints.txt (torch is not in it, so TORCH_SPEC's
# build is kept; the torch step runs without it, since a CUDA index need not carry those versions,
# and the next step brings torch's own dependencies to the pinned versions).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# shellcheck disable=SC2086
.venv/bin/pip install -q ${TORCH_SPEC:-torch==2.13.0}
# DeepSpeed without compiled ops (CPU machines; GPU kernels are built by DeepSpeed on first use)
DS_BUILD_OPS=0 .venv/bin/pip install -q -c constraints.txt -e ".[test,deepspeed]"
