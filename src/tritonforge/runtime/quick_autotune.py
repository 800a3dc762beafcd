"""Cheap autotuning for verification runs on the GPU.

``@triton.autotune`` picks a config on the first call with each key by benchmarking every config
with do_bench (25 ms of warm-up and 100 ms of repetitions each). A verification request only
needs the variant to compute its result with *some* config the autotuner could pick, yet it paid
for the full benchmark of every config, for every key, in each of the verification workers that
share the GPU: in H100 session 10 three autotuned records (int4_matmul, max_reduction,
bmm_chunk_bwd) spent their whole nine-minute call without finishing one record. Here the
autotuners of a verification request's modules run each config twice (compile, then one timed
run) and pick the quickest.

What this does not change: timed requests (the search's timings, the final check) import their
own modules and autotune for real, and the fresh-process final check verifies the config the real
autotuner picks there. The CPU interpreter has its own shim (``runtime.cpu_shim``).
"""

from __future__ import annotations

import time
import types
from typing import Any, Callable

import torch


def quick_bench(kernel_call: Callable[[], object], quantiles: Any = None, **_: object) -> Any:
    """Run ``kernel_call`` twice; the second run's wall time (ms, synchronised) is its score."""
    kernel_call()
    _sync()
    start = time.perf_counter()
    kernel_call()
    _sync()
    ms = (time.perf_counter() - start) * 1e3
    return [ms, ms, ms] if quantiles else ms


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def quicken_autotuners(module: types.ModuleType) -> int:
    """Give every autotuner defined at the top level of ``module`` the quick benchmark; returns
    how many. ``Autotuner.do_bench`` is a cached property, so the instance attribute wins."""
    from ..verify.config_variation import autotuners

    found = autotuners(module)
    for tuner in found:
        tuner.do_bench = quick_bench
    return len(found)


__all__ = ["quick_bench", "quicken_autotuners"]
