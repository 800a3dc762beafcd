#!/usr/bin/env bash
# Prepare, on this (GPU-less) machine, the git-ignored paths a device call carries:
#   .whl/           libcst for the GPU image's python 3.12 (the transforms need it; no internet there)
#   .tbdata/        a copy of ../shared/tritonbench_g (the TritonBench-G records)
#   .gpu-store.tgz  packed from an existing .gpu-store/ (the run stores a previous call left, which
#                   scripts/save_gpu_call.sh unpacks), so that the next call resumes from them
# Then:  run(command="DEADLINE_S=585 PER_KERNEL_S=100 bash scripts/gpu_session.sh optimize baseline",
#            carry=[".whl", ".tbdata", ".gpu-store.tgz"])
# and after each call keep what it brought back and resume from it:
#   bash scripts/save_gpu_call.sh FILES_AT LABEL
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls .whl/libcst-*cp312*.whl >/dev/null 2>&1; then
  mkdir -p .whl
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
    --no-deps -d .whl "libcst>=1.0"
fi
if [ ! -f .tbdata/kernels.json ]; then
  rm -rf .tbdata && cp -r "${TRITONFORGE_TRITONBENCH:-../shared/tritonbench_g}" .tbdata
fi
if [ -d .gpu-store ]; then tar czf .gpu-store.tgz .gpu-store; fi
du -sh .whl .tbdata .gpu-store.tgz 2>/dev/null || true
