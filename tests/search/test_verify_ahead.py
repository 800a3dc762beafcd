"""Verifying ahead (search.ahead): once the baseline chose the cases, the spare workers verify the
candidates compiled ahead on round 1's first tier with the very request round 1 makes, so the run
store answers round 1 at once (``Evaluator.request_key`` of an untimed request names only the
cases it runs: generated cases joining the task later do not change it)."""

import dataclasses
import threading
from types import SimpleNamespace

from tritonforge.config import Settings
from tritonforge.model import (
    Candidate, Case, CaseRole, DeviceInfo, Evaluation, HardwareInfo, SpecCall, Status, Task,
    Timing, TimingMethod, VariantResult,
)
from tritonforge.runtime.evaluator import Evaluator
from tritonforge.search.ahead import CompileAhead
from tritonforge.search.cascade import verify_cascade
from tritonforge.search.loop import _first_tier
from tritonforge.store import RunStore

ORIGINAL = Candidate("x = 0\n", "original")
CASES = (Case("test", CaseRole.CORRECTNESS, SpecCall("f")),
         Case("p0", CaseRole.PERFORMANCE, SpecCall("f")),
         Case("p1", CaseRole.PERFORMANCE, SpecCall("f")))
TASK = Task("t", ORIGINAL.source, ("f",), CASES, "test")
GENERATED = dataclasses.replace(CASES[0], id="odd-size", generated=True)


class Proposes:
    name = "static"

    def __init__(self, n):
        self.n = n

    def propose(self, ctx):
        return [Candidate(f"x = {i}\n", "static", ctx.incumbent.hash, f"move {i}")
                for i in range(self.n)][:ctx.budget]


def _evaluator(tmp_path, store, sent, name):
    ev = Evaluator(Settings(device="cpu"), tmp_path / name, store, device="cpu")

    def evaluate(request, deadline=None):
        sent.append(request)
        results = tuple(VariantResult(v.name, v.hash, Status.OK) for v in request.variants)
        return Evaluation(request.task.name, results, DeviceInfo("cpu", True))
    ev.worker = SimpleNamespace(evaluate=evaluate, cut=False, info=None, close=lambda: None,
                                interrupt=lambda: None)
    return ev


def test_round_one_finds_the_candidates_verified_ahead_answered(tmp_path):
    store = RunStore(tmp_path / "store.sqlite")
    sent = []
    spare = [_evaluator(tmp_path, store, sent, f"w{i}") for i in range(2)]
    ahead = CompileAhead(spare, TASK, ORIGINAL, [Proposes(3)], 3, HardwareInfo("cpu", True))
    ahead.start()
    # the baseline chose the cases: round 1's first tier is the test section and p0
    ahead.verify_from(TASK, ("test", "p0"), second_pass=False)
    for _ in range(500):                 # round 1 comes later: the spare workers verify meanwhile
        if sum(1 for r in sent if r.verify) == 3:
            break
        threading.Event().wait(0.01)
    report = ahead.stop()
    assert report.verified == 3 and "3 verified on round 1's first tier" in report.note()
    ahead_requests = [r for r in sent if r.verify]
    assert len(ahead_requests) == 3
    assert all(r.case_ids == ("test", "p0") and r.first_calls and not r.second_pass
               for r in ahead_requests)
    # round 1, after generated cases joined the task: its first tier is answered by the store
    task = dataclasses.replace(TASK, cases=TASK.cases + (GENERATED,))
    cands = Proposes(3).propose(SimpleNamespace(incumbent=ORIGINAL, budget=3))
    before = len(sent)
    got = verify_cascade([_evaluator(tmp_path, store, sent, "pool")], task, ORIGINAL, cands,
                         (("test", "p0"), ("odd-size",)))
    asked = sent[before:]
    assert all(r.status is Status.OK for r in got.values())
    assert [r.case_ids for r in asked] == [("odd-size",)] * 3      # only the tier not asked ahead
    store.close()


def test_what_passed_round_ones_only_tier_ahead_is_reported_with_when(tmp_path):
    """A candidate that passed ahead on round 1's only early tier (``second_pass``) passed all of
    round 1's verification then: the report says when (the record's first verified candidate is
    timed from it); one verified on a tier that is not the last is not reported."""
    import time
    for last in (True, False):
        store, sent = RunStore(tmp_path / f"s{last}.sqlite"), []
        spare = [_evaluator(tmp_path, store, sent, f"w{last}")]
        ahead = CompileAhead(spare, TASK, ORIGINAL, [Proposes(2)], 2, HardwareInfo("cpu", True))
        start = time.perf_counter()
        ahead.start()
        ahead.verify_from(TASK, ("test", "p0"), second_pass=last)
        for _ in range(500):
            if sum(1 for r in sent if r.verify) == 2:
                break
            threading.Event().wait(0.01)
        report = ahead.stop()
        assert report.tier == ("test", "p0")
        if last:
            assert len(report.passed_at) == 2
            assert all(start <= at <= time.perf_counter() for _, at in report.passed_at)
        else:
            assert report.passed_at == ()
        store.close()


def test_the_generated_tier_is_verified_ahead_once_made_and_round_one_finds_it_answered(tmp_path):
    """Generated cases still being made: a candidate that passed the first tier ahead waits for
    them, then is verified on their tier with round 1's own request (no bare first calls, the
    second pass) on the task as round 1 joins them (``loop._late_tier``); the report gives both
    tiers and when each candidate passed the second. Round 1, on the joined task, sends nothing."""
    import time

    from tritonforge.search.loop import _late_tier

    class Late:
        def __init__(self):
            self.made = False

        def ready(self):
            return self.made

        def __call__(self):
            return (GENERATED,)

    store, sent = RunStore(tmp_path / "s.sqlite"), []
    spare = [_evaluator(tmp_path, store, sent, f"w{i}") for i in range(2)]
    ahead = CompileAhead(spare, TASK, ORIGINAL, [Proposes(2)], 2, HardwareInfo("cpu", True))
    late = Late()
    ids = ("test", "p0", "p1")
    tier, last = _first_tier(TASK, ids, _base(), generated_coming=True)
    start = time.perf_counter()
    ahead.start()
    ahead.verify_from(TASK, tier, last, late=_late_tier(TASK, ids, _base(), tier, late))
    for _ in range(500):
        if sum(1 for r in sent if r.verify) == 2:
            break
        threading.Event().wait(0.01)
    threading.Event().wait(0.1)
    assert sum(1 for r in sent if r.verify) == 2          # the late tier waits for its cases
    late.made = True
    for _ in range(500):
        if sum(1 for r in sent if r.verify) == 4:
            break
        threading.Event().wait(0.01)
    report = ahead.stop()
    asked = [r for r in sent if r.verify]
    assert [(r.case_ids, r.first_calls, r.second_pass) for r in asked[2:]] == \
        [(("odd-size",), False, True)] * 2
    assert report.tiers == (("test", "p0"), ("odd-size",)) and len(report.passed_at) == 2
    assert all(start <= at <= time.perf_counter() for _, at in report.passed_at)
    # round 1's early tiers once the generated cases joined: both answered by the store
    from tritonforge.search.loop import split_deferred, verification_tiers
    joined = dataclasses.replace(TASK, cases=TASK.cases + (GENERATED,))
    tiers = verification_tiers(TASK, ids, _base())          # as Optimizer._join_late joins them
    tiers = verification_tiers(joined, tuple(c for t in tiers for c in t) + ("odd-size",), _base())
    early = tuple(t for t in split_deferred(joined, tiers)[0] if t)
    assert early == report.tiers
    cands = Proposes(2).propose(SimpleNamespace(incumbent=ORIGINAL, budget=2))
    before = len(sent)
    got = verify_cascade([_evaluator(tmp_path, store, sent, "pool")], joined, ORIGINAL, cands,
                         early)
    assert all(r.status is Status.OK for r in got.values()) and sent[before:] == []
    store.close()


def test_a_compiled_candidate_waits_for_the_tier_and_a_stop_ends_the_wait():
    log, seen = [], threading.Event()

    class Spare:
        def compile_ahead(self, task, variants, case_ids=None):
            log.append(variants[1].source)
            seen.set()
            return SimpleNamespace(results=())

        def cut_in_flight(self):
            pass

    ahead = CompileAhead([Spare()], TASK, ORIGINAL, [Proposes(2)], 2, HardwareInfo("cpu", True))
    ahead.start()
    assert seen.wait(5)
    report = ahead.stop()              # no tier ever came: nothing verified, nothing hangs
    assert report.verified == 0 and report.compiled == 2 and report.cut == 0


def _base():
    return VariantResult("original", ORIGINAL.hash, Status.OK, timings=tuple(
        Timing(cid, "original", TimingMethod.CUDA_EVENTS, (ms,) * 3)
        for cid, ms in (("p0", 1.0), ("p1", 2.0))))


def test_the_first_tier_is_the_last_one_only_when_no_generated_case_is_coming():
    tier, last = _first_tier(TASK, ("test", "p0", "p1"), _base(), generated_coming=False)
    assert tier == ("test", "p0") and last                 # p1 is deferred: one early tier
    tier, last = _first_tier(TASK, ("test", "p0", "p1"), _base(), generated_coming=True)
    assert tier == ("test", "p0") and not last


def test_an_untimed_request_is_keyed_by_the_cases_it_runs(tmp_path):
    ev = Evaluator(Settings(device="cpu"), tmp_path / "w", None, device="cpu")
    grown = dataclasses.replace(TASK, cases=TASK.cases + (GENERATED,))
    from tritonforge.runtime.protocol import EvaluateRequest
    from tritonforge.runtime.timing_plan import timing_plan
    plan = timing_plan(ev.settings)

    def key(task, time, case_ids=("test",)):
        return ev.request_key(EvaluateRequest(task, (), case_ids, True, time, plan, True, False),
                              "verify")
    assert key(TASK, False) == key(grown, False)
    assert key(TASK, True) != key(grown, True)              # a timed request checks any case
    assert key(TASK, False, None) != key(grown, False, None)
    assert key(TASK, False, ("test",)) != key(TASK, False, ("test", "p0"))


def test_a_candidate_compiled_ahead_compiles_for_five_performance_cases_spread_over_the_range():
    from tritonforge.search.cases import AHEAD_PERF_CASES, ahead_cases

    perf = tuple(dataclasses.replace(CASES[1], id=f"perf-{i:02d}") for i in range(10))
    task = dataclasses.replace(TASK, cases=(CASES[0],) + perf)
    assert ahead_cases(task) == ("test", "perf-00", "perf-01", "perf-05", "perf-08", "perf-09")
    few = dataclasses.replace(TASK, cases=(CASES[0],) + perf[:AHEAD_PERF_CASES])
    assert ahead_cases(few) is None                      # every case, as before


def test_generated_cases_that_make_no_tier_of_their_own_end_the_wait(tmp_path):
    """Made, but none new (or not a tier of their own): the spare workers stop waiting for a
    second tier and end once the first is verified, with no stop asked."""
    from tritonforge.search.loop import _late_tier

    class NoneMade:
        def ready(self):
            return True

        def __call__(self):
            return ()

    store, sent = RunStore(tmp_path / "s.sqlite"), []
    spare = [_evaluator(tmp_path, store, sent, "w0")]
    ahead = CompileAhead(spare, TASK, ORIGINAL, [Proposes(2)], 2, HardwareInfo("cpu", True))
    ids = ("test", "p0", "p1")
    tier, last = _first_tier(TASK, ids, _base(), generated_coming=True)
    assert _late_tier(TASK, ids, _base(), tier, NoneMade())() == ()
    ahead.start()
    ahead.verify_from(TASK, tier, last, late=_late_tier(TASK, ids, _base(), tier, NoneMade()))
    for t in ahead._threads:
        t.join(10)
    assert not any(t.is_alive() for t in ahead._threads)
    report = ahead.stop()
    assert report.tiers == (("test", "p0"),) and report.passed_at == ()
    store.close()
