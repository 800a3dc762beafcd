#!/usr/bin/env bash
# Prepare, on this (GPU-less) machine, the git-ignored paths a device call carries:
#   .whl/           libcst for the GPU image's python 3.12 (the transforms need it; no internet there)
#   .tbdata/        a copy of ../shared/tritonbench_g (the TritonBench-G records)
#   .gpu-store.tgz  the run stores to resume, packed (the carry is limited to 64 MiB), built from
#                   STORE_OPTIMIZE / STORE_BASELINE (.sqlite.gz files; default: the last
#                   committed stores, which scripts/keep_stores.sh updates) and
#                   the testgen sweep's committed records (TESTGEN_RECORDS); an
#                   existing .gpu-store/ is kept as is.
# Then:  run(command="DEADLINE_S=585 PER_KERNEL_S=100 bash scripts/gpu_session.sh optimize baseline",
#            carry=[".whl", ".tbdata", ".gpu-store.tgz"])
# or, without a second copy of the stores in the carry (they travel with the tree as .sqlite.gz):
#        run(command="STORES=h100-2026-11-25-s14 BASELINE_STORES=h100-2026-11-24-s11f DEADLINE_S=585 bash scripts/gpu_session.sh optimize",
#            carry=[".whl", ".tbdata"])
# and after each call keep what it brought back and resume from it:
#   bash scripts/save_gpu_call.sh FILES_AT bench/results/<session dir> callN <store suffix>
# then carry .gpu-store.tgz, or (lighter) only .gpu-saved/optimize-<store suffix>.sqlite.gz with
# STORES=<store suffix> (the baseline store by BASELINE_STORES, as above).
# and once, at the session's end, commit the last stores and check the submission's size:
#   bash scripts/keep_stores.sh <store suffix>
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
if [ ! -d .gpu-store ]; then
  mkdir -p .gpu-store/optimize .gpu-store/baseline
  opt="${STORE_OPTIMIZE:-bench/results/stores/optimize-h100-2026-11-25-s19.sqlite.gz}"
  base="${STORE_BASELINE:-bench/results/stores/baseline-h100-2026-11-24-s11f.sqlite.gz}"
  gunzip -c "$opt" > .gpu-store/optimize/store.sqlite
  gunzip -c "$base" > .gpu-store/baseline/store.sqlite
  # the testgen sweep resumes from its committed records (a record already there is skipped)
  tg="${TESTGEN_RECORDS:-bench/results/testgen-gpu-h100-2026-11-23/records}"
  if [ -d "$tg" ]; then mkdir -p .gpu-store/testgen && cp -r "$tg" .gpu-store/testgen/; fi
  echo "stores: $opt, $base"
fi
tar czf .gpu-store.tgz .gpu-store
du -sh .whl .tbdata .gpu-store.tgz
