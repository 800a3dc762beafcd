#!/usr/bin/env bash
# After a device call of scripts/gpu_session.sh, keep what it brought back, the same way every time:
#   bash scripts/save_gpu_call.sh FILES_AT RESULTS_DIR CALL_LABEL STORE_SUFFIX
# FILES_AT is the call's files_at folder (gpu-store.tgz or its parts gpu-store.tgz.partNN, session.tgz). The stores are checkpointed
# (WAL folded in) and gzipped into .gpu-saved/{optimize,baseline}-STORE_SUFFIX.sqlite.gz, which git
# ignores: a store is committed once per session, at its end, by scripts/keep_stores.sh, never
# after each call (session 12 committed a ~20 MiB store after each of seven calls, and the
# submission, at over 256 MiB of diffs, was refused whole). The session's logs and summaries go to
# RESULTS_DIR as NAME-CALL_LABEL.log/.json (optimize-call1.log, baseline-call1.json, ...), the
# optimize step's summary as optimize-summary.json; and .gpu-store.tgz is replaced so the next
# call resumes from this one (carry it). Lighter: carry only .gpu-saved/optimize-SUFFIX.sqlite.xz
# (about half the .gz) with STORES=SUFFIX. (The testgen sweep keeps JSON records, not a store: they
# travel in .gpu-store.tgz.)
set -euo pipefail
files_at="$1"; results="$2"; label="$3"; suffix="$4"
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
tar xzf "$files_at/session.tgz" -C "$tmp"
store_tgz="$files_at/gpu-store.tgz"
if [ ! -f "$store_tgz" ]; then   # over 15 MiB it comes back in parts (a file back is 16 MiB at most)
  cat "$files_at"/gpu-store.tgz.part* > "$tmp/gpu-store.tgz"; store_tgz="$tmp/gpu-store.tgz"
fi
tar xzf "$store_tgz" -C "$tmp"
mkdir -p "$results" .gpu-saved
for kind in optimize baseline; do
  db="$tmp/.gpu-store/$kind/store.sqlite"
  [ -f "$db" ] || continue
  python3 - "$db" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1]); con.execute("PRAGMA wal_checkpoint(FULL)"); con.close()
PY
  gzip -c "$db" > ".gpu-saved/$kind-$suffix.sqlite.gz"
  # the same store as xz, to carry into the next call (gpu_session.sh reads it first)
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(open(sys.argv[1], "rb"), lzma.open(sys.argv[2], "wb", preset=6))' \
    "$db" ".gpu-saved/$kind-$suffix.sqlite.xz"
done
for f in "$tmp"/*.log "$tmp"/*.json; do
  if [ -f "$f" ]; then cp "$f" "$results/$(basename "${f%.*}")-$label.${f##*.}"; fi
done
if [ -f "$tmp/.gpu-store/optimize.json" ]; then cp "$tmp/.gpu-store/optimize.json" "$results/optimize-summary.json"; fi
cp "$store_tgz" .gpu-store.tgz
rm -rf .gpu-store && tar xzf .gpu-store.tgz
ls -la "$results" .gpu-saved | tail -n +1
echo "stores saved under .gpu-saved/ (not committed); at the session's end: bash scripts/keep_stores.sh $suffix"
rm -rf "$tmp"
