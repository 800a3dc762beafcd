#!/usr/bin/env bash
# The test command (README): every CPU test, through Triton's interpreter. GPU-marked tests skip
# themselves without a GPU; on the GPU machine `scripts/gpu_session.sh tests` runs them. Uses the
# environment .ci/run builds (.venv) when there is one, else python3.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m pytest -q -p no:cacheprovider "$@"
