"""CPU priority of the work that never times (both sides of the worker boundary).

A GPU host runs one lane per GPU, each with a timing worker, a verification pool of spare
workers, a test generator and compile passes of up to eight threads a worker: on four H100s
sharing 64 cores (engine 1018ceeea5af, 2026-11-27), of the original's timings of cases under
50 us (baselines, search rounds and final checks), half spread over 1.5x from their 10th to
their 90th percentile and a third over 3x: l2_norm_triton1's perf-10 had half its 2000 samples
near 7.5 us and half at 20-60 us, and a candidate 1.25x faster by the medians read "within
noise". A timed call's host side (the wrapper's Python, the launches) that loses its core
between the start event and the kernel's launch leaves the GPU idle inside the sample; how much
of that spread this causes is not measured apart yet. Work that never times runs at a lower
priority (a higher nice value), so that the kernel's scheduler hands a core to a timing
worker's thread first, at no cost to the work lowered when cores are free:

- a worker process that never times (``Worker(nice=...)``: the verification pool's spare workers,
  the test generator), from its start (``WORKER_NICE_ENV``, applied by ``worker_main``);
- every compile thread of every worker (``COMPILE_NICE_ENV``, applied by
  ``quick_autotune.compile_in_parallel``'s threads), the timing worker's own included.

Raising a nice value needs no privilege; it is never lowered back. On Linux the value is a
thread's: threads started after it inherit it.
"""

from __future__ import annotations

import os

# messages from the driver to the workers it starts (runtime.worker_client), not user settings
WORKER_NICE_ENV = "TRITONFORGE_WORKER_NICE"
COMPILE_NICE_ENV = "TRITONFORGE_COMPILE_NICE"


def lower_priority(by: int) -> bool:
    """Raise the calling thread's nice value by ``by`` (0 or less: nothing); whether it did."""
    if by <= 0:
        return False
    try:
        os.nice(by)
    except (AttributeError, OSError):      # a platform without nice, or a limit: best effort
        return False
    return True


def from_env(name: str) -> int:
    """The nice increment the driver passed in ``name`` (0 when absent or unreadable)."""
    try:
        return max(0, int(os.environ.get(name, "0")))
    except ValueError:
        return 0


def compile_thread_start() -> None:
    """A compile thread's initializer: lower its priority by what the driver asked."""
    lower_priority(from_env(COMPILE_NICE_ENV))
