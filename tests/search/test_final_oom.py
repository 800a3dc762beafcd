"""A final check that runs out of memory runs once more; any other failure stands.

Device memory is shared with the verification pool of the same GPU, so an out-of-memory failure
in the final check says nothing about the candidate; a mismatch or a crash does, and is never
retried (a candidate must not get a second chance at being wrong)."""

from types import SimpleNamespace

from tritonforge.model import Candidate, Case, CaseRole, Failure, Status, Task, Timing, TimingMethod, VariantResult
from final_fakes import bare_final_check

ORIGINAL = Candidate("x = 1\n", "original")
BEST = Candidate("x = 2\n", "rules:t", description="faster")
IDS = ("perf-00", "perf-01")


def _timed(name, ms):
    return tuple(Timing(cid, name, TimingMethod.CUDA_EVENTS, (ms,) * 20) for cid in IDS)


def _check(outcomes):
    """A FinalCheck whose fresh evaluations answer ``outcomes`` in turn: "oom", "mismatch", "ok"."""
    asked = []

    def evaluate(task, variants, *, purpose, **kw):
        kind = outcomes[min(len(asked), len(outcomes) - 1)]
        asked.append(purpose)
        o = VariantResult("original", "o", Status.OK, timings=_timed("o", 2.0))
        if kind == "ok":
            b = VariantResult("best", "b", Status.OK, timings=_timed("b", 1.0))
        else:
            status = Status.OOM if kind == "oom" else Status.MISMATCH
            b = VariantResult("best", "b", status, Failure(status, kind, case_id="perf-01"))
        return SimpleNamespace(result=lambda name: o if name == "original" else b)

    check = bare_final_check(evaluate)
    return check, asked


def _run(check):
    import tritonforge.search.final_check as final_check
    saved = final_check.final_check_plan
    final_check.final_check_plan = lambda settings: None
    task = Task("k", "x = 1\n", ("f",), tuple(Case(c, CaseRole.PERFORMANCE, None) for c in IDS), "t")
    try:
        return check._final_once(task, ORIGINAL, BEST)[2]
    finally:
        final_check.final_check_plan = saved


def test_out_of_memory_once_is_checked_again_and_accepted():
    check, asked = _check(["oom", "ok"])
    assert _run(check).accepted
    assert asked == ["final", "final"]


def test_out_of_memory_every_time_is_rejected_after_one_retry():
    check, asked = _check(["oom"])
    assert not _run(check).accepted
    assert len(asked) == 2


def test_a_mismatch_is_never_checked_again():
    check, asked = _check(["mismatch", "ok"])
    assert not _run(check).accepted
    assert asked == ["final"]
