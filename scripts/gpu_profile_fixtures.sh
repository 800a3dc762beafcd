#!/usr/bin/env bash
# GPU demonstrations of `tritonforge profile` (scripts/gpu_session.sh runs this in its profile step):
#
#   bash scripts/gpu_profile_fixtures.sh OUT        (on the GPU machine, from the repo root)
#
#   (a) src/tritonforge/examples/sin_block4.py: 4 elements per program; the diagnosis must name
#       the launch/parallelism problem (too little work per program, launch overhead, ...)
#   (b) src/tritonforge/examples/vector_add.py: 2^28 fp32, 4096 per program, 8 warps; must reach
#       more than 80% of the measured DRAM (copy) bandwidth and be diagnosed near the roofline
#   (c) TritonBench-G softmax_triton2 (data: $TRITONFORGE_TRITONBENCH): the whole command is timed
#       and must take well under a minute
#
# Writes 5 files into OUT: profile_{sin_block4,vector_add,softmax_triton2}.json (the profiles,
# model.serialize JSON), profile_summary.md (checks, numbers, wall times) and profile.log (what the
# commands printed). Run stores go to $PROFILE_RUN_DIR (default .gpu-store/profile). The measured
# peaks are cached (~/.cache/tritonforge/peaks.json) by the first command and reused by the others.
# Each command may take PROFILE_TIMEOUT_S seconds (default 150); in all about 2 to 3 minutes.
# PROFILE_DEVICE=cpu runs the same commands through the interpreter (a check of this script only).
set -u
OUT="${1:?usage: bash scripts/gpu_profile_fixtures.sh OUT}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
RUNS="${PROFILE_RUN_DIR:-.gpu-store/profile}"
LOG="$OUT/profile.log"
WALL="$(mktemp)"
: > "$LOG"

prof() {   # NAME ARGS...: one `tritonforge profile`, its exit status and wall time noted in $WALL
  local name="$1"; shift
  local t0 t1 rc
  echo "== [$(date -u +%H:%M:%S)] profile $name: $*" | tee -a "$LOG"
  t0=$(date +%s.%N)
  timeout "${PROFILE_TIMEOUT_S:-150}" python3 -m tritonforge profile "$@" --device "${PROFILE_DEVICE:-cuda}" \
    --run-dir "$RUNS/$name" --out "$OUT/profile_$name.json" --ncu-timeout 120 >>"$LOG" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  echo "$name $rc $(python3 -c "print(f'{$t1 - $t0:.1f}')")" >> "$WALL"
  echo "   exit $rc after $(tail -1 "$WALL" | cut -d' ' -f3) s" | tee -a "$LOG"
}

prof sin_block4 src/tritonforge/examples/sin_block4.py
prof vector_add src/tritonforge/examples/vector_add.py
prof softmax_triton2 --tritonbench softmax_triton2

python3 - "$OUT" "$WALL" <<'EOF'
"""profile_summary.md: one section per profile, with the checks the demonstrations must pass."""
import datetime
import shutil
import subprocess
import sys
from pathlib import Path

from tritonforge.model.serialize import loads

out, wall_file = Path(sys.argv[1]), Path(sys.argv[2])
walls = {}
for line in wall_file.read_text().splitlines():
    name, rc, secs = line.split()
    walls[name] = (int(rc), float(secs))
try:
    import torch
    import triton
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    versions = f"torch {torch.__version__}, triton {triton.__version__}"
except Exception as exc:  # noqa: BLE001
    gpu, versions = "?", f"({exc})"
ncu = shutil.which("ncu")
ncu_version = (subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip()
               .splitlines() or ["?"])[-1] if ncu else "not on PATH"
lines = ["# `tritonforge profile` on the GPU", "",
         f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; {gpu}; {versions}; "
         f"ncu: {ncu_version}", "",
         "Command: `bash scripts/gpu_profile_fixtures.sh OUT` (each profile: `python3 -m "
         "tritonforge profile ... --device cuda --ncu-timeout 120`); the profiles are the "
         "profile_*.json beside this file, the printed output is profile.log.", ""]

PARALLELISM = {"too little work per program", "launch overhead", "too little memory parallelism",
               "grid smaller than the GPU"}
PARALLEL_HINTS = {"larger_blocks", "more_work_per_launch", "more_parallelism", "more_programs"}


def check(name, p, rc, secs):
    d, r = p.diagnosis, p.roofline
    hints = [h.kind for h in d.hints] if d else []
    if name == "sin_block4":
        ok = d is not None and (d.bottleneck in PARALLELISM or bool(PARALLEL_HINTS & set(hints[:2])))
        return ok, f"names the launch/parallelism problem: {d.bottleneck if d else None!r}, hints {hints[:3]}"
    if name == "vector_add":
        frac = r.achieved_bw_gbs / r.peak_bw_gbs if r else 0.0
        ok = r is not None and frac > 0.8 and d is not None and d.near_roofline
        return ok, (f"{frac:.0%} of the measured DRAM bandwidth (> 80% needed), near the roofline: "
                    f"{d.near_roofline if d else None}")
    return rc == 0 and secs < 60, f"whole command {secs:.1f} s (well under 60 s needed)"


results = []
for name in ("sin_block4", "vector_add", "softmax_triton2"):
    rc, secs = walls.get(name, (-1, 0.0))
    path = out / f"profile_{name}.json"
    lines.append(f"## {name}")
    if not path.exists():
        lines += [f"FAIL: no profile (exit {rc} after {secs:.1f} s); see profile.log", ""]
        results.append((name, False))
        continue
    p = loads(path.read_text())
    ok, why = check(name, p, rc, secs)
    results.append((name, ok))
    d, r = p.diagnosis, p.roofline
    lines.append(f"{'PASS' if ok else 'FAIL'}: {why}")
    lines.append("")
    lines.append(f"- case {p.case_id}, source {p.source}, exit {rc}, wall {secs:.1f} s")
    if d is not None:
        lines.append(f"- bound {d.bound.value}; bottleneck: {d.bottleneck}"
                     + (" (near the roofline)" if d.near_roofline else ""))
        lines += [f"  - {e}" for e in d.evidence]
        lines.append("- hints: " + ", ".join(f"{h.kind} ({h.priority:.2f})" for h in d.hints))
    if r is not None:
        lines.append(f"- roofline: {r.bytes_moved / 1e6:,.1f} MB, {r.flops / 1e9:,.3f} GFLOP in "
                     f"{r.time_us:,.1f} us: {r.achieved_bw_gbs:,.0f} of {r.peak_bw_gbs:,.0f} GB/s, "
                     f"{r.fraction_of_peak:.0%} of peak, {r.bound.value}-bound")
    for s in p.compile_stats:
        consts = ", ".join(f"{k}={v}" for k, v in s.constexprs)
        lines.append(f"- static {s.kernel} [{s.target}] {consts} num_warps={s.num_warps}: "
                     f"{s.registers} regs, spills {s.spills}, shared {s.shared_bytes} B, "
                     f"width {s.vector_width_bytes} B" + (f", error {s.error[:120]}" if s.error else ""))
    for k in p.kernels[:2]:
        lines.append(f"- ncu {k.kernel}: {k.duration_us} us, DRAM {k.get('dram_throughput_pct')}%, "
                     f"SM {k.get('sm_throughput_pct')}%, grid {k.get('grid_size')}")
    lines += [f"- note: {n}" for n in p.notes]
    lines.append("")
lines.append("Checks: " + ", ".join(f"{n} {'PASS' if ok else 'FAIL'}" for n, ok in results))
(out / "profile_summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
rm -f "$WALL"
