"""The noise floor: the same file timed against itself, interleaved, in one worker.

BENCHMARK.md asks that the same file against itself land within 2% (on cases over 50 us) before
any 1.05x speedup is believed. This measures exactly that, per case. With more than two copies
it is a search round's timing request with every candidate the original itself: a case whose
copies settle at different levels shows a bias of the harness, not of any candidate
(matrix_reduction's perf-07 read 0.17, 0.28 and 0.38 ms for different candidates in one request
and 0.37 ms for both sides of the final check; H100, 2026-11-25).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Status, Task, Variant
from ..model.serialize import register as _register
from ..runtime.evaluator import Evaluator, original_variant
from .options import MAX_COPIES


@dataclass(frozen=True)
class SelfRatio:
    case_id: str
    median_a_ms: float
    median_b_ms: float
    medians_ms: tuple[float, ...] = ()      # every copy's median, the first two being A and B

    @property
    def ratio(self) -> float:
        return self.median_a_ms / self.median_b_ms if self.median_b_ms > 0 else float("nan")

    @property
    def spread(self) -> float:
        """The slowest copy's median over the quickest's (1.0 = all alike)."""
        values = self.medians_ms or (self.median_a_ms, self.median_b_ms)
        return max(values) / min(values) if min(values) > 0 else float("nan")


@dataclass(frozen=True)
class SelfCheck:
    name: str
    ratios: tuple[SelfRatio, ...]
    sum_ratio: float
    error: str = ""


def self_check(task: Task, evaluator: Evaluator, case_ids: tuple[str, ...] | None = None,
               copies: int = 2) -> SelfCheck:
    """``copies`` (2 to ``MAX_COPIES``) copies of the original, each imported as a variant of
    its own, timed in one interleaved request; A and B are the first two."""
    if not 2 <= copies <= MAX_COPIES:
        raise ValueError(f"copies must be 2 to {MAX_COPIES}, not {copies}")
    variants = (original_variant(task), Variant("original-again", task.source, task.source_hash))
    variants += tuple(Variant(f"original-{i}", task.source, task.source_hash)
                      for i in range(3, copies + 1))
    ids = case_ids or tuple(c.id for c in task.performance_cases)
    ev = evaluator.evaluate(task, variants, purpose="selfcheck", case_ids=ids, verify=False,
                            time=True, keep_going=True)
    ra, rb = ev.results[0], ev.results[1]
    if ra.status is not Status.OK and not ra.timings:
        reason = ra.failure.one_line() if ra.failure else "no timings"
        return SelfCheck(task.name, (), float("nan"), reason)
    ratios = []
    for ta in ra.timings:
        tb = rb.timing(ta.case_id)
        if tb is not None:
            rest = [r.timing(ta.case_id) for r in ev.results[2:]]
            medians = (ta.median_ms, tb.median_ms) + tuple(t.median_ms for t in rest if t is not None)
            ratios.append(SelfRatio(ta.case_id, ta.median_ms, tb.median_ms,
                                    medians if len(medians) > 2 else ()))
    total_a = sum(r.median_a_ms for r in ratios)
    total_b = sum(r.median_b_ms for r in ratios)
    return SelfCheck(task.name, tuple(ratios), total_a / total_b if total_b else float("nan"))


_register(SelfRatio, SelfCheck)
