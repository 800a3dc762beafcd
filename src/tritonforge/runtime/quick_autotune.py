"""Cheap autotuning for verification runs on the GPU.

``@triton.autotune`` picks a config on the first call with each key by benchmarking every config
with do_bench (25 ms of warm-up and 100 ms of repetitions each). A verification request only
needs the variant to compute its result with *some* config the autotuner could pick, yet it paid
for the full benchmark of every config, for every key, in each of the verification workers that
share the GPU: on the H100 (2026-11-24) three autotuned records (int4_matmul, max_reduction,
bmm_chunk_bwd) spent their whole nine-minute call without finishing one record. Here the
autotuners of a verification request's modules run each config twice (compile, then one timed
run) and pick the quickest.

The search's timing requests autotune with a short but real benchmark (``short_bench``: do_bench
with ``rep_ms`` of repetitions and a fifth of that as warm-up, in place of 25 + 100 ms per config):
the incumbent and every candidate are re-tuned on each key in every round, and on the H100 (2026-11-25)
one round of max_reduction (7 variants of 11-19 configs on 4 keys) held the exclusive GPU lock for
272 s while three shards waited. A short benchmark still times each config and picks the quickest;
both sides of a comparison are tuned the same way. The final check (``TimingPlan.autotune_rep_ms``
None) autotunes with Triton's own benchmark in a fresh process, so the figures reported are those
of the config the user's real autotuner picks, unless that tuning would not end by the record's
cap: then it uses the short benchmark too, and its decision says so (``search.final_check``). The CPU interpreter has its own shim
(``runtime.cpu_shim``).
"""

from __future__ import annotations

import contextlib
import time
import types
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable

import torch
import triton.testing   # do_bench looked up per call, as Triton's own autotuner does
from triton.runtime.jit import JITFunction

from ..verify.config_variation import autotuners
from .priority import compile_thread_start


def quick_bench(kernel_call: Callable[[], object], quantiles: Any = None, **_: object) -> Any:
    """Run ``kernel_call`` twice; the second run's wall time (ms, synchronised) is its score."""
    kernel_call()
    _sync()
    start = time.perf_counter()
    kernel_call()
    _sync()
    ms = (time.perf_counter() - start) * 1e3
    return [ms, ms, ms] if quantiles else ms


def short_bench(rep_ms: float) -> Callable[..., Any]:
    """Triton's do_bench with ``rep_ms`` of repetitions and ``rep_ms / 5`` of warm-up: the same
    statistic (median and quantiles of L2-flushed runs) on fewer samples."""
    def bench(kernel_call: Callable[[], object], quantiles: Any = None, **_: object) -> Any:
        return triton.testing.do_bench(kernel_call, warmup=max(1.0, rep_ms / 5), rep=rep_ms,
                                       quantiles=quantiles)

    bench.rep_ms = rep_ms  # type: ignore[attr-defined]
    return bench


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _give_bench(module: types.ModuleType, bench: Callable[..., Any]) -> int:
    """Give every autotuner defined at the top level of ``module`` ``bench``; returns how many.
    ``Autotuner.do_bench`` is a cached property, so the instance attribute wins."""
    found = autotuners(module)
    for tuner in found:
        tuner.do_bench = bench
    return len(found)


def quicken_autotuners(module: types.ModuleType) -> int:
    """Give every top-level autotuner of ``module`` the quick benchmark; returns how many."""
    return _give_bench(module, quick_bench)


@contextlib.contextmanager
def compile_without_launching() -> Iterator[None]:
    """Every ``@triton.jit`` kernel called inside compiles (or loads from Triton's cache) and
    returns without launching: ``JITFunction.run`` with ``warmup=True``, which autotuners and
    heuristics reach too. A timed request's kernels are compiled this way beforehand, with no
    GPU lock held, so that the timed request compiles none while it holds the GPU exclusively.
    The wrapper's own torch operations still run, on outputs no kernel wrote."""
    launch = JITFunction.run

    def compile_only(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        return launch(self, *args, grid=grid, warmup=True, **kwargs)

    JITFunction.run = compile_only
    try:
        yield
    finally:
        JITFunction.run = launch


@contextlib.contextmanager
def compiles_reported(notify: Callable[[str], None]) -> Iterator[None]:
    """``notify(kernel name)`` before each kernel compiles (or loads from Triton's disk cache)
    inside, through Triton's ``jit_cache_hook`` (called before a compile; a falsy answer lets it
    go on; a hook already set is called after and answers): a variant's first run of a case
    that compiles is then a compile to the driver, whose silence allowance for a run is
    measured against the reference's run of the same case (``worker_client.step_timeout_s``),
    not against a compile's."""
    runtime = triton.knobs.runtime
    before = runtime.jit_cache_hook

    def hook(**kwargs: Any) -> Any:
        notify(getattr(kwargs.get("fn"), "name", "") or "")
        return before(**kwargs) if before is not None else None    # a hook already there answers

    runtime.jit_cache_hook = hook
    try:
        yield
    finally:
        runtime.jit_cache_hook = before


@contextlib.contextmanager
def compile_in_parallel(threads: int,
                        progress: Callable[[int, int], None] | None = None) -> Iterator[None]:
    """Kernels that compile inside (``compile_without_launching``'s calls) compile side by side in
    ``threads`` threads: Triton's ``AsyncCompileMode`` (Triton 3.4+) hands each compile to the
    pool and the call returns at once; leaving waits for every compile, calling ``progress(done,
    total)`` as each ends (a worker's no-progress timeout must not take the wait for a hang). A
    compile that fails here is dropped: the run that needs the kernel compiles it again and
    reports it. Triton 3.6's compile leaves the GIL free: six kernels compiled for sm_90 in 22.3 s
    one after another, 13.1 s in two threads and 13.1 s in two processes, on two CPU cores
    (``scripts/compile_threads_probe.py --kernels 6``, 2026-11-26). With one thread, or a Triton without ``AsyncCompileMode``, nothing
    changes: each call compiles before it returns."""
    mode_type = getattr(triton, "AsyncCompileMode", None)
    if threads <= 1 or mode_type is None:
        yield
        return
    # each thread at the priority the driver asked for compiles (runtime.priority)
    with ThreadPoolExecutor(threads, thread_name_prefix="tritonforge-compile",
                            initializer=compile_thread_start) as pool:
        mode = mode_type(pool, ignore_errors=True)
        with mode:
            yield
            futures = list(mode.raw_futures)
            for done, _ in enumerate(as_completed(futures), 1):
                if progress is not None:
                    progress(done, len(futures))


def shorten_autotuners(module: types.ModuleType, rep_ms: float) -> int:
    """Give every top-level autotuner of ``module`` ``short_bench(rep_ms)``; returns how many."""
    return _give_bench(module, short_bench(rep_ms))


__all__ = ["compile_in_parallel", "compile_without_launching", "quick_bench",
           "quicken_autotuners", "short_bench", "shorten_autotuners"]
