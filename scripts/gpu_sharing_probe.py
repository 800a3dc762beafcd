"""Does untimed GPU work of another process disturb the timing of a small kernel on the same GPU?

A pass lane runs a timing worker beside a verification pool, a test generator and compile passes,
each a process of its own on the lane's one GPU. This times one small Triton kernel (an add of
``--size`` elements, L2 flushed before each call, CUDA events around it) alone, then while a
second process runs a light load (small random draws, a short sleep between them, as test
sections and generated cases do) and a heavy one (back-to-back matrix products), and prints the
10th, 50th and 90th percentile of each, as JSON lines. GPU only; one call of a few tens of seconds.

    python3 scripts/gpu_sharing_probe.py [--calls 2000] [--size 1048576]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def samples_ms(calls: int, size: int) -> list[float]:
    """``calls`` timings (ms) of the add, each after an L2 flush (a 256 MB buffer zeroed)."""
    x, y = torch.randn(size, device="cuda"), torch.randn(size, device="cuda")
    out = torch.empty_like(x)
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    grid = (triton.cdiv(size, 1024),)
    for _ in range(20):
        _add[grid](x, y, out, size, BLOCK=1024)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    for s, e in zip(starts, ends):
        flush.zero_()
        s.record()
        _add[grid](x, y, out, size, BLOCK=1024)
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def load(kind: str, seconds: float) -> None:
    """The other process's untimed work, for ``seconds``."""
    end = time.monotonic() + seconds
    if kind == "heavy":
        a = torch.randn(4096, 4096, device="cuda")
        while time.monotonic() < end:
            (a @ a).sum().item()
        return
    while time.monotonic() < end:
        torch.randn(1 << 20, device="cuda").sum().item()
        time.sleep(0.001)


def summary(label: str, ms: list[float]) -> dict:
    s = sorted(ms)
    p10, p50, p90 = (s[int(q * (len(s) - 1))] * 1e3 for q in (0.1, 0.5, 0.9))
    return {"load": label, "calls": len(s), "p10_us": round(p10, 2), "p50_us": round(p50, 2),
            "p90_us": round(p90, 2), "p90_over_p10": round(p90 / p10, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--load", choices=("light", "heavy"), help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.load:                       # the second process
        load(args.load, args.seconds)
        return 0
    print(json.dumps(summary("none", samples_ms(args.calls, args.size))), flush=True)
    for kind in ("light", "heavy"):
        other = subprocess.Popen([sys.executable, __file__, "--load", kind, "--seconds", "60"])
        time.sleep(5.0)                 # its CUDA context made and its loop running
        try:
            print(json.dumps(summary(kind, samples_ms(args.calls, args.size))), flush=True)
        finally:
            other.kill()
            other.wait()
    print(json.dumps(summary("none, again", samples_ms(args.calls, args.size))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
