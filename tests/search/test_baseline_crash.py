"""A baseline whose worker a crash broke (search.cases.baseline_without_crashes): run again without
the case that crashed, so that the profile and the search choose their cases from real times."""

from tritonforge.model import (
    Candidate, Case, CaseRole, Failure, SpecCall, Status, Task, Timing, TimingMethod, VariantResult,
)
from tritonforge.search.cases import (
    baseline_without_crashes, restrict_to_runnable, timings_lost_to_a_crash,
)

ORIGINAL = Candidate("x = 0\n", "original")
PERF = ("p0", "p1", "p2", "p3")


def _task():
    cases = (Case("t", CaseRole.CORRECTNESS, SpecCall("f")),) + tuple(
        Case(cid, CaseRole.PERFORMANCE, SpecCall("f")) for cid in PERF)
    return Task("t", ORIGINAL.source, ("f",), cases, "test")


def _crash(cid):
    return Failure(Status.CRASH, "AcceleratorError: CUDA error: an illegal memory access",
                   case_id=cid)


def _runner(crash_on):
    """A baseline run that breaks at the first case of ``crash_on`` it meets (every timing lost,
    as a sticky CUDA error loses them), else times every case; records the cases of each run."""
    runs = []

    def run(task):
        ids = tuple(c.id for c in task.cases)
        runs.append(ids)
        bad = next((cid for cid in ids if cid in crash_on), None)
        if bad is not None:
            return VariantResult("original", "h", Status.CRASH, case_failures=(_crash(bad),))
        return VariantResult("original", "h", Status.OK, timings=tuple(
            Timing(cid, "original", TimingMethod.CUDA_EVENTS, (1.0,)) for cid in ids if cid in PERF))
    return run, runs


def test_a_crash_that_lost_every_timing_is_run_again_without_its_case():
    task = _task()
    run, runs = _runner({"p2"})
    result, notes = baseline_without_crashes(task, run(task), run)
    assert runs[1] == ("t", "p0", "p1", "p3")
    assert {t.case_id for t in result.timings} == {"p0", "p1", "p3"}
    assert [f.case_id for f in result.case_failures] == ["p2"]
    assert notes and "crash on p2" in notes[0]
    kept, _ = restrict_to_runnable(task, result)
    assert "p2" not in {c.id for c in kept.cases}


def test_retries_are_bounded_and_a_run_that_kept_its_timings_is_kept_as_it_is():
    task = _task()
    run, runs = _runner({"p1", "p2", "p3"})
    result, notes = baseline_without_crashes(task, run(task), run, retries=2)
    assert len(runs) == 3 and not result.timings          # p1, then p2: two retries, no more
    assert {f.case_id for f in result.case_failures} == {"p1", "p2", "p3"}
    run, runs = _runner(set())
    first = run(task)
    assert baseline_without_crashes(task, first, run) == (first, []) and len(runs) == 1
    kept_going = VariantResult("original", "h", Status.OK, case_failures=(_crash("p3"),),
                               timings=(Timing("p0", "original", TimingMethod.CUDA_EVENTS, (1.0,)),))
    assert timings_lost_to_a_crash(kept_going) == set()   # it kept going: nothing lost


def test_no_run_again_where_no_performance_case_would_be_left():
    from dataclasses import replace

    task = _task()
    task = replace(task, cases=task.cases[:2])           # t and p0 alone
    run, runs = _runner({"p0"})
    result, notes = baseline_without_crashes(task, run(task), run)
    assert len(runs) == 1 and not result.timings
    assert [f.case_id for f in result.case_failures] == ["p0"] and notes
