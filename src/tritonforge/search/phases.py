"""Where an optimization's wall time goes, phase by phase (baseline, profile, propose, verify,
repair, time, final check), and how much of each phase was spent queued for a GPU that other
processes share (suite shards under one lock).

Measured because the median wall time per kernel is a target of its own (under 120 s) and a
record's total says nothing about what to make faster: on the H100 the medians were profile 18 s,
verify 24 s, time 14 s, while one final check took 204 s (an autotuned GEMM at 31 sizes).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from ..model.serialize import register as _register
from ..runtime.gpu_lock import gpu_blocked_s


@dataclass(frozen=True)
class PhaseTime:
    """Seconds of one phase, summed over the rounds: ``queued_s`` of ``wall_s`` waited for the
    GPU lock (process-wide, so parallel verification threads can add up to more than wall)."""
    name: str
    wall_s: float
    queued_s: float


class PhaseClock:
    """Accumulates wall and queued seconds per phase name, in the order phases first ran."""

    def __init__(self, blocked: Callable[[], float] = gpu_blocked_s,
                 clock: Callable[[], float] = time.perf_counter):
        self._blocked, self._clock = blocked, clock
        self._totals: dict[str, list[float]] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0, b0 = self._clock(), self._blocked()
        try:
            yield
        finally:
            total = self._totals.setdefault(name, [0.0, 0.0])
            total[0] += self._clock() - t0
            total[1] += self._blocked() - b0

    def times(self) -> tuple[PhaseTime, ...]:
        return tuple(PhaseTime(n, w, q) for n, (w, q) in self._totals.items())


_register(PhaseTime)
