#!/usr/bin/env bash
# Pin the engine of a pass that spans several device calls (run here, in the repo root):
#   bash scripts/pin_engine.sh COMMIT [DIR]      (DIR default .engine, git-ignored)
# DIR gets COMMIT's src/ and a COMMIT file; carry DIR and run the pass with ENGINE_TREE=DIR
# (scripts/gpu_session.sh): the records keep one engine while the checkout moves on.
set -eu
commit="$(git rev-parse --verify "${1:?usage: pin_engine.sh COMMIT [DIR]}^{commit}")"
dir="${2:-.engine}"
rm -rf "$dir" && mkdir -p "$dir"
git archive "$commit" src | tar -x -C "$dir"
git log -1 --format=%H "$commit" -- src/tritonforge | cut -c1-12 > "$dir/COMMIT"
echo "pinned engine $(cat "$dir/COMMIT") (commit $commit) in $dir"
