"""Baseline sweep over TritonBench-G: which records are runnable, and their time per case.

Runnable (BENCHMARK.md): the original's test section runs without error, and its performance
script runs at one or more sizes. Each record's outcome is written to the run store as soon as it
is known; a sweep stopped by its time budget (or killed) resumes where it stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable

from ..model import CaseRole, Failure, Status, Task, Timing, TimingMethod, VariantResult
from ..runtime.evaluator import Evaluator, original_variant
from ..runtime.timing import TIMING_REVISION, TimingPlan
from ..store import RunStore

log = logging.getLogger(__name__)

BASELINE_PLAN = TimingPlan(rounds=5, round_ms=10.0, warmup_ms=10.0, max_calls_per_round=40)


@dataclass(frozen=True)
class CaseBaseline:
    case_id: str
    ok: bool
    median_ms: float | None = None
    spread: float | None = None
    error: str = ""


@dataclass(frozen=True)
class BaselineRecord:
    name: str
    origin: str
    runnable: bool
    test_ok: bool
    test_error: str
    cases: tuple[CaseBaseline, ...]
    wall_s: float
    device: str
    timing_revision: int = 1          # runtime.timing.TIMING_REVISION when timed (1: before it existed)

    @property
    def perf_ok(self) -> int:
        return sum(c.ok for c in self.cases)


def check_runnable(task: Task, evaluator: Evaluator, max_restarts: int = 4) -> RunCheck:
    """Phase 1 (parallel-safe): run the test section and every performance case once, untimed.

    Retries the cases after a crash or hang (a sticky CUDA error ends the worker).
    """
    start = time.perf_counter()
    original = original_variant(task)
    test_ok, test_error = True, ""
    tests = [c.id for c in task.cases if c.role is CaseRole.CORRECTNESS]
    if tests:
        ev = evaluator.evaluate(task, (original,), purpose="baseline-test", case_ids=tuple(tests),
                                verify=False, time=False, keep_going=True)
        r = ev.results[0]
        failure = r.failure or (r.case_failures[0] if r.case_failures else None)
        test_ok, test_error = failure is None, failure.one_line() if failure else ""
    remaining = [c.id for c in task.performance_cases]
    failed: dict[str, str] = {}
    for _ in range(max_restarts + 1):
        if not remaining:
            break
        ev = evaluator.evaluate(task, (original,), purpose="baseline-run",
                                case_ids=tuple(remaining), verify=False, time=False,
                                keep_going=True)
        r = ev.results[0]
        for f in r.case_failures:
            failed[f.case_id] = f.one_line()
        if r.failure is None:
            break
        culprit = r.failure.case_id or remaining[0]
        failed[culprit] = r.failure.one_line()
        if r.failure.status is Status.OOM:
            # memory ran out at ``culprit`` (the cases before it ran): perf scripts build every
            # input size at once, so a retry here would rebuild them and die the same way (seen
            # on an H200 sweep, 2026-11-22); phase 2 retries them alone, with more memory
            after = remaining[remaining.index(culprit) + 1:] if culprit in remaining else remaining
            for cid in after:
                failed.setdefault(cid, f"not run: {r.failure.one_line()}")
            break
        # the worker died at ``culprit``: the cases before it ran; retry the ones after it
        remaining = remaining[remaining.index(culprit) + 1:] if culprit in remaining else []
    ok = tuple(c.id for c in task.performance_cases if c.id not in failed)
    return RunCheck(task.name, test_ok, test_error, ok, tuple(sorted(failed.items())),
                    time.perf_counter() - start)


@dataclass(frozen=True)
class RunCheck:
    name: str
    test_ok: bool
    test_error: str
    perf_ok: tuple[str, ...]
    perf_failed: tuple[tuple[str, str], ...]
    wall_s: float


def out_of_memory(error: str) -> bool:
    """Device or host memory ran out (or a case was not run after that happened)."""
    return error.removeprefix("not run: ").startswith("oom")


def neighbours_fault(error: str) -> bool:
    """A phase-1 failure that sharing the machine may explain: memory ran out, or a run made no
    progress in time (chunk_retention_ops' test section, H100: killed after 180 s with seven
    other workers compiling beside it)."""
    return out_of_memory(error) or error.removeprefix("not run: ").startswith("timeout")


def retry_alone(task: Task, check: RunCheck, evaluator: Evaluator) -> RunCheck:
    """Re-run, alone, the test section and the cases that ran out of memory or time in phase 1;
    what passes now counts as run.

    In phase 1 the workers share the GPU's memory and the machine's, each under a share of the
    host memory; ``evaluator`` here runs alone, with the larger limit phase 2 is given, so a
    failure that was the neighbours' fault (or the share's) is not held against the original.
    """
    retry = tuple(cid for cid, err in check.perf_failed if neighbours_fault(err))
    test_ok, test_error = check.test_ok, check.test_error
    if not test_ok and neighbours_fault(test_error):
        tests = tuple(c.id for c in task.cases if c.role is CaseRole.CORRECTNESS)
        r = evaluator.evaluate(task, (original_variant(task),), purpose="baseline-test-alone",
                               case_ids=tests, verify=False, time=False, keep_going=True).results[0]
        failure = r.failure or (r.case_failures[0] if r.case_failures else None)
        test_ok, test_error = failure is None, failure.one_line() if failure else ""
    if not retry:
        return replace(check, test_ok=test_ok, test_error=test_error)
    r = evaluator.evaluate(task, (original_variant(task),), purpose="baseline-run-alone",
                           case_ids=retry, verify=False, time=False, keep_going=True).results[0]
    still = {f.case_id: f.one_line() for f in r.case_failures}
    if r.failure is not None:
        still.update({cid: r.failure.one_line() for cid in retry if cid not in still})
    failed = dict(check.perf_failed)
    for cid in retry:             # the alone run's word replaces phase 1's
        if cid in still:
            failed[cid] = still[cid]
        else:
            del failed[cid]
    ran = set(check.perf_ok) | {cid for cid in retry if cid not in still}
    ok = tuple(c.id for c in task.performance_cases if c.id in ran)
    return replace(check, test_ok=test_ok, test_error=test_error, perf_ok=ok,
                   perf_failed=tuple(sorted(failed.items())))


def time_baseline(task: Task, check: RunCheck, evaluator: Evaluator) -> BaselineRecord:
    """Phase 2 (one at a time on the GPU): time the performance cases that ran."""
    start = time.perf_counter()
    timings: dict[str, CaseBaseline] = {}
    if check.perf_ok:
        ev = evaluator.evaluate(task, (original_variant(task),), purpose="baseline-time",
                                case_ids=check.perf_ok, verify=False, time=True,
                                keep_going=True, run_cases=False, plan=BASELINE_PLAN)
        r = ev.results[0]
        for t in r.timings:
            timings[t.case_id] = CaseBaseline(t.case_id, True, t.median_ms, t.spread)
        for f in r.case_failures:
            timings[f.case_id] = CaseBaseline(f.case_id, False, error=f.one_line())
    failed = dict(check.perf_failed)
    cases = tuple(timings.get(c.id, CaseBaseline(c.id, False, error=failed.get(c.id, "not timed")))
                  for c in task.performance_cases)
    runnable = check.test_ok and any(c.ok for c in cases)
    return BaselineRecord(task.name, task.origin, runnable, check.test_ok, check.test_error,
                          cases, check.wall_s + time.perf_counter() - start, evaluator.device,
                          TIMING_REVISION)


def run_baseline(tasks: list[Task], make_evaluator: Callable[[int], Evaluator], store: RunStore, *,
                 jobs: int = 1, budget_s: float | None = None,
                 progress: Callable[[str], None] = lambda s: None,
                 make_alone: Callable[[], Evaluator] | None = None,
                 done_with: Callable[[str], None] = lambda name: None,
                 rewarm_share: float = 0.25) -> tuple[list[BaselineRecord], list[str]]:
    """Baseline every task not already in the store, in two phases; stop at the budget.

    Phase 1 runs ``jobs`` workers side by side (compilation is CPU-bound and fills Triton's
    cache); phase 2 times one task at a time, alone on the GPU, in ``make_alone()``'s worker
    (default: the first of phase 1), after retrying alone what ran out of memory in phase 1.
    ``done_with(name)`` is called after each phase of a task (to drop its cached inputs).
    Records checked by an earlier process are checked again in phase 1 (``rewarm_selection``,
    up to ``rewarm_share`` of the budget) to compile their kernels side by side.
    Returns (records, names left).
    """
    start = time.perf_counter()

    def over() -> bool:
        return budget_s is not None and time.perf_counter() - start > budget_s

    todo = [t for t in tasks if not current(store.get_record("baseline", t.name))]
    need_check = [t for t in todo if store.get_record("baseline-run", t.name) is None]
    # Checked by an earlier process (an earlier call, on a machine since given back): Triton's
    # cache is cold, and phase 2 would compile everything again, one kernel at a time. Re-run
    # the quickest of them in phase 1, side by side, so phase 2 finds them compiled.
    fresh = {t.name for t in need_check}
    stale = {t.name: store.get_record("baseline-run", t.name) for t in todo if t.name not in fresh}
    rewarm = set(rewarm_selection({n: c.wall_s for n, c in stale.items()}, jobs, budget_s, rewarm_share))
    warmed = fresh | rewarm
    need_check = need_check + sorted((t for t in todo if t.name in rewarm), key=lambda t: stale[t.name].wall_s)
    lock = threading.Lock()
    evaluators = [make_evaluator(i) for i in range(max(1, jobs))]
    try:
        queue = list(need_check)

        def work(evaluator: Evaluator) -> None:
            while True:
                with lock:
                    if not queue or over():
                        return
                    task = queue.pop(0)
                check = check_runnable(task, evaluator)
                done_with(task.name)
                with lock:
                    store.put_task(task)
                    store.put_record("baseline-run", task.name, check)
                    progress(f"ran {task.name}: test {'ok' if check.test_ok else 'FAILED'}, "
                             f"{len(check.perf_ok)}/{len(task.performance_cases)} perf cases ran "
                             f"({check.wall_s:.1f} s)")

        threads = [threading.Thread(target=work, args=(e,)) for e in evaluators]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # Quickest first (by the untimed run's wall time): a record whose autotuning takes
        # minutes (int8_matmul_kernel: 269 s untimed on an H100) must not hold back the rest
        # of a budgeted call; one that would not fit in the budget left waits for a later call.
        checks = {t.name: store.get_record("baseline-run", t.name) for t in todo}
        if make_alone is not None and any(checks.values()) and not over():
            for e in evaluators:      # phase 2 is alone on the device: give the memory back
                e.close()
            evaluators = [make_alone()]
        # Warmed in this process first: Triton's cache holds their kernels, so their phase-1 wall
        # time (mostly compilation) says little about timing them, and they take no fit check.
        for task in sorted(todo, key=lambda t: (t.name not in warmed,
                                                checks[t.name].wall_s if checks[t.name] else 0.0)):
            check = checks[task.name]
            if check is None or over():
                continue
            if (budget_s is not None and task.name not in warmed
                    and check.wall_s > budget_s - (time.perf_counter() - start)):
                progress(f"left for a later run: {task.name} (its untimed run took "
                         f"{check.wall_s:.0f} s, more than the budget left)")
                continue
            check = retry_alone(task, check, evaluators[0])
            store.put_record("baseline-run", task.name, check)
            rec = time_baseline(task, check, evaluators[0])
            done_with(task.name)
            store.put_record("baseline", task.name, rec)
            progress(f"timed {task.name}: {'runnable' if rec.runnable else 'NOT runnable'} "
                     f"({rec.perf_ok}/{len(rec.cases)} perf cases)")
    finally:
        for e in evaluators:
            e.close()
    records = [r for r in (store.get_record("baseline", t.name) for t in tasks) if current(r)]
    left = [t.name for t in tasks if not current(store.get_record("baseline", t.name))]
    return records, left


def rewarm_selection(walls: dict[str, float], jobs: int, budget_s: float | None,
                     share: float) -> list[str]:
    """Which records checked by an earlier process to check again before timing them.

    The quickest first (by their earlier phase-1 wall time), as many as ``jobs`` workers finish
    in ``share`` of the budget: the rest of the budget is for timing them alone. A check of a
    sweep with no budget re-runs every one. Returns names, quickest first.
    """
    order = sorted(walls, key=lambda n: walls[n])
    if budget_s is None:
        return order
    allowance, used, out = max(1, jobs) * budget_s * share, 0.0, []
    for name in order:
        if used + walls[name] > allowance:
            break
        used += walls[name]
        out.append(name)
    return out


def as_known_baseline(record: BaselineRecord | None, task: Task) -> VariantResult | None:
    """A stored sweep record as the optimizer's first step would have measured it (the original's
    median per performance case, the cases that failed as failures), or None when it cannot stand
    in: missing, from an older timing revision, not on a GPU, not runnable, or for other cases."""
    if (record is None or not current(record) or record.device != "cuda" or not record.runnable
            or {c.case_id for c in record.cases} != {c.id for c in task.performance_cases}):
        return None
    timings = tuple(Timing(c.case_id, "original", TimingMethod.CUDA_EVENTS, (c.median_ms,))
                    for c in record.cases if c.ok and c.median_ms)
    failures = tuple(Failure(Status.RUNTIME_ERROR, c.error or "failed in the baseline sweep",
                             case_id=c.case_id) for c in record.cases if not (c.ok and c.median_ms))
    return VariantResult("original", task.source_hash, Status.OK, timings=timings,
                         case_failures=failures)


def current(record: BaselineRecord | None) -> bool:
    """A stored record timed by this timing revision (an older one is timed again)."""
    return record is not None and record.timing_revision == TIMING_REVISION


from ..model.serialize import register as _register  # noqa: E402

_register(CaseBaseline, BaselineRecord, RunCheck)
