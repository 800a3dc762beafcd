#!/usr/bin/env bash
# The test command (README): every CPU test, through Triton's interpreter. GPU-marked tests skip
# themselves without a GPU; on the GPU machine `scripts/gpu_session.sh tests` runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m pytest -q -p no:cacheprovider "$@"
