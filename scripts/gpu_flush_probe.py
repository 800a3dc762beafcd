"""Which L2 flush gives steady timings of microsecond-scale calls (GPU only).

    python3 scripts/gpu_flush_probe.py OUT.json      (scripts/gpu_session.sh runs it in its flushprobe step)

Small TritonBench-G cases (5-20 us) read wildly different medians from one timing to the next
(l2_norm_triton1, H100, 2026-11-24: the same original at 5.3 us in one evaluation and 8.6 us in
the next, with samples from 4 to 250 us). The suspicion: triton's do_bench flush zeroes a 256 MiB
buffer, which leaves the L2 full of dirty lines; the timed call then pays for writing part of
them back. This probe times the same call against itself (A and B, interleaved exactly as the
engine times an original and a candidate) several times over, under each flush mode
(``config.FLUSH_MODES``, and no flush for reference), and reports per mode how far the
A/B ratio strays from 1 and how far A's median moves between repetitions.
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
from tritonforge.runtime.timing import TimingPlan, time_interleaved_cuda  # noqa: E402

REPEATS = 4


@triton.jit
def _add_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


@triton.jit
def _row_norm(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) + 1e-6)
    tl.store(y_ptr + row * cols + offs, x * rstd, mask=mask)


def add_one(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    _add_one[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


def row_norm(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    _row_norm[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


def _spread(values: list[float]) -> float:
    """(max - min) / median: how far the figure moves between repetitions."""
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med else float("nan")


def host_heavy(us: float):
    """add_one after ``us`` of host work, as a wrapper with much Python around its launch."""
    def op(x: torch.Tensor) -> torch.Tensor:
        until = time.perf_counter() + us * 1e-6
        while time.perf_counter() < until:
            pass
        return add_one(x)
    return op


# (label, flush mode, interleave mode, paced): the engine's old default first
MODES = (("write-block", "write", "block", False), ("read-call", "read", "call", False),
         ("write-block-paced", "write", "block", True), ("read-call-paced", "read", "call", True))


def probe(op, shape: tuple[int, ...], mode: str, interleave: str, pace: bool) -> dict[str, object]:
    a = torch.rand(shape, device="cuda")
    b = a.clone()
    plan = TimingPlan(flush_mode=mode, interleave=interleave, pace=pace)
    medians_a, ratios, pooled = [], [], []
    for _ in range(REPEATS):
        samples, _method = time_interleaved_cuda({"A": lambda: op(a), "B": lambda: op(b)}, plan)
        ma, mb = statistics.median(samples["A"]), statistics.median(samples["B"])
        medians_a.append(ma * 1e3)
        ratios.append(mb / ma)
        pooled += samples["A"]
    pooled.sort()
    q = lambda p: pooled[min(len(pooled) - 1, int(p * len(pooled)))] * 1e3   # noqa: E731
    return {"median_a_us": [round(m, 2) for m in medians_a],
            "ratio_b_over_a": [round(r, 4) for r in ratios],
            "worst_ratio_off": round(max(abs(r - 1) for r in ratios), 4),
            "median_spread": round(_spread(medians_a), 4),
            "p10_p50_p90_us": [round(q(0.1), 2), round(q(0.5), 2), round(q(0.9), 2)]}


def flush_us(mode: str) -> float:
    from tritonforge.runtime.timing import _Flusher
    flush = _Flusher(True, mode)
    for _ in range(5):
        flush()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        flush()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / 20 * 1e3


def main(out: str) -> None:
    results: dict[str, object] = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                  "triton": triton.__version__, "repeats": REPEATS,
                                  "flush_us": {m: round(flush_us(m), 1) for m in ("write", "read")}}
    print("flush us", results["flush_us"], flush=True)
    t0 = time.time()
    workloads = [("add_one", add_one, (n,)) for n in (1 << 12, 1 << 20, 1 << 24)]
    workloads += [("row_norm", row_norm, (4096, 1024))]
    workloads += [(f"host_heavy_{us}us", host_heavy(us), (1 << 12,)) for us in (40, 120)]
    for label, op, shape in workloads:
        row = {}
        for name, mode, interleave, pace in MODES:
            row[name] = probe(op, shape, mode, interleave, pace)
        key = f"{label}{list(shape)}"
        results[key] = row
        print(key, json.dumps({m: (r["median_a_us"], r["worst_ratio_off"], r["median_spread"])
                               for m, r in row.items()}), flush=True)
        results["seconds"] = round(time.time() - t0, 1)
        with open(out, "w") as f:      # after each workload: a probe cut short keeps what it has
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "flush_probe.json")
