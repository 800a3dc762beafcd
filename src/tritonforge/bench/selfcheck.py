"""The noise floor: the same file timed against itself, interleaved, in one worker.

BENCHMARK.md asks that the same file against itself land within 2% (on cases over 50 us) before
any 1.05x speedup is believed. This measures exactly that, per case.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Status, Task, Variant
from ..runtime.service import Evaluator, original_variant


@dataclass(frozen=True)
class SelfRatio:
    case_id: str
    median_a_ms: float
    median_b_ms: float

    @property
    def ratio(self) -> float:
        return self.median_a_ms / self.median_b_ms if self.median_b_ms > 0 else float("nan")


@dataclass(frozen=True)
class SelfCheck:
    name: str
    ratios: tuple[SelfRatio, ...]
    sum_ratio: float
    error: str = ""


def self_check(task: Task, evaluator: Evaluator, case_ids: tuple[str, ...] | None = None) -> SelfCheck:
    a = original_variant(task)
    b = Variant("original-again", task.source, task.source_hash)
    ids = case_ids or tuple(c.id for c in task.performance_cases)
    ev = evaluator.evaluate(task, (a, b), purpose="selfcheck", case_ids=ids, verify=False,
                            time=True, keep_going=True)
    ra, rb = ev.results
    if ra.status is not Status.OK and not ra.timings:
        reason = ra.failure.one_line() if ra.failure else "no timings"
        return SelfCheck(task.name, (), float("nan"), reason)
    ratios = []
    for ta in ra.timings:
        tb = rb.timing(ta.case_id)
        if tb is not None:
            ratios.append(SelfRatio(ta.case_id, ta.median_ms, tb.median_ms))
    total_a = sum(r.median_a_ms for r in ratios)
    total_b = sum(r.median_b_ms for r in ratios)
    return SelfCheck(task.name, tuple(ratios), total_a / total_b if total_b else float("nan"))


from ..model.serialize import register as _register  # noqa: E402

_register(SelfRatio, SelfCheck)
