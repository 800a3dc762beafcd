#!/usr/bin/env bash
# Every GPU session runs its steps through this script, so that they run the same way each time.
#
#   bash scripts/gpu_session.sh STEP [STEP...]      (on the GPU machine, from the repo root)
#
# The TritonBench-G data travels as .tbdata/ (a git-ignored copy of ../shared/tritonbench_g: carry it).
# Steps: env | probe | hostprobe | workerprobe | flushprobe | pacingprobe | tests | verify | verifyprofile | baseline | selfcheck | profile | examples | testgen | smoke | pass (alias optimize) | scaling | isolation
#   smoke: the checkout's engine on SMOKE_NAMES (see the step) in a scratch pass in SMOKE_DIR
#   (default /tmp/smoke), compared with bench/results/records.jsonl; ENGINE_COMMIT names the engine
#   (git log -1 --format=%H -- src/tritonforge, here); not with ENGINE_TREE
#   scaling: NAMES (default the first 12 of pass-order.txt) on one GPU and on two, at SCALING_S
#   seconds a record (default 20), side by side on a host of 3+ GPUs (GPU 0; GPUs 1,2), else one
#   after the other (GPU 0; GPUs 0,1); scaling.md compares them
#   pass: one optimization pass, resumable call after call from PASS_DIR/records.jsonl (see the step)
#   PASS_DIR     where records.jsonl, LATEST.json and PASS.md live (default bench/results)
#   PASS_NAMES_FILE  the pass's records (default bench/results/pass-order.txt: every runnable
#                record, issue 29's sets first; NAMES overrides)
#   PASS_GROUPS  lists of records LATEST.json gives figures of their own (default
#                bench/results/others-30.txt)
#   GPUS         comma-separated GPUs for pass (default: all) and isolation (default 0,1)
#   ENGINE_COMMIT  the engine's commit, for a tree that travels without .git
#   ENGINE_TREE  a carried folder with the engine to run (scripts/pin_engine.sh): its src/ comes
#                first on PYTHONPATH and its COMMIT names the engine
#   ALLOW_MIXED  1: a pass keeps records another engine made (then not publishable)
#   PASS_GPU     the pass step runs only where every GPU's name contains this (e.g. H100): a pass
#                is one kind of GPU, and a kind asked for can come as another (default: the GPU
#                the pass's first record names; none for a pass with no record yet)
#   EXAMPLES     comma-separated example names for the examples step (default: all)
#   VP_NAMES     comma-separated records for the verifyprofile step (default add_value,
#                attention_forward_triton)
# Long steps stop at a time budget and resume from their run store under .gpu-store/ (git-ignored):
# the script packs the stores into $OUT/gpu-store.tgz at the end (and every log and summary into
# $OUT/session.tgz); unpack gpu-store.tgz here into the repo root and name .gpu-store in the next
# call's carry to go on where it stopped (or carry that gpu-store.tgz itself as .gpu-store.tgz).
#   EXAMPLE_BUDGET_S  seconds per bundled example in the examples step (default 120)
#   DEADLINE_S   seconds this script may use in all (default 540: a device call is 600 at most)
#   JOBS         workers side by side for untimed runs (default 6)
#   REWARM_SHARE baseline: share of the budget for re-checking records an earlier call checked
#                (their compiled kernels went with that machine; default 0.25)
#   TIMING_MODES space-separated FLUSH:INTERLEAVE:PACE triples the selfcheck step runs under, one
#                after the other (config.FLUSH_MODES, INTERLEAVE_MODES, pace 0|1; default:
#                the configured settings)
#   SELF_COPIES  copies of the original the selfcheck step times side by side (2-8; default 2)
#   NAMES        comma-separated TritonBench-G names for selfcheck/pass/isolation (pass's default:
#                PASS_NAMES_FILE)
#   PER_KERNEL_S seconds per kernel in the pass step (default 150)
#   OPT_JOBS     verification workers per GPU in the pass step (default 4)
#   REDO         DEBUGGING: comma-separated records the pass runs again although done (the pass
#                is then marked not publishable in LATEST.json)
#   REVERIFY_AGAIN  comma-separated accepted records the pass's re-verification checks again
#                although checked (a verifier fixed since; each new verdict is a new line, the
#                old one stays in records.jsonl)
#   TESTGEN_NAMES  records for the testgen step (default: the 44 of bench/results/testgen/README.md)
#   TG_SHARDS    testgen processes side by side (default 4; timed runs take turns on a lock file)
#   TG_RECORD_S  validation seconds per record in the testgen step (default 60)
set -u
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then   # libcst (the transforms need it) travels as a wheel
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export TRITONFORGE_TRITONBENCH="${TRITONFORGE_TRITONBENCH:-$PWD/.tbdata}"
# ENGINE_TREE: a folder holding the pass's engine (its src/, from `bash scripts/pin_engine.sh COMMIT`),
# carried: a pass spread over several device calls keeps one engine while the checkout moves on
if [ -n "${ENGINE_TREE:-}" ]; then
  [ -d "$ENGINE_TREE/src/tritonforge" ] || { echo "ENGINE_TREE=$ENGINE_TREE has no src/tritonforge"; exit 2; }
  export PYTHONPATH="$PWD/$ENGINE_TREE/src${PYTHONPATH:+:$PYTHONPATH}"
  ENGINE_COMMIT="${ENGINE_COMMIT:-$(cat "$ENGINE_TREE/COMMIT" 2>/dev/null)}"
else
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
fi
# The device tool brings back at most 8 files from $OUT: everything is written into a scratch
# folder and packed into $OUT/session.tgz (logs, summaries) and $OUT/gpu-store.tgz (the stores).
# The stores travel packed (the carry is limited to 64 MiB): a carried .gpu-store.tgz (the last
# call's $OUT/gpu-store.tgz, which scripts/save_gpu_call.sh keeps) is unpacked here first.
if [ -f .gpu-store.tgz ]; then tar xzf .gpu-store.tgz && echo "unpacked .gpu-store.tgz"; fi
FINAL_OUT="${OUT:-/tmp/tf-out}"; OUT="$(mktemp -d)"; mkdir -p "$FINAL_OUT" .gpu-store
DEADLINE_S="${DEADLINE_S:-540}"
CALL_START="$(date +%s)"
JOBS="${JOBS:-6}"
left() { echo $(( DEADLINE_S - SECONDS - 30 )); }
log() { echo "== [$(date -u +%H:%M:%S) +${SECONDS}s] $*"; }

for step in "$@"; do
  if [ "$(left)" -le 20 ]; then log "no time left for $step"; break; fi
  case "$step" in
    env)
      log env
      nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
      python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))'
      (ncu --version 2>/dev/null | tail -1) || echo "ncu: not found"
      ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null || true
      ;;
    probe)
      log "timing probe: flush time, host overhead per call, timing methods"
      timeout 120 python3 scripts/gpu_timing_probe.py "$OUT/timing_probe.json" 2>&1 | tail -50
      ;;
    hostprobe)
      log "host probe: what a launch-bound wrapper's pieces cost on the host"
      timeout 150 python3 scripts/gpu_host_probe.py "$OUT/host_probe.json" 2>&1 | tail -45
      ;;
    pacingprobe)
      log "pacing probe: an add A/A, unpaced and paced, host idle and every core busy"
      timeout 150 python3 scripts/gpu_pacing_probe.py "$OUT/pacing_probe.jsonl" 2>&1 | tail -12
      cp "$OUT/pacing_probe.jsonl" "$FINAL_OUT/" 2>/dev/null || true
      ;;
    workerprobe)
      log "worker start probe: a worker told its GPU starts with no CUDA context (Worker.quiet_start)"
      timeout 120 python3 scripts/gpu_worker_start_probe.py "$OUT/worker_start_probe.json" 2>&1 | tail -30
      cp "$OUT/worker_start_probe.json" "$FINAL_OUT/" 2>/dev/null || true
      ;;
    flushprobe)
      log "flush probe: the same call against itself under each L2 flush mode"
      timeout 200 python3 scripts/gpu_flush_probe.py "$OUT/flush_probe.json" 2>&1 | tail -20
      ;;
    testgen)
      log "testgen: generated performance sizes vs the perf scripts' sizes (budget $(( $(left) - 40 )) s)"
      TG_DEFAULT="attention_forward_triton,attention_fwd_triton1,attention_fwd_triton3,attention_kernel,destindex_copy,destindex_copy_kv2,embedding_triton_kernel,index_select_cat,add_example,add_value,apply_penalty,cosine_compute,bmm_chunk_bwd,bmm_chunk_fwd,chunk_bwd_dqkg,chunk_cumsum_kernel,bgmv_shrink_kernel,bmm_optimized,dequantize_matmul,int4_matmul,fast_rms_layernorm,fused_layernorm_triton,l2_norm_bwd,l2_norm_triton1,fifth_order_sph_harmonics,triton_conv2d_fwd,dequantize_rowwise,fp4_to_bf16,fp4_to_bf16_conversion,int8_quantization,matrix_reduction,max_reduction,mean_reduction,spinning_lock_reduction,fast_rope_embedding,fused_rotary_embedding,rope_backward_transform,rope_embedding,multinomial_sampling,uniform_sampling,cross_entropy1,fast_ce_loss,kldiv_compute,kldiv_ops"
      # TG_SHARDS processes share the sweep (records side by side); their timed runs take turns
      # through the lock file, so no two time kernels at once (untimed tracing/validation overlap)
      shards="${TG_SHARDS:-4}"; tg_budget=$(( $(left) - 60 ))
      export TRITONFORGE_GPU_LOCK=/tmp/tritonforge-gpu.lock
      for k in $(seq 0 $(( shards - 1 ))); do
        timeout "$(left)" python3 scripts/testgen_compare.py .gpu-store/testgen --names "${TESTGEN_NAMES:-$TG_DEFAULT}" \
          --shard "$k/$shards" --device cuda --budget "$tg_budget" --trace-timeout 60 --case-timeout 60 \
          --record-budget "${TG_RECORD_S:-60}" --run-dir "/tmp/tg-work-$k" > "$OUT/testgen-shard$k.log" 2>&1 &
      done
      wait
      unset TRITONFORGE_GPU_LOCK
      grep -h "^[a-z]" "$OUT"/testgen-shard*.log | grep -v "^{" | tail -60
      python3 scripts/testgen_compare.py .gpu-store/testgen --names "${TESTGEN_NAMES:-$TG_DEFAULT}" \
        --device cuda --summary-only 2>&1 | tail -3
      cp .gpu-store/testgen/testgen_compare.md "$OUT/" 2>/dev/null || true
      ;;
    tests)
      log "gpu tests"
      # TRITON_INTERPRET=0: the CPU tests' conftests (collected first) would otherwise turn the
      # interpreter on for the whole process, and the gpu tests' kernels with it
      TRITON_INTERPRET=0 timeout "$(( $(left) < ${TESTS_S:-200} ? $(left) : ${TESTS_S:-200} ))" python3 -m pytest -q -m gpu tests -p no:cacheprovider --continue-on-collection-errors 2>&1 | tee "$OUT/gpu-tests.log" | tail -40
      ;;
    verify)
      log "verifier on the GPU: whole verify suite with compiled kernels + the catalogue table"
      export TRITONFORGE_VERIFY_DEVICE=cuda
      timeout "$(( $(left) < ${TESTS_S:-200} ? $(left) : ${TESTS_S:-200} ))" python3 -m pytest -q tests/verify -p no:cacheprovider 2>&1 | tee "$OUT/verify-gpu.log" | tail -15
      (cd tests/verify && timeout 120 python3 print_catalogue.py) > "$OUT/catalogue-gpu.txt" 2>&1; tail -5 "$OUT/catalogue-gpu.txt"
      unset TRITONFORGE_VERIFY_DEVICE
      ;;
    verifyprofile)
      # where one candidate's verification spends its seconds (scripts/verify_profile.py):
      # VP_NAMES records (default two: a cheap one and an attention kernel), a warm second request
      # profiled per record into $OUT/verify-profile/
      log "verification profile: ${VP_NAMES:-add_value,attention_forward_triton}"
      timeout "$(( $(left) < 240 ? $(left) : 240 ))" python3 scripts/verify_profile.py \
        $(echo "${VP_NAMES:-add_value,attention_forward_triton}" | tr , ' ') --cases 2 \
        --out "$OUT/verify-profile" 2>&1 | grep -v "^USDT" | tail -40
      ;;
    baseline)
      log "baseline sweep (budget $(( $(left) - 60 )) s)"
      TRITONFORGE_HOST_MEMORY_LIMIT_GB="${TRITONFORGE_HOST_MEMORY_LIMIT_GB:-24}" timeout "$(left)" python3 -m tritonforge bench baseline --device cuda --run-dir .gpu-store/baseline \
        --jobs "$JOBS" --budget "$(( $(left) - 60 ))" --rewarm-share "${REWARM_SHARE:-0.25}" \
        --out "$OUT/baseline.json" 2>&1 | tail -60
      ;;
    selfcheck)
      # TIMING_MODES: FLUSH:INTERLEAVE:PACE triples, e.g. "write:block:0 read:call:1"
      modes=(${TIMING_MODES:-default}); k=${#modes[@]}
      for mode in "${modes[@]}"; do   # each mode gets an equal share of what is left
        log "selfcheck (timing mode $mode)"
        if [ "$mode" != default ]; then
          IFS=: read -r f i p <<< "$mode"
          export TRITONFORGE_FLUSH_MODE="$f" TRITONFORGE_TIMING_INTERLEAVE="$i" TRITONFORGE_TIMING_PACE="$p"
        fi
        timeout "$(( $(left) / k ))" python3 -m tritonforge bench selfcheck --device cuda \
          --run-dir ".gpu-store/selfcheck-${mode//:/-}" \
          --names "${NAMES:-add_example,softmax_triton2,matmul_triton1,layer_norm_triton,rotary_emb}" \
          --copies "${SELF_COPIES:-2}" \
          --out "$OUT/selfcheck-${mode//:/-}.json" 2>&1 | tail -40
        unset TRITONFORGE_FLUSH_MODE TRITONFORGE_TIMING_INTERLEAVE TRITONFORGE_TIMING_PACE
        k=$(( k - 1 ))
      done
      ;;
    profile)
      log "profile"
      timeout "$(left)" bash scripts/gpu_profile_fixtures.sh "$OUT" 2>&1 | tail -40
      ;;
    examples)
      log "optimize the bundled examples"
      for ex in src/tritonforge/examples/*.py; do
        stem=$(basename "$ex" .py)
        case ",${EXAMPLES:-$stem}," in *",$stem,"*) ;; *) continue;; esac
        timeout "$(left)" python3 -m tritonforge optimize "$ex" --device cuda --jobs 4 \
          --budget "${EXAMPLE_BUDGET_S:-120}" \
          --run-dir ".gpu-store/examples/$stem" --out ".gpu-store/examples/$stem/output" 2>&1 \
          | tee "$OUT/example-$stem.log" | tail -25
      done
      ;;
    smoke)
      # the checkout's engine (call it without ENGINE_TREE; ENGINE_COMMIT names it) on SMOKE_NAMES
      # in a scratch pass of its own (SMOKE_DIR), then its records beside the pass's of the same
      # records (scripts/records_compare.py): a development check before a new pass, not a pass.
      # The default records are those the engine's changes after b5d2db76c1e1 aim at (its smoke
      # on four H200s: bench/results/HISTORY.md, 2026-11-28): originals that reach past their
      # arguments' end (token_softmax_llama lost every performance case to illegal memory
      # accesses; kcache_copy_triton, kv_cache_filling, rms_matmul_rbe), launches whose compile
      # runs out of shared memory (context_attn_bloom, matmul_kernel, matmul_persistent_triton),
      # a round's repair before its timing (attention_llama), and two the smoke left at one
      # verified candidate (fused_recurrent_hgrn, chunk_linear_attn); four GPUs run the ten in
      # a 555 s call
      if [ -n "${ENGINE_TREE:-}" ]; then log "smoke not run: ENGINE_TREE is set (a smoke runs the checkout's engine)"; continue; fi
      PASS_DIR="${SMOKE_DIR:-/tmp/smoke}"; mkdir -p "$PASS_DIR"
      NAMES="${SMOKE_NAMES:-token_softmax_llama,context_attn_bloom,attention_llama,kcache_copy_triton,matmul_kernel,kv_cache_filling,rms_matmul_rbe,matmul_persistent_triton,fused_recurrent_hgrn,chunk_linear_attn}"
      SMOKE_AFTER=1; STORE_TAG=-smoke      # a run store of its own, never a pass's
      ;&
    pass|optimize)
      # a resumed pass runs on the kind of GPU its records came from: PASS_GPU, when not given,
      # is the GPU its first record names (a kind asked for can come as another, and the first
      # call of a pass takes whatever came)
      if [ -z "${PASS_GPU:-}" ] && [ -s "${PASS_DIR:-bench/results}/records.jsonl" ]; then
        PASS_GPU="$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline()).get("gpu") or "")' "${PASS_DIR:-bench/results}/records.jsonl" 2>/dev/null)"
        [ -n "$PASS_GPU" ] && log "the pass's records were made on $PASS_GPU: it goes on only there"
      fi
      if [ -n "${PASS_GPU:-}" ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -vq "$PASS_GPU"; then
        log "pass not run: a GPU here is not an $PASS_GPU ($(nvidia-smi --query-gpu=name --format=csv,noheader | sort -u | paste -sd,))"
        continue
      fi
      # One optimization pass (issue 30): every record of PASS_NAMES_FILE, each once, one engine,
      # every GPU of the host (one record per GPU at a time). Resumes from PASS_DIR/records.jsonl
      # (committed): a record this call's end cuts writes nothing and runs again next call.
      # When no record is left, the accepted kernels are re-verified (fresh process, fresh seeds)
      # and LATEST.json is written again. records.jsonl, LATEST.json and PASS.md come back in $OUT:
      # copy them to PASS_DIR and commit before the next call.
      # a worker's host memory: attention_fwd_triton1's first performance case needs over 24 GiB
      # (H100 pass, engine f421d501e87f: the original "does not run"); the H100 hosts lent have
      # 128 GiB and more, and a worker that big is the exception
      export TRITONFORGE_HOST_MEMORY_LIMIT_GB="${TRITONFORGE_HOST_MEMORY_LIMIT_GB:-45}"
      export TRITONFORGE_PROGRESS_LOG="$OUT/progress.log"
      # the tree travels without .git: the engine's commit comes from ENGINE_COMMIT
      # (git log -1 --format=%H -- src/tritonforge, where the tree is committed)
      [ -n "${ENGINE_COMMIT:-}" ] && export TRITONFORGE_ENGINE_COMMIT="$ENGINE_COMMIT"
      PASS_DIR="${PASS_DIR:-bench/results}"
      # the pass's run store is its engine's alone, and a pass with no record yet starts with an
      # empty one: a machine kept warm between calls keeps .gpu-store/, and stored evaluations are
      # reused by request, so an earlier engine's or an abandoned pass's verdicts and timings
      # would otherwise feed this pass (seen on an H100, 2026-11-26: a restarted pass reused a
      # dropped engine's round 1)
      PASS_ENGINE="$( [ -n "${ENGINE_TREE:-}" ] && cat "$ENGINE_TREE/COMMIT" || echo "${ENGINE_COMMIT:-checkout}")"
      PASS_STORE=".gpu-store/pass-${PASS_ENGINE:0:12}${STORE_TAG:-}"
      if [ ! -s "$PASS_DIR/records.jsonl" ]; then rm -rf "$PASS_STORE"; log "a new pass: $PASS_STORE starts empty"; fi
      # a machine kept warm keeps this pass's records too: where the committed records.jsonl is
      # an earlier state of that copy (its first bytes), the pass goes on from the copy, so a call
      # made before the last call's records were committed does not optimize them a second time
      # (seen on two H100s, 2026-11-26: six records ran twice, the first run's records kept)
      KEEP="$PASS_STORE/records.jsonl"
      if [ -s "$KEEP" ] && [ -s "$PASS_DIR/records.jsonl" ] \
          && [ "$(wc -l < "$KEEP")" -gt "$(wc -l < "$PASS_DIR/records.jsonl")" ] \
          && cmp -s -n "$(stat -c %s "$PASS_DIR/records.jsonl")" "$PASS_DIR/records.jsonl" "$KEEP"; then
        log "records.jsonl is behind this machine's copy ($(wc -l < "$PASS_DIR/records.jsonl") vs $(wc -l < "$KEEP") records): the pass goes on from the copy"
        cp "$KEEP" "$PASS_DIR/records.jsonl"
      fi
      PASS_ARGS=(--device cuda --run-dir "$PASS_STORE" --per-kernel "${PER_KERNEL_S:-150}"
                 --jobs "${OPT_JOBS:-4}" --records "$PASS_DIR/records.jsonl"
                 --latest "$PASS_DIR/LATEST.json" --baseline-store .gpu-store/baseline/store.sqlite)
      for g in ${PASS_GROUPS:-bench/results/others-30.txt}; do [ -f "$g" ] && PASS_ARGS+=(--group-file "$g"); done
      if [ -n "${NAMES:-}" ]; then PASS_ARGS+=(--names "$NAMES")
      else PASS_ARGS+=(--names-file "${PASS_NAMES_FILE:-bench/results/pass-order.txt}"); fi
      [ -n "${GPUS:-}" ] && PASS_ARGS+=(--gpus "$GPUS")
      [ "${ALLOW_MIXED:-0}" = 1 ] && PASS_ARGS+=(--allow-mixed-engines)
      # the pass ends 45 s before this script's own reserve: on four H100s (2026-11-26) its lanes
      # took over 20 s to shut down after the last record, the call's timeout stopped it, and
      # LATEST.json and PASS.md were not written (they are again below when that happens)
      log "optimization pass on GPUs ${GPUS:-all} (budget $(( $(left) - 45 )) s)"
      timeout "$(left)" python3 -m tritonforge bench optimize "${PASS_ARGS[@]}" \
        ${REDO:+--redo "$REDO"} --budget "$(( $(left) - 45 ))" --out "$OUT/pass-state.json" \
        2>&1 | tee "$OUT/pass.log" | tail -60
      if [ "$PASS_DIR/records.jsonl" -nt "$PASS_DIR/LATEST.json" ] && [ "$(left)" -gt 15 ]; then
        log "LATEST.json is older than records.jsonl: written again"
        timeout "$(left)" python3 -m tritonforge bench optimize "${PASS_ARGS[@]}" --budget 0 \
          > "$OUT/pass-latest.log" 2>&1 || tail -5 "$OUT/pass-latest.log"
      fi
      if python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["finished"] else 1)' "$OUT/pass-state.json" 2>/dev/null \
          && [ "$(left)" -gt 60 ]; then
        # one re-verification per GPU at a time: each takes 20-80 s (a fresh worker, every case on
        # fresh seeds; four H100s, 2026-11-26: 7 records in 510 s one after the other), so the
        # accepted kernels not re-verified yet are dealt round-robin to the GPUs of the host
        RV_GPUS="${GPUS:-$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd,)}"
        mapfile -t RV_GROUPS < <(python3 - "$PASS_DIR/records.jsonl" "$RV_GPUS" <<'PY'
import json, sys
last = {}
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        d = json.loads(line)
    except ValueError:
        continue                      # a torn line: its record is not accepted yet
    last[d["name"]] = d
todo = [n for n, d in last.items() if d.get("accepted") and d.get("reverified") is None]
gpus = sys.argv[2].split(",")
for i, g in enumerate(gpus):
    names = todo[i::len(gpus)]
    if names:
        print(g, ",".join(names))
PY
)
        log "every record done: re-verifying the accepted kernels on GPUs $RV_GPUS (budget $(( $(left) - 40 )) s)"
        if [ -n "${REVERIFY_AGAIN:-}" ]; then
          PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" CUDA_VISIBLE_DEVICES="${RV_GPUS%%,*}" \
            timeout "$(left)" python3 -m tritonforge bench reverify --device cuda --again \
            --run-dir "$PASS_STORE" --records "$PASS_DIR/records.jsonl" --names "$REVERIFY_AGAIN" \
            --budget "$(( $(left) - 40 ))" > "$OUT/reverify-again.log" 2>&1
          tail -20 "$OUT/reverify-again.log"
        fi
        # with the checkout's verifier, whatever engine made the pass (ENGINE_TREE): what counts
        # an accepted kernel wrong is the best check there is, not the one the engine shipped with
        for group in "${RV_GROUPS[@]}"; do
          PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" \
          CUDA_VISIBLE_DEVICES="${group%% *}" timeout "$(left)" python3 -m tritonforge bench reverify \
            --device cuda --run-dir "$PASS_STORE" --records "$PASS_DIR/records.jsonl" \
            --names "${group#* }" --budget "$(( $(left) - 40 ))" > "$OUT/reverify-gpu${group%% *}.log" 2>&1 &
        done
        wait
        cat "$OUT"/reverify-gpu*.log 2>/dev/null | tail -40
        timeout "$(left)" python3 -m tritonforge bench optimize "${PASS_ARGS[@]}" --budget 0 \
          > "$OUT/pass-final.log" 2>&1 || true
      fi
      mkdir -p "$PASS_STORE" && cp "$PASS_DIR/records.jsonl" "$KEEP" 2>/dev/null || true
      cp "$PASS_DIR/records.jsonl" "$PASS_DIR/LATEST.json" "$PASS_DIR/PASS.md" "$FINAL_OUT/" 2>/dev/null || true
      if [ -n "${SMOKE_AFTER:-}" ] && [ -s "$PASS_DIR/records.jsonl" ]; then
        log "the smoke's records beside the pass's (bench/results/records.jsonl)"
        python3 scripts/records_compare.py bench/results/records.jsonl "$PASS_DIR/records.jsonl" 2>&1 | tail -30
      fi
      ;;
    scaling)
      # issue 30: the same records on one GPU and on two (fresh records files, so neither run
      # resumes the other); scripts/scaling_compare.py puts them side by side.
      # On a host of three GPUs or more the two runs go side by side, on GPU 0 and on GPUs 1,2
      # (the isolation check's premise: a GPU's work does not disturb another's timing), so both
      # fit one call; on two GPUs one after the other. SCALING_RUNS: which runs this call makes
      # ("0 0,1": both, the default; "0" or "0,1": one each call, when both do not fit one).
      # Each run's --out JSON and records come back in $OUT (scaling-1gpu.json, ...records.jsonl)
      export TRITONFORGE_HOST_MEMORY_LIMIT_GB="${TRITONFORGE_HOST_MEMORY_LIMIT_GB:-24}"
      [ -n "${ENGINE_COMMIT:-}" ] && export TRITONFORGE_ENGINE_COMMIT="$ENGINE_COMMIT"
      SC_NAMES="${NAMES:-$(grep -v '^#' bench/results/pass-order.txt | head -12 | paste -sd,)}"
      ngpu=$(nvidia-smi -L | wc -l)
      runs=(${SCALING_RUNS:-0 0,1})
      parallel=$([ "$ngpu" -ge 3 ] && [ ${#runs[@]} -gt 1 ] && echo 1 || echo 0)
      half=$(( ($(left) - 60) / 3 ))     # one GPU takes about twice as long as two
      scaling_run() {   # $1: GPUs as asked (0 or 0,1), $2: GPUs used, $3: budget
        local tag; tag=$([ "$1" = 0 ] && echo 1gpu || echo 2gpu)
        log "scaling: $tag on GPUs $2 (budget $3 s)"
        rm -rf "/tmp/scaling-$tag" && mkdir -p "/tmp/scaling-$tag"
        timeout "$(left)" python3 -m tritonforge bench optimize --device cuda \
          --run-dir ".gpu-store/scaling-$tag" --per-kernel "${SCALING_S:-20}" --jobs "${OPT_JOBS:-4}" \
          --records "/tmp/scaling-$tag/records.jsonl" --latest "/tmp/scaling-$tag/LATEST.json" \
          --names "$SC_NAMES" --gpus "$2" --budget "$3" --out "$OUT/scaling-$tag.json" \
          > "$OUT/scaling-$tag.log" 2>&1
        cp "/tmp/scaling-$tag/records.jsonl" "$OUT/scaling-$tag.records.jsonl" 2>/dev/null
        cp "$OUT/scaling-$tag.json" "$OUT/scaling-$tag.records.jsonl" "$FINAL_OUT/" 2>/dev/null
        tail -3 "$OUT/scaling-$tag.log"
      }
      if [ "$parallel" = 1 ]; then
        scaling_run 0 0 $(( $(left) - 40 )) &
        scaling_run 0,1 1,2 $(( $(left) - 40 )) &
        wait
      else
        for gpus in "${runs[@]}"; do
          budget=$([ "$gpus" = 0 ] && [ ${#runs[@]} -gt 1 ] && echo $(( 2 * half )) || echo $(( $(left) - 40 )))
          scaling_run "$gpus" "$gpus" "$budget"
        done
      fi
      [ -f "$OUT/scaling-1gpu.json" ] && [ -f "$OUT/scaling-2gpu.json" ] && \
        python3 scripts/scaling_compare.py "$OUT/scaling-1gpu.json" "$OUT/scaling-1gpu.records.jsonl" \
        "$OUT/scaling-2gpu.json" "$OUT/scaling-2gpu.records.jsonl" | tee "$FINAL_OUT/scaling.md"
      ;;
    isolation)
      # the per-GPU executor's premise: a record's times on GPU A alone and beside a busy GPU B
      log "isolation check on GPUs ${GPUS:-0,1}"
      timeout "$(left)" python3 -m tritonforge bench isolation --device cuda --run-dir .gpu-store/isolation \
        --names "${NAMES:-add_example,softmax_triton2,matmul_triton1,layer_norm_triton,rotary_emb}" \
        --gpus "${GPUS:-0,1}" --out "$OUT/isolation.json" 2>&1 | tee "$OUT/isolation.log" | tail -40
      cp "$OUT/isolation.json" "$OUT/isolation.log" "$FINAL_OUT/" 2>/dev/null || true
      ;;
    *) log "unknown step $step";;
  esac
done
log "packing stores and logs"
tar czf "$FINAL_OUT/gpu-store.tgz" --exclude='*/worker*' --exclude='*/modules' --exclude='*/w[0-9]*' \
  --exclude='*/perf-inputs' --exclude='*/final[0-9]*' --exclude='*/alone' .gpu-store 2>/dev/null
# a file comes back at 16 MiB at most: a larger pack travels in parts (save_gpu_call.sh joins them)
if [ "$(stat -c %s "$FINAL_OUT/gpu-store.tgz")" -gt $(( 15 * 1024 * 1024 )) ]; then
  split -b 15M -d "$FINAL_OUT/gpu-store.tgz" "$FINAL_OUT/gpu-store.tgz.part" && rm "$FINAL_OUT/gpu-store.tgz"
fi
# a second run of this script in the same call keeps the first one's logs (files of the same
# name are this run's): its session.tgz would otherwise replace them
if [ -f "$FINAL_OUT/session.tgz" ]; then tar xzf "$FINAL_OUT/session.tgz" -C "$OUT" --skip-old-files 2>/dev/null; fi
tar czf "$FINAL_OUT/session.tgz" -C "$OUT" . 2>/dev/null
ls -la "$OUT" "$FINAL_OUT"
