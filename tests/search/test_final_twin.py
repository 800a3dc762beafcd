"""The final check drops a case only where the original fails alone, as its own candidate.

A best that crashes on a case is rejected, unless the original, run against itself in a fresh
process, fails that case too: such a case cannot judge anything and the check runs again without
it. The attack tried here: a candidate that crashes (or corrupts the original's run) on purpose to
get its case excused must stay rejected whenever the original alone runs that case cleanly.
"""

from types import SimpleNamespace

from tritonforge.model import Candidate, Case, CaseRole, Failure, Status, Task, Timing, TimingMethod, VariantResult
from final_fakes import bare_final_check

ORIGINAL = Candidate("x = 1\n", "original")
BEST = Candidate("x = 2\n", "rules:t", description="faster")
CASES = ("perf-00", "perf-01", "perf-02")


def _task() -> Task:
    cases = tuple(Case(cid, CaseRole.PERFORMANCE, None) for cid in CASES)
    return Task("k", "x = 1\n", ("f",), cases, "test")


def _timed(name, ids, ms):
    return tuple(Timing(cid, name, TimingMethod.CUDA_EVENTS, (ms,) * 20) for cid in ids)


def _optimizer(best_fails, original_fails_final=(), twin_fails=()):
    """``best_fails``: cases the best crashes on in a final check; ``original_fails_final``:
    cases where the original's reference run crashes first (the best is SKIPPED there);
    ``twin_fails``: cases where the original, as its own candidate, crashes."""
    asked = []

    def evaluate(task, variants, *, purpose, **kw):
        ids = tuple(c.id for c in task.cases)
        asked.append((purpose, ids))
        if purpose == "final-twin":
            bad = next((c for c in ids if c in twin_fails), None)
            r = VariantResult("best", "t", Status.CRASH, Failure(Status.CRASH, "illegal", case_id=bad)) \
                if bad else VariantResult("best", "t", Status.OK)
            return SimpleNamespace(result=lambda name: r)
        orig_bad = next((c for c in ids if c in original_fails_final), None)
        best_bad = next((c for c in ids if c in best_fails), None)
        if orig_bad:
            o = VariantResult("original", "o", Status.CRASH,
                              case_failures=(Failure(Status.CRASH, "illegal", case_id=orig_bad),))
            b = VariantResult("best", "b", Status.SKIPPED,
                              Failure(Status.SKIPPED, "not verified: original crash first",
                                      case_id=orig_bad))
        elif best_bad:
            o = VariantResult("original", "o", Status.OK, timings=_timed("o", ids, 2.0))
            b = VariantResult("best", "b", Status.CRASH,
                              case_failures=(Failure(Status.CRASH, "illegal", case_id=best_bad),))
        else:
            o = VariantResult("original", "o", Status.OK, timings=_timed("o", ids, 2.0))
            b = VariantResult("best", "b", Status.OK, timings=_timed("b", ids, 1.0))
        return SimpleNamespace(result=lambda name: o if name == "original" else b)

    opt = bare_final_check(evaluate)
    return opt, asked


def _final(opt):
    import tritonforge.search.final_check as output
    saved = output.final_check_plan
    output.final_check_plan = lambda settings: None
    try:
        return opt._final(_task(), ORIGINAL, BEST)
    finally:
        output.final_check_plan = saved


def test_a_crash_the_original_shares_is_dropped_and_the_check_runs_again():
    opt, asked = _optimizer(best_fails={"perf-01"}, twin_fails={"perf-01"})
    decision = _final(opt)
    assert decision.accepted
    assert "without perf-01" in decision.reason
    # the twin runs again without perf-01 and passes: one more final check, without perf-01
    assert [p for p, _ in asked] == ["final", "final-twin", "final-twin", "final"]
    assert asked[-1][1] == ("perf-00", "perf-02")
    assert "perf-01" in opt.final_dropped


def test_a_crash_the_original_does_not_share_rejects_the_best():
    """The cheat: crash on a case and hope it is excused. The original alone runs it cleanly."""
    opt, asked = _optimizer(best_fails={"perf-01"}, twin_fails=())
    decision = _final(opt)
    assert not decision.accepted
    assert "not correct" in decision.reason
    assert [p for p, _ in asked] == ["final", "final-twin"]
    assert opt.final_dropped == set()


def test_the_original_crashing_first_is_checked_alone_before_the_case_is_dropped():
    """int4_matmul (H100, 2026-11-25): the original hit an illegal memory access on perf-04 in the
    final check, after a search that accepted 1.067x. Alone it crashes there too: dropped."""
    opt, asked = _optimizer(best_fails=(), original_fails_final={"perf-02"}, twin_fails={"perf-02"})
    decision = _final(opt)
    assert decision.accepted
    assert asked[-1][1] == ("perf-00", "perf-01")


def test_the_original_crashing_beside_the_best_only_is_the_best_s_fault():
    """The original crashed after the best's runs (the best may have corrupted its memory); alone
    it runs every case: nothing is dropped, the best is rejected."""
    opt, _ = _optimizer(best_fails=(), original_fails_final={"perf-02"}, twin_fails=())
    decision = _final(opt)
    assert not decision.accepted
    assert opt.final_dropped == set()


def test_a_passing_best_runs_no_twin():
    opt, asked = _optimizer(best_fails=())
    assert _final(opt).accepted
    assert [p for p, _ in asked] == ["final"]


def test_narrowing_stops_after_its_limit():
    """A twin failing a new case each time does not narrow the check for ever."""
    from tritonforge.search.final_check import MAX_FINAL_NARROWINGS

    opt, asked = _optimizer(best_fails=set(CASES), twin_fails=set(CASES))
    decision = _final(opt)
    assert not decision.accepted
    assert sum(p == "final" for p, _ in asked) <= MAX_FINAL_NARROWINGS + 1


def test_every_case_the_original_fails_alone_is_found_before_the_next_final_check():
    """The twin stops at its first failure: it runs again without each case found, so one more
    final check (not one per case) follows (attention_kernel, H100: five such cases)."""
    opt, asked = _optimizer(best_fails={"perf-01"}, twin_fails={"perf-00", "perf-01"})
    decision = _final(opt)
    assert decision.accepted
    assert [p for p, _ in asked] == ["final", "final-twin", "final-twin", "final-twin", "final"]
    assert asked[-1][1] == ("perf-02",)
    assert "without perf-00, perf-01" in decision.reason


def test_out_of_time_the_check_is_not_narrowed_and_the_rejection_stands():
    from tritonforge.search.budget import BudgetPolicy

    opt, asked = _optimizer(best_fails={"perf-01"}, twin_fails={"perf-01"})
    opt.budget, opt.estimate_s, opt.checks = BudgetPolicy(120.0, lambda: 125.0), (lambda c: 30.0), 0
    decision = _final(opt)
    assert not decision.accepted and [p for p, _ in asked] == ["final"]
    assert opt.final_dropped == set()


def _varying_optimizer(note: bool, twin_runs_failing: set[int]):
    """The best reads NaN on perf-01 where the original read numbers; ``note``: the check's
    verdict also saw the original differ from itself there. The twin (over every case, in a
    fresh process) fails perf-01 on the runs numbered in ``twin_runs_failing`` (from 1)."""
    from tritonforge.model import Mismatch, Verdict

    asked = []
    twin_runs = [0]

    def evaluate(task, variants, *, purpose, **kw):
        ids = tuple(c.id for c in task.cases)
        asked.append((purpose, ids))
        if purpose == "final-twin":
            twin_runs[0] += 1
            bad = "perf-01" in ids and twin_runs[0] in twin_runs_failing
            r = VariantResult("best", "t", Status.MISMATCH, verdict=Verdict(
                False, mismatches=(Mismatch("perf-01", 0, "out", "nan", "nan"),))) \
                if bad else VariantResult("best", "t", Status.OK)
            return SimpleNamespace(result=lambda name: r)
        o = VariantResult("original", "o", Status.OK, timings=_timed("o", ids, 2.0))
        if "perf-01" in ids:
            notes = ("perf-01 seed 7 out: 3 elements differ, the original differs from itself "
                     "on 3",) if note else ()
            b = VariantResult("best", "b", Status.MISMATCH, verdict=Verdict(
                False, mismatches=(Mismatch("perf-01", 7, "out", "nan", "candidate nan"),),
                notes=notes))
        else:
            b = VariantResult("best", "b", Status.OK, timings=_timed("b", ids, 1.0))
        return SimpleNamespace(result=lambda name: o if name == "original" else b)

    return bare_final_check(evaluate), asked


def test_where_the_original_varies_the_twin_runs_again_before_the_rejection_stands():
    """A twin that reproduced itself once, on a case where the check saw the original differ
    from itself, proves little: it runs again (up to three runs), and its NaN on the second
    run drops the case. Without that note one run decides and the rejection stands."""
    from tritonforge.search.blame import TWIN_RUNS_WHERE_IT_VARIES

    opt, asked = _varying_optimizer(note=True, twin_runs_failing={2})
    decision = _final(opt)
    assert decision.accepted and "without perf-01" in decision.reason, decision.reason
    assert [p for p, _ in asked] == ["final", "final-twin", "final-twin", "final-twin", "final"]
    opt, asked = _varying_optimizer(note=True, twin_runs_failing=set())
    assert not _final(opt).accepted
    assert sum(p == "final-twin" for p, _ in asked) == TWIN_RUNS_WHERE_IT_VARIES
    opt, asked = _varying_optimizer(note=False, twin_runs_failing={2})
    assert not _final(opt).accepted
    assert [p for p, _ in asked] == ["final", "final-twin"]
