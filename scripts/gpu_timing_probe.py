"""Where the floor of small-case timings comes from (GPU only): flush time, host overhead, methods.

    python3 scripts/gpu_timing_probe.py OUT.json      (scripts/gpu_session.sh runs it in its probe step)

A 4096-element elementwise kernel runs in a few microseconds, yet baseline sweeps time many
TritonBench-G cases near 100 us. With the L2 flush before each timed call (BENCHMARK.md), the
GPU idles whenever the host takes longer to launch the call than the flush takes to run, and that
idle time lands inside the measurement. This probe measures each part once, on the device:
the flush alone, the host time of one call (no synchronisation), the time per call by
CUDA events with and without the flush, with and without the per-call reseeding, by CUDA-graph
replay, and by triton.testing.do_bench.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, "src")
from tritonforge.runtime.inputs import seed_everything  # noqa: E402
from tritonforge.runtime.timing import TimingPlan, time_interleaved_cuda  # noqa: E402


@triton.jit
def _sin(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.sin(tl.load(x_ptr + offs, mask=mask)), mask=mask)


def call_sin(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    _sin[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


def host_us(fn, calls: int = 2000) -> float:
    """Mean host time of one call, no synchronisation (the GPU runs behind)."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def main(out: str) -> None:
    results: dict[str, object] = {"device": torch.cuda.get_device_name(0),
                                  "torch": torch.__version__, "triton": triton.__version__}
    flush_buf = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5):
        flush_buf.zero_()
    s.record()
    for _ in range(20):
        flush_buf.zero_()
    e.record()
    torch.cuda.synchronize()
    results["flush_us"] = s.elapsed_time(e) / 20 * 1e3
    for n in (1 << 12, 1 << 20, 1 << 24):
        x = torch.rand(n, device="cuda")
        bare = lambda x=x: call_sin(x)           # noqa: E731

        def seeded(x=x):
            seed_everything(0)
            return call_sin(x)

        row = {"host_us_bare": host_us(bare), "host_us_seeded": host_us(seeded)}
        for name, plan in (("events_flush", TimingPlan(rounds=5, round_ms=10, warmup_ms=10)),
                           ("events_noflush", TimingPlan(rounds=5, round_ms=10, warmup_ms=10, flush_l2=False)),
                           ("graph_flush", TimingPlan(rounds=5, round_ms=10, warmup_ms=10, cuda_graph=True))):
            for label, fn in (("bare", bare), ("seeded", seeded)):
                samples, method = time_interleaved_cuda({"f": fn}, plan)
                row[f"{name}_{label}_us"] = statistics.median(samples["f"]) * 1e3
                row[f"{name}_{label}_method"] = method.value
        row["do_bench_us"] = triton.testing.do_bench(bare, warmup=25, rep=100, return_mode="median") * 1e3
        results[f"n={n}"] = row
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "timing_probe.json")
