#!/usr/bin/env bash
# After a device call of scripts/gpu_session.sh, keep what it brought back, the same way every time:
#   bash scripts/save_gpu_call.sh FILES_AT LABEL
# FILES_AT is the call's files_at folder (session.tgz, and gpu-store.tgz or its parts
# gpu-store.tgz.partNN). The call's logs and summaries go to .gpu-saved/LABEL/ (git-ignored: logs
# and run stores stay out of git; a figure worth keeping goes to bench/results/ as a small table
# with its command, GPU and date), the optimize step's summary as .gpu-saved/LABEL/optimize-summary.json.
# The run stores replace .gpu-store/ and .gpu-store.tgz, so the next call resumes from this one
# (carry .gpu-store.tgz).
set -euo pipefail
files_at="$1"; label="$2"
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
saved=".gpu-saved/$label"
mkdir -p "$saved"
tar xzf "$files_at/session.tgz" -C "$saved"
store_tgz="$files_at/gpu-store.tgz"
if [ ! -f "$store_tgz" ] && ls "$files_at"/gpu-store.tgz.part* >/dev/null 2>&1; then
  # over 15 MiB it comes back in parts (a file comes back at 16 MiB at most)
  cat "$files_at"/gpu-store.tgz.part* > "$tmp/gpu-store.tgz"; store_tgz="$tmp/gpu-store.tgz"
fi
if [ -f "$store_tgz" ]; then
  tar xzf "$store_tgz" -C "$tmp"
  if [ -f "$tmp/.gpu-store/optimize.json" ]; then cp "$tmp/.gpu-store/optimize.json" "$saved/optimize-summary.json"; fi
  cp "$store_tgz" .gpu-store.tgz
  rm -rf .gpu-store && tar xzf .gpu-store.tgz
fi
ls -la "$saved"
rm -rf "$tmp"
