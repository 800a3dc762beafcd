"""A benchmark pass (driver side): records handed out from one queue to lanes, one per GPU, and
each finished record appended to ``records.jsonl`` as it comes back.

The executor is what runs the lanes: ``local.LocalGpuExecutor`` (one process per visible GPU of
this host) or ``ray_exec.RayExecutor`` (Ray tasks that each claim a GPU). Both give the same
three calls to this loop: ``submit`` a job to a free slot, ``wait`` for finished or lost jobs,
``cut`` whatever still runs when the budget ends. A lost job (its lane or node died) goes back
to the front of the queue, up to ``max_attempts`` starts; a record cut by the deadline writes
nothing and is started again by the next call. A record starts only with its whole per-kernel
budget left before the deadline (one squeezed into a call's end would be stored with a search it
never had), and the pass itself ends by its deadline, every lane stopped.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Callable, Protocol

from .engine import EngineId
from .lane import LaneReply
from .records import PassRecord, RecordRef, append_record, pass_record

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    ref: RecordRef
    redo: bool = False
    attempt: int = 1


@dataclass(frozen=True)
class Lost:
    """A job whose lane (process, Ray worker or node) died before it replied."""

    reason: str


class Executor(Protocol):
    def slots(self) -> int: ...
    def submit(self, job: Job) -> None: ...
    def wait(self, timeout_s: float) -> list[tuple[Job, LaneReply | Lost]]: ...
    def cut(self) -> list[Job]: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class PassOutcome:
    written: tuple[PassRecord, ...]     # records this call wrote
    left: tuple[str, ...]               # not started: no time left
    cut: tuple[str, ...]                # started, stopped by the deadline: start again next call
    failed: tuple[tuple[str, str], ...] # (name, why): an error in the lane, or lost too often
    wall_s: float


def run_pass(jobs: list[Job], executor: Executor, *, records_path: str, engine: EngineId,
             settings_hash: str, per_kernel_s: float, budget_s: float | None,
             progress: Callable[[str], None] = lambda s: None,
             on_record: Callable[[PassRecord], None] = lambda r: None,
             max_attempts: int = 3, poll_s: float = 2.0) -> PassOutcome:
    """Run ``jobs`` on ``executor`` until done or ``budget_s`` ends (see the module docstring)."""
    start = time.monotonic()
    deadline = None if budget_s is None else start + budget_s
    pending = deque(jobs)
    running = 0
    written: list[PassRecord] = []
    failed: list[tuple[str, str]] = []
    cut: list[str] = []

    def left_s() -> float:
        return float("inf") if deadline is None else deadline - time.monotonic()

    while pending or running:
        while pending and running < executor.slots() and left_s() >= per_kernel_s:
            job = pending.popleft()
            progress(f"{job.ref.name}: started"
                     + (f" (attempt {job.attempt})" if job.attempt > 1 else "")
                     + (" [--redo: debugging, not publishable]" if job.redo else ""))
            executor.submit(job)
            running += 1
        if not running:
            break                                  # nothing runs and nothing may start
        if left_s() <= 0:
            stopped = executor.cut()
            cut += [j.ref.name for j in stopped]
            running = 0
            progress(f"deadline: {len(stopped)} record(s) cut ({', '.join(cut)}); "
                     "the next call starts them again")
            break
        for job, reply in executor.wait(min(poll_s, max(left_s(), 0.01))):
            running -= 1
            if isinstance(reply, Lost):
                if job.attempt < max_attempts:
                    progress(f"{job.ref.name}: lost ({reply.reason}); queued again")
                    pending.appendleft(replace(job, attempt=job.attempt + 1))
                else:
                    failed.append((job.ref.name, f"lost {job.attempt} times: {reply.reason}"))
                    progress(f"{job.ref.name}: lost {job.attempt} times; left for a later call")
                continue
            if reply.error or reply.result is None:
                failed.append((job.ref.name, reply.error or "no result"))
                progress(f"{job.ref.name}: failed in its lane: {reply.error}")
                continue
            if reply.engine.source_hash != engine.source_hash:
                failed.append((job.ref.name, f"made by engine {reply.engine.label}, not "
                                             f"{engine.label}: every lane must run the same code"))
                progress(f"{job.ref.name}: refused, its lane runs another engine "
                         f"({reply.engine.label})")
                continue
            record = pass_record(job.ref, reply.result, engine, settings_hash, per_kernel_s,
                                 gpu=reply.gpu, redo=job.redo)
            append_record(records_path, record)
            written.append(record)
            on_record(record)
            progress(f"{record.name}: {record.status}, {record.speedup:.3f}x "
                     f"({record.wall_s:.0f} s, {record.gpu})")
    return PassOutcome(tuple(written), tuple(j.ref.name for j in pending), tuple(cut),
                       tuple(failed), time.monotonic() - start)
