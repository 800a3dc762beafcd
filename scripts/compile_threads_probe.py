"""Does compiling Triton kernels in threads go faster than one after another? (no GPU needed)

Compiles the same small set of distinct kernels for sm_90 (``triton.compile`` with
``GPUTarget("cuda", 90, 32)``, a fresh cache each run) one after another, in N threads, and in N
processes, and prints the wall time of each. Threads as fast as processes mean Triton's compile
leaves the GIL free, which ``runtime.quick_autotune.compile_in_parallel`` relies on.

    python scripts/compile_threads_probe.py --workers 2 --kernels 6

On this project's 2-core CI machine (Triton 3.6, 2026-11-26): 22.3 s one after another, 13.1 s
in two threads, 13.1 s in two processes (with other work on the cores the gap closes: run it on
an idle machine).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="tf-compile-probe-"))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402


@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, R: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    x = tl.load(x_ptr + offs, mask=keep, other=0.0)
    acc = x
    for _ in tl.static_range(R):
        acc = tl.exp(acc) * 0.5 + tl.sin(acc) * x
    tl.store(y_ptr + offs, acc, mask=keep)


def _compile(job: tuple[int, int]) -> float:
    block, r = job
    src = ASTSource(fn=_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32",
                                           "BLOCK": "constexpr", "R": "constexpr"},
                    constexprs={"BLOCK": block, "R": r})
    start = time.perf_counter()
    triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    return time.perf_counter() - start


def _one_mode(mode: str, workers: int, kernels: int) -> None:
    jobs = [(1024 * (1 + i % 2), 20 + i // 2) for i in range(kernels)]
    start = time.perf_counter()
    if mode == "threads":
        with ThreadPoolExecutor(workers) as ex:
            list(ex.map(_compile, jobs))
    elif mode == "processes":
        with ProcessPoolExecutor(workers) as ex:
            list(ex.map(_compile, jobs))
    else:
        for job in jobs:
            _compile(job)
    print(f"{mode:10s} {time.perf_counter() - start:6.2f} s  ({kernels} kernels, "
          f"{workers if mode != 'serial' else 1} at a time)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kernels", type=int, default=4, help="distinct kernels per run")
    ap.add_argument("--mode", choices=("serial", "threads", "processes"),
                    help="one mode in this process (the default runs each in a fresh one)")
    args = ap.parse_args()
    if args.mode:
        _one_mode(args.mode, args.workers, args.kernels)
        return
    for mode in ("serial", "threads", "processes"):
        # the same kernels each time, each mode in a process of its own with an empty cache
        env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="tf-compile-probe-"))
        subprocess.run([sys.executable, __file__, "--mode", mode, "--workers", str(args.workers),
                        "--kernels", str(args.kernels)], env=env, check=True)


if __name__ == "__main__":
    main()
