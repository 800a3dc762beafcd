"""Verification in a cascade (search.cascade, search.cases.verification_tiers): cheap cases first
for every candidate, the costlier tier only for those that passed; what a round asks of the
workers, counted in case runs, before and after."""

import threading
from types import SimpleNamespace

from tritonforge.model import (
    Candidate, Case, CaseRole, Failure, SpecCall, Status, Task, Timing, TimingMethod,
    VariantResult,
)
from tritonforge.search.cascade import verify_cascade
from tritonforge.search.cases import search_verification_cases, verification_tiers

ORIGINAL = Candidate("x = 0\n", "original")


def _task():
    cases = (Case("t0", CaseRole.CORRECTNESS, SpecCall("f")),
             Case("t1", CaseRole.CORRECTNESS, SpecCall("f")),
             Case("p-big", CaseRole.PERFORMANCE, SpecCall("f")),
             Case("p-mid", CaseRole.PERFORMANCE, SpecCall("f")),
             Case("p-small", CaseRole.PERFORMANCE, SpecCall("f")))
    return Task("t", ORIGINAL.source, ("f",), cases, "test")


def _base():
    times = {"p-big": 40.0, "p-mid": 2.0, "p-small": 0.01}
    return VariantResult("original", "h", Status.OK, timings=tuple(
        Timing(cid, "original", TimingMethod.CUDA_EVENTS, (ms,)) for cid, ms in times.items()))


class FakeEvaluator:
    """Records each verification request; a candidate whose source says ``wrong on X`` fails on
    case X (a mismatch), and a worker runs every case of a request (as a real one does before it
    compares any), so ``runs`` counts the case runs a request cost."""

    def __init__(self, log):
        self.log, self.lock = log, threading.Lock()

    def evaluate(self, task, variants, *, purpose, case_ids, **kwargs):
        cand = variants[1]
        with self.lock:
            self.log.append((cand.hash, tuple(case_ids)))
        bad = next((c for c in case_ids if f"wrong on {c}" in cand.source), None)
        result = (VariantResult("candidate", cand.hash, Status.MISMATCH,
                                Failure(Status.MISMATCH, "values differ", case_id=bad))
                  if bad else VariantResult("candidate", cand.hash, Status.OK))
        return SimpleNamespace(result=lambda name: result)


def test_tiers_put_the_correctness_cases_and_the_quickest_performance_case_first():
    task, base = _task(), _base()
    ids = search_verification_cases(task, base)
    assert set(ids) == {"t0", "t1", "p-small", "p-mid"}
    assert verification_tiers(task, ids, base) == (("t0", "t1", "p-small"), ("p-mid",))
    # nothing to split: one tier
    assert verification_tiers(task, ("t0", "t1"), base) == (("t0", "t1"),)
    assert verification_tiers(task, ("p-mid",), base) == (("p-mid",),)


def test_generated_cases_are_a_tier_between_the_own_cases_and_the_performance_cases():
    from dataclasses import replace

    task, base = _task(), _base()
    made = (Case("gen-odd", CaseRole.CORRECTNESS, SpecCall("f"), generated=True),
            Case("gen-big", CaseRole.CORRECTNESS, SpecCall("f"), generated=True))
    task = replace(task, cases=task.cases + made)
    ids = ("t0", "t1", "gen-odd", "gen-big", "p-small", "p-mid")
    assert verification_tiers(task, ids, base) == (
        ("t0", "t1", "p-small"), ("gen-odd", "gen-big"), ("p-mid",))
    # only generated cases besides the first tier: still their own tier
    assert verification_tiers(task, ("t0", "gen-odd"), base) == (("t0",), ("gen-odd",))


def test_an_own_case_far_costlier_than_the_quickest_performance_case_is_checked_late():
    """A test section that builds its inputs on the host (4 s a run) leaves the first tier for
    the deferred one; one as cheap as the performance cases, or on the interpreter where every
    case is slow alike, stays first."""
    from dataclasses import replace

    from tritonforge.search.cases import costly_cases, split_deferred

    task = _task()
    runs = {"t0": 4.1, "t1": 0.02, "p-big": 0.3, "p-mid": 0.02, "p-small": 0.01}
    base = replace(_base(), run_s=tuple(runs.items()))
    assert costly_cases(task, base) == {"t0"}
    ids = search_verification_cases(task, base)
    tiers = verification_tiers(task, ids, base)
    assert tiers == (("t1", "p-small"), ("p-mid", "t0"))
    assert split_deferred(task, tiers) == ((("t1", "p-small"),), ("p-mid", "t0"))
    slow_alike = replace(_base(), run_s=tuple((c, 4.0) for c in runs))     # the interpreter
    assert costly_cases(task, slow_alike) == set()
    assert verification_tiers(task, ids, slow_alike)[0] == ("t0", "t1", "p-small")
    assert costly_cases(task, _base()) == set()                            # no runs known


def test_a_candidate_failing_a_cheap_case_never_reaches_the_costly_tier():
    task, base = _task(), _base()
    tiers = verification_tiers(task, search_verification_cases(task, base), base)
    good = Candidate("x = 1\n", "r")
    cheap_fail = Candidate("x = 2  # wrong on t1\n", "r")
    late_fail = Candidate("x = 3  # wrong on p-mid\n", "r")
    log = []
    pool = [FakeEvaluator(log), FakeEvaluator(log)]
    got = verify_cascade(pool, task, ORIGINAL, [good, cheap_fail, late_fail], tiers)
    assert got[good.hash].status is Status.OK
    assert got[cheap_fail.hash].status is Status.MISMATCH
    assert got[cheap_fail.hash].failure.case_id == "t1"
    assert got[late_fail.hash].status is Status.MISMATCH
    assert got[late_fail.hash].failure.case_id == "p-mid"
    asked = {}
    for h, ids in log:
        asked.setdefault(h, set()).update(ids)
    assert "p-mid" not in asked[cheap_fail.hash]
    assert "p-mid" in asked[good.hash] and "p-mid" in asked[late_fail.hash]


def test_the_cascade_costs_fewer_case_runs_when_candidates_fail_cheaply():
    """Structure, not speed: a round of 6 candidates, 4 wrong on a correctness case. Verified on
    every case at once: 6 requests x 4 cases = 24 case runs, 6 of them on the costlier
    performance case. In the cascade: 6 x 3 + 2 x 1 = 20 case runs, 2 on it."""
    task, base = _task(), _base()
    ids = search_verification_cases(task, base)
    cands = [Candidate(f"x = {i}\n", "r") for i in range(2)] + [
        Candidate(f"x = {i}  # wrong on t0\n", "r") for i in range(2, 6)]
    flat_log, cascade_log = [], []
    verify_cascade([FakeEvaluator(flat_log)], task, ORIGINAL, cands, (ids,))
    verify_cascade([FakeEvaluator(cascade_log)], task, ORIGINAL, cands,
                   verification_tiers(task, ids, base))
    runs = lambda log: sum(len(c) for _, c in log)            # noqa: E731
    on_mid = lambda log: sum("p-mid" in c for _, c in log)    # noqa: E731
    assert (len(flat_log), runs(flat_log), on_mid(flat_log)) == (6, 24, 6)
    assert (len(cascade_log), runs(cascade_log), on_mid(cascade_log)) == (8, 20, 2)


def test_an_out_of_memory_beside_other_workers_is_verified_again_alone():
    task = _task()
    log = []

    class Crowded(FakeEvaluator):
        def evaluate(self, task, variants, *, purpose, case_ids, **kwargs):
            if purpose == "verify":
                self.log.append((variants[1].hash, tuple(case_ids)))
                r = VariantResult("candidate", variants[1].hash, Status.OOM, Failure(Status.OOM, "oom"))
                return SimpleNamespace(result=lambda name: r)
            return super().evaluate(task, variants, purpose=purpose, case_ids=case_ids)

    alone = FakeEvaluator(log)
    got = verify_cascade([alone, Crowded(log)], task, ORIGINAL,
                         [Candidate("x = 1\n", "r"), Candidate("x = 2\n", "r")], (("t0",),))
    assert all(r.status is Status.OK for r in got.values())


def test_no_request_starts_once_the_budget_leaves_no_room_and_the_rest_are_skipped_not_failed():
    from tritonforge.search.cascade import OUT_OF_TIME

    task, base = _task(), _base()
    tiers = verification_tiers(task, search_verification_cases(task, base), base)
    cands = [Candidate(f"x = {i}\n", "r") for i in range(4)]
    log = []
    room = iter([True, True, False, False, False, False, False])
    got = verify_cascade([FakeEvaluator(log)], task, ORIGINAL, cands, tiers,
                         in_time=lambda got: next(room))
    assert len(log) == 2                              # two requests, then none
    # deepest first: the first candidate went on to the costly tier before a second started,
    # and is verified; the three never asked are skipped, none failed
    assert [ids for _, ids in log] == [tiers[0], tiers[1]]
    assert got[cands[0].hash].status is Status.OK
    assert all(got[c.hash].status is Status.SKIPPED and got[c.hash].failure.reason == OUT_OF_TIME
               for c in cands[1:])


def test_no_tier_waits_for_the_slowest_request_of_the_one_before():
    """Two workers: one candidate's cheap tier is slow (a compile); the other candidates go on
    through both tiers meanwhile, instead of every costly-tier request waiting for it."""
    task, base = _task(), _base()
    tiers = verification_tiers(task, search_verification_cases(task, base), base)
    slow, fast = Candidate("x = 0  # slow\n", "r"), [Candidate(f"x = {i}\n", "r") for i in (1, 2)]
    release, log = threading.Event(), []

    class Slow(FakeEvaluator):
        def evaluate(self, task, variants, *, purpose, case_ids, **kwargs):
            if "slow" in variants[1].source:
                assert release.wait(10)
            out = super().evaluate(task, variants, purpose=purpose, case_ids=case_ids)
            if sum(1 for h, ids in self.log if ids == tiers[1]) == 2:
                release.set()             # both fast candidates finished their costly tier
            return out

    pool = [Slow(log), Slow(log)]
    got = verify_cascade(pool, task, ORIGINAL, [slow] + fast, tiers)
    assert all(r.status is Status.OK for r in got.values())
    order = [(h, ids) for h, ids in log]
    slow_costly = order.index((slow.hash, tiers[1]))
    assert all(order.index((c.hash, tiers[1])) < slow_costly for c in fast)


def test_the_largest_performance_case_is_the_last_tier_before_the_search_accepts():
    from tritonforge.search.cases import largest_performance_case

    task, base = _task(), _base()
    ids = search_verification_cases(task, base)
    ids += largest_performance_case(task, base, ids)
    assert ids[-1] == "p-big"
    assert verification_tiers(task, ids, base)[-1] == ("p-mid", "p-big")
    assert largest_performance_case(task, base, ids) == ()          # already chosen
    untimed = VariantResult("original", "o", Status.OK)
    assert largest_performance_case(task, untimed, ()) == ()        # the interpreter: no timings


def test_each_tiers_results_are_handed_on():
    log, seen = [], []
    cands = [Candidate("x = 1\n", "r"), Candidate("x = 2 wrong on t0\n", "r")]
    verify_cascade([FakeEvaluator(log)], _task(), ORIGINAL, cands, (("t0",), ("p-mid",)),
                   on_results=lambda tier, got: seen.append((tier, len(got))))
    assert seen == [(0, 2), (1, 1)]            # the wrong one never reached tier 2


def test_the_stages_average_a_candidates_request_on_the_generated_tier():
    from dataclasses import replace

    from tritonforge.search.stages import RoundStages

    class Timed(FakeEvaluator):
        def evaluate(self, task, variants, *, purpose, case_ids, **kwargs):
            got = super().evaluate(task, variants, purpose=purpose, case_ids=case_ids, **kwargs)
            r = replace(got.result("candidate"), wall_s=2.0 if case_ids == ("gen-odd",) else 9.0)
            return SimpleNamespace(result=lambda name: r)

    task = _task()
    task = replace(task, cases=task.cases + (
        Case("gen-odd", CaseRole.CORRECTNESS, SpecCall("f"), generated=True),))
    st = RoundStages.__new__(RoundStages)
    st.evaluators, st._generated_walls, st._base_source = [Timed([])], [], None
    cands = [Candidate("x = 1\n", "r"), Candidate("x = 2\n", "r"),
             Candidate("x = 3 wrong on t0\n", "r")]
    st.verify(task, ORIGINAL, cands, (("t0",), ("gen-odd",), ("p-mid",)))
    assert st.generated_tier_s() == 2.0        # two candidates reached the generated tier
    empty = RoundStages.__new__(RoundStages)
    empty._generated_walls = []
    assert empty.generated_tier_s() is None


def test_the_whole_candidate_checks_run_once_each_first_calls_in_the_first_tier_second_pass_in_the_last():
    asked = []

    class Flags(FakeEvaluator):
        def evaluate(self, task, variants, *, purpose, case_ids, first_calls=True,
                     second_pass=True, **kwargs):
            with self.lock:
                asked.append((variants[1].hash, tuple(case_ids), first_calls, second_pass))
            return super().evaluate(task, variants, purpose=purpose, case_ids=case_ids)

    task = _task()
    good = Candidate("good\n", "rule")
    wrong = Candidate("wrong on t1\n", "rule")
    tiers = (("t0", "t1"), ("p-small",), ("p-mid",))
    got = verify_cascade([Flags([])], task, ORIGINAL, [good, wrong], tiers)
    assert got[good.hash].status is Status.OK and got[wrong.hash].status is Status.MISMATCH
    by = {(h, ids): (first, second) for h, ids, first, second in asked}
    assert by[(good.hash, ("t0", "t1"))] == (True, False)
    assert by[(good.hash, ("p-small",))] == (False, False)
    assert by[(good.hash, ("p-mid",))] == (False, True)
    assert by[(wrong.hash, ("t0", "t1"))] == (True, False)     # failed there: no second pass
    # one tier: both in the same request; a tier checked after the round's own: no first calls
    asked.clear()
    verify_cascade([Flags([])], task, ORIGINAL, [good], (("t0",),))
    assert [(f, s) for _, _, f, s in asked] == [(True, True)]
    asked.clear()
    verify_cascade([Flags([])], task, ORIGINAL, [good], (("p-mid",),), fresh=False)
    assert [(f, s) for _, _, f, s in asked] == [(False, True)]
