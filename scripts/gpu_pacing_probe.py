"""Does pacing keep a small kernel's timing on the GPU's time while the host's cores are busy?

The timing worker shares its host with the other lanes' compile and verification work. Unpaced,
a call whose host side falls behind the flush is timed as host time (``runtime.timing._Pacer``).
This times an add of two sizes A/A (two copies of the same call, in turns, as the search times a
candidate beside the incumbent) with ``runtime.timing.time_interleaved_cuda``, unpaced and
paced, with the host idle and with every core busy (``--load`` processes, default one per core,
each spinning Python and CPU matrix products), and prints one JSON line per (size, load, mode):
both copies' medians, their ratio, the first copy's 10th and 90th percentiles. GPU only; about a
minute.

    python3 scripts/gpu_pacing_probe.py OUT.jsonl [--load N]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from tritonforge.runtime.timing import TimingPlan, time_interleaved_cuda  # noqa: E402


@triton.jit
def _add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def _call(size: int):
    x, y = torch.randn(size, device="cuda"), torch.randn(size, device="cuda")
    out = torch.empty_like(x)
    grid = (triton.cdiv(size, 1024),)

    def fn():
        _add[grid](x, y, out, size, BLOCK=1024)
        return out
    return fn


def _burn(stop_at: float) -> None:
    """One core's load: Python spinning and small CPU matrix products, as compiles and checks are."""
    torch.set_num_threads(1)
    a = torch.randn(256, 256)
    while time.time() < stop_at:
        sum(i * i for i in range(20000))
        a = torch.tanh(a @ a)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--load", type=int, default=os.cpu_count() or 8)
    ap.add_argument("--sizes", default="65536,4194304")
    args = ap.parse_args()
    rows = []
    for load in (0, args.load):
        burners = []
        if load:
            stop_at = time.time() + 600
            ctx = mp.get_context("spawn")
            burners = [ctx.Process(target=_burn, args=(stop_at,), daemon=True) for _ in range(load)]
            for p in burners:
                p.start()
            time.sleep(3)
        try:
            for size in (int(s) for s in args.sizes.split(",")):
                for pace in (False, True):
                    fns = {"a": _call(size), "b": _call(size)}
                    for f in fns.values():
                        f()
                    torch.cuda.synchronize()
                    plan = TimingPlan(rounds=10, round_ms=25.0, warmup_ms=25.0, pace=pace,
                                      interleave="call", flush_mode="read", abandon_slower=None,
                                      case_budget_ms=None)
                    t0 = time.monotonic()
                    samples, method = time_interleaved_cuda(fns, plan)
                    a, b = sorted(samples["a"]), sorted(samples["b"])
                    row = {"size": size, "load": load, "pace": pace, "method": method.value,
                           "median_a_us": round(1e3 * statistics.median(a), 2),
                           "median_b_us": round(1e3 * statistics.median(b), 2),
                           "b_over_a": round(statistics.median(b) / statistics.median(a), 4),
                           "p10_a_us": round(1e3 * a[len(a) // 10], 2),
                           "p90_a_us": round(1e3 * a[9 * len(a) // 10], 2),
                           "samples": len(a), "wall_s": round(time.monotonic() - t0, 2)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            for p in burners:
                p.terminate()
            for p in burners:
                p.join(5)
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
