#!/usr/bin/env bash
# Commit a session's run stores once, at its end (not after each device call):
#   bash scripts/keep_stores.sh STORE_SUFFIX
# Takes .gpu-saved/{optimize,baseline}-STORE_SUFFIX.sqlite.gz (written by save_gpu_call.sh),
# moves each into bench/results/stores/ in place of the store scripts/prepare_gpu_carry.sh packs
# by default (that one leaves the tree, and stays in git history), points prepare_gpu_carry.sh at
# the new one, and commits. A store whose content is the same as the committed default is not
# committed again (a swap of an unchanged ~6 MiB baseline store costs ~13 MiB of diff).
# Then prints the submission's size (scripts/submission_size.py): over 256 MiB of diffs in one
# session, nothing lands.
set -euo pipefail
suffix="$1"
cd "$(dirname "$0")/.."
changed=()
for kind in optimize baseline; do
  new=".gpu-saved/$kind-$suffix.sqlite.gz"
  [ -f "$new" ] || { echo "no $new: skipped"; continue; }
  var="STORE_$(echo "$kind" | tr a-z A-Z)"
  old="$(sed -n "s|.*\${$var:-\([^}]*\)}.*|\1|p" scripts/prepare_gpu_carry.sh | head -1)"
  dest="bench/results/stores/$kind-$suffix.sqlite.gz"
  if [ -n "$old" ] && [ -f "$old" ] && \
     [ "$(gunzip -c "$old" | sha256sum)" = "$(gunzip -c "$new" | sha256sum)" ]; then
    echo "$kind: unchanged since $old: not committed again"; continue
  fi
  cp "$new" "$dest"
  git add "$dest"; changed+=("$dest")
  if [ -n "$old" ] && [ "$old" != "$dest" ] && git ls-files --error-unmatch "$old" >/dev/null 2>&1; then
    git rm -q "$old"; changed+=("$old")
  fi
  sed -i "s|\${$var:-[^}]*}|\${$var:-$dest}|" scripts/prepare_gpu_carry.sh
  changed+=(scripts/prepare_gpu_carry.sh)
  echo "$kind: $dest replaces ${old:-nothing}"
done
if [ "${#changed[@]}" -gt 0 ]; then
  git commit -q -m "stores: the session's cumulative stores ($suffix), committed once" -- "${changed[@]}"
  git log -1 --stat --format='%h %s' | cat
fi
python3 scripts/submission_size.py || echo "submission_size: over the warning line, see above"
