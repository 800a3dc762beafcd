#!/usr/bin/env bash
# After a device call of scripts/gpu_session.sh, keep what it brought back, the same way every time:
#   bash scripts/save_gpu_call.sh FILES_AT RESULTS_DIR CALL_LABEL STORE_SUFFIX
# FILES_AT is the call's files_at folder (gpu-store.tgz, session.tgz). The stores are checkpointed
# (WAL folded in) and gzipped over bench/results/stores/{optimize,baseline}-STORE_SUFFIX.sqlite.gz
# (cumulative: each call's store replaces the last); the logs go to RESULTS_DIR as
# optimize-CALL_LABEL.log / baseline-CALL_LABEL.json / testgen-CALL_LABEL.json; and
# .gpu-store.tgz is replaced so the next call resumes from this one.
set -euo pipefail
files_at="$1"; results="$2"; label="$3"; suffix="$4"
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
tar xzf "$files_at/session.tgz" -C "$tmp"
tar xzf "$files_at/gpu-store.tgz" -C "$tmp"
mkdir -p "$results" bench/results/stores
for kind in optimize baseline testgen; do
  db="$tmp/.gpu-store/$kind/store.sqlite"
  [ -f "$db" ] || continue
  python3 - "$db" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1]); con.execute("PRAGMA wal_checkpoint(FULL)"); con.close()
PY
  gzip -c "$db" > "bench/results/stores/$kind-$suffix.sqlite.gz"
done
[ -f "$tmp/optimize.log" ] && cp "$tmp/optimize.log" "$results/optimize-$label.log"
[ -f "$tmp/baseline.json" ] && cp "$tmp/baseline.json" "$results/baseline-$label.json"
[ -f "$tmp/.gpu-store/optimize.json" ] && cp "$tmp/.gpu-store/optimize.json" "$results/optimize-summary.json"
for f in "$tmp"/*.log "$tmp"/*.json; do
  case "$(basename "$f")" in optimize.log|baseline.json) ;; *) [ -f "$f" ] && cp "$f" "$results/$(basename "${f%.*}")-$label.${f##*.}";; esac
done
cp "$files_at/gpu-store.tgz" .gpu-store.tgz
rm -rf .gpu-store && tar xzf .gpu-store.tgz
ls -la "$results" bench/results/stores | tail -n +1
rm -rf "$tmp"
