"""The GPU lock the runs on one GPU take turns through (driver side), and the time this process
spent blocked by other processes.

Unset (``Settings.gpu_lock`` empty), nothing is locked. Shards of one optimize run set it
(scripts/gpu_session.sh: $TRITONFORGE_GPU_LOCK, with the scope 'all'), so that no process's
kernels land inside another's timed samples. An optimize session on a GPU sets one of its own
where none is set (``lock_one_gpu``, from ``compose.OptimizeSession``): its timing worker, its
verification pool, its test generator and its final-check workers are processes of their own on
that one GPU, and without a lock a pool worker's kernels ran inside the timing worker's samples.
Two CUDA contexts on one GPU take turns in time slices, so a short timed kernel can wait behind
another process's work: on four H100s (120 s a record, 2026-11-27), where no lane locked, half of
the original's timings of cases under 50 us spread over 1.5x from their 10th to their 90th
percentile (engine 1018ceeea5af), and 62% in a smoke of an engine whose test sections draw their
random inputs on the GPU (4ecfc35b906c): fp4_to_bf16's baseline went from 8% of its cases to 69%.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time as _time
from collections.abc import Iterator

from ..config import Settings, env_name, env_settings

log = logging.getLogger(__name__)

GPU_LOCK_ENV = env_name("gpu_lock")                 # Settings.gpu_lock
GPU_LOCK_SCOPE_ENV = env_name("gpu_lock_scope")     # Settings.gpu_lock_scope
_lock_depth = threading.local()


_owned: str | None = None      # the lock file lock_one_gpu set for this process


def lock_one_gpu(path: str | os.PathLike) -> bool:
    """Have this process's runs on its GPU take turns through the lock file ``path``, scope
    'all' (timing and profiling exclusive, untimed runs shared), unless a lock is set already by
    the environment or the config file (a shard's, a user's); whether it set it. A lock this
    function set before (an earlier session of the same process) gives way to the new one."""
    global _owned
    current = env_settings().sharing.gpu_lock       # the environment's, else the config file's
    if current and current != _owned:
        return False
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    os.environ[GPU_LOCK_ENV] = _owned = str(path)
    os.environ[GPU_LOCK_SCOPE_ENV] = "all"
    return True


def gpu_shared_with_other_processes(settings: Settings | None = None) -> bool:
    """True when the GPU lock covers all runs and was set for processes that share the GPU (a
    shard's), not by this process for its own workers (``lock_one_gpu``): only then does a
    request compile before it takes the lock (``Evaluator._compile_first``). Within one session
    verification ends before timing starts, and the extra pass would build every case's inputs
    twice (destindex_copy's test section: 4 s a build on an H100)."""
    return gpu_lock_covers_all(settings) and \
        (settings or env_settings()).sharing.gpu_lock != _owned


def gpu_lock_covers_all(settings: Settings | None = None) -> bool:
    """True when there is a GPU lock and its scope is 'all' (``Settings.gpu_lock``,
    ``gpu_lock_scope``; default: ``config.env_settings()``): untimed GPU runs (verification) take
    the lock shared, so no process's kernels land inside another process's timed samples.

    Test generation may overlap untimed work with timing (its timings only size the cases); an
    optimization suite run in shards must not (its timings decide what is accepted).
    """
    s = (settings or env_settings()).sharing
    return bool(s.gpu_lock) and s.gpu_lock_scope == "all"


def lock_mode(gpu: object, timed: bool, settings: Settings | None = None) -> str | None:
    """The lock a GPU run takes: 'exclusive' to time or profile, 'shared' for untimed work when
    the scope is 'all', None when it runs on no GPU or the scope lets it overlap."""
    if not gpu:
        return None
    if timed:
        return "exclusive"
    return "shared" if gpu_lock_covers_all(settings) else None


class _BlockedClock:
    """Seconds this process spent blocked by other processes on the GPU lock: some thread waits
    for it and none of the process's threads holds it.

    A search's time budget should buy search, not queueing behind other shards: on the H100
    (2026-11-23) three shards made four records spend their whole budget before round 1.
    The optimizer takes this off its budget clock. (CPU work the process does meanwhile, outside
    the lock, is counted as blocked too: a slight over-credit, only while sharing a GPU.)
    """

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self.waiting = self.holding = 0
        self._total = 0.0
        self._since: float | None = None

    def change(self, waiting: int = 0, holding: int = 0) -> None:
        with self._mu:
            self.waiting += waiting
            self.holding += holding
            now = _time.perf_counter()
            blocked = self.waiting > 0 and self.holding == 0
            if blocked and self._since is None:
                self._since = now
            elif not blocked and self._since is not None:
                self._total += now - self._since
                self._since = None

    def seconds(self) -> float:
        with self._mu:
            return self._total + (_time.perf_counter() - self._since if self._since is not None else 0.0)


_blocked = _BlockedClock()


def gpu_blocked_s() -> float:
    """Seconds so far that this process waited on other processes for the GPU (0 when unshared)."""
    return _blocked.seconds()


@contextlib.contextmanager
def gpu_lock(mode: str | None, settings: Settings | None = None) -> Iterator[None]:
    """Take the file lock ``Settings.gpu_lock`` names ($TRITONFORGE_GPU_LOCK), when set (default:
    ``config.env_settings()``): a readers-writer lock across
    the processes that share one GPU.

    'exclusive' (timing, ncu) waits until no other process runs anything on the GPU under the lock;
    'shared' (untimed runs) may run beside other shared holders but never beside an exclusive one.
    A turnstile file (``<lock>.turn``) gives a waiting exclusive holder priority, or a steady
    stream of verifications could starve the timing forever. Nested use in one thread is a no-op
    (no upgrade): profiling times its case through an Evaluator while holding the lock.
    Unset (the default), nothing is locked: one process owns the GPU.
    """
    path = (settings or env_settings()).sharing.gpu_lock
    if mode is None or not path or getattr(_lock_depth, "n", 0):
        yield
        return
    with open(path, "a") as main, open(path + ".turn", "a") as turn:
        _blocked.change(waiting=1)
        try:
            fcntl.flock(turn, fcntl.LOCK_EX)
            if mode == "shared":
                fcntl.flock(turn, fcntl.LOCK_UN)
                fcntl.flock(main, fcntl.LOCK_SH)
            else:
                fcntl.flock(main, fcntl.LOCK_EX)
                fcntl.flock(turn, fcntl.LOCK_UN)
        except BaseException:
            _blocked.change(waiting=-1)
            raise
        _blocked.change(waiting=-1, holding=1)
        _lock_depth.n = 1
        try:
            yield
        finally:
            _lock_depth.n = 0
            fcntl.flock(main, fcntl.LOCK_UN)
            _blocked.change(holding=-1)
