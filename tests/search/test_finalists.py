"""The finalists timed on every performance case before the final check (search.finalists): who
is swept, which finalist a sweep vetoes, the final check skipping a vetoed one for the next, and
when the loop sweeps at all."""

from types import SimpleNamespace

import numpy as np
import pytest

from tritonforge.config import Settings
from tritonforge.model import Candidate, Status, Timing, TimingMethod, VariantResult
from tritonforge.runtime.timing import TimingPlan
from tritonforge.search.arbiter import ArbiterPolicy
from tritonforge.search.budget import BudgetPolicy
from tritonforge.search.final_check import FinalCheck
from tritonforge.search.finalists import (
    MAX_FINALISTS, SWEEP_MIN_ROUNDS, SWEEP_ROUNDS, Sweep, finalists, sweep, sweep_plan,
)
from tritonforge.search.loop import Optimizer

ORIGINAL = Candidate("x = 0\n", "original")
PERF = tuple(f"p{i}" for i in range(6))
TASK = SimpleNamespace(name="t", performance_cases=tuple(SimpleNamespace(id=c) for c in PERF),
                       cases=())


def _cand(i):
    return Candidate(f"x = {i}\n", "r", description=f"c{i}")


def _result(name, ms_by_case, status=Status.OK):
    rng = np.random.default_rng(7)
    return VariantResult(name, name, status, timings=tuple(
        Timing(cid, name, TimingMethod.CUDA_EVENTS, tuple(ms * (1 + 0.01 * rng.standard_normal(12))))
        for cid, ms in ms_by_case.items()))


def test_the_finalists_are_the_chains_last_three_best_first_then_the_split_then_the_runners():
    a, b, c, d, e, f = (_cand(i) for i in range(1, 7))
    out = finalists([a, b, c, d], [(1.2, 0, e), (1.5, 0, f)], [(1.1, 0, b), (1.3, 0, e)], ORIGINAL)
    assert out == [d, c, b, f][:MAX_FINALISTS]
    # the original is never a finalist, and a candidate comes once
    assert finalists([ORIGINAL, a], [], [(1.0, 0, a)], ORIGINAL) == [a]
    assert finalists([], [], [], ORIGINAL) == []


def test_the_sweep_plan_is_short_and_drops_no_variant():
    plan = sweep_plan(TimingPlan(rounds=10, min_rounds=4, abandon_slower=1.3, screen_slower=1.1))
    # rounds past the minimum stop at each case's share of the sweep's room: a sweep whose
    # estimate fitted its room but ran longer left the final check no time
    assert plan.rounds == SWEEP_ROUNDS and plan.min_rounds == SWEEP_MIN_ROUNDS < SWEEP_ROUNDS
    assert plan.abandon_slower is None and plan.screen_slower is None


def _time_fn(ms_by_variant, seen):
    def time_fn(task, incumbent, cands, case_ids, end_within_s=None, plan=None):
        seen.append((incumbent, list(cands), case_ids, end_within_s, plan))
        results = [_result("incumbent", ms_by_variant["incumbent"])]
        for i, _ in enumerate(cands):
            spec = ms_by_variant[f"c{i}"]
            status = Status.OK
            if spec is None:
                spec, status = {}, Status.CRASH
            results.append(_result(f"c{i}", spec, status))
        return SimpleNamespace(results=tuple(results))
    return time_fn


def test_a_finalist_far_slower_on_a_case_the_search_never_timed_is_vetoed():
    """c0: twice as fast but 100% slower on p1; c1: 3% slower on p1 (within twice the limit);
    c2: crashed in the sweep (its final check decides)."""
    base = {cid: 1.0 for cid in PERF}
    c0 = {**{cid: 0.5 for cid in PERF}, "p1": 2.0}
    c1 = {**{cid: 0.8 for cid in PERF}, "p1": 1.03}
    seen = []
    cands = [_cand(i) for i in range(1, 4)]
    out = sweep(_time_fn({"incumbent": base, "c0": c0, "c1": c1, "c2": None}, seen), TASK, ORIGINAL,
                cands, sweep_plan(TimingPlan()), ArbiterPolicy(), end_within_s=30.0)
    assert seen[0][2] == PERF and seen[0][3] == 30.0 and seen[0][0] is ORIGINAL
    veto = out.veto(cands[0])
    assert veto is not None and not veto.accepted and "p1" in veto.reason
    assert "not checked in a fresh process" in veto.reason
    assert veto.speedup > 1.05 and veto.worst_case_ratio > 1.9      # a size dispatch's veto
    assert out.veto(cands[1]) is None and out.decisions[cands[1].hash].accepted
    assert out.veto(cands[2]) is None and cands[2].hash not in out.decisions
    assert "3 in" not in out.note() and "2 in" in out.note()
    assert sweep(_time_fn({}, []), TASK, ORIGINAL, [], TimingPlan(), ArbiterPolicy(), None) == Sweep()


PLAN = TimingPlan(rounds=10, min_rounds=4, case_budget_ms=6000.0)


def test_the_final_check_skips_a_vetoed_finalist_for_the_next(monkeypatch):
    import tritonforge.search.final_check as fcm
    monkeypatch.setattr(fcm, "final_check_plan", lambda settings: PLAN)
    a, b = _cand(1), _cand(2)
    asked = []

    def evaluate(task, variants, **kwargs):
        asked.append(variants[1].hash)
        o = _result("original", {cid: 1.0 for cid in PERF})
        bst = _result("best", {cid: 0.8 for cid in PERF})
        return SimpleNamespace(result=lambda name: o if name == "original" else bst)

    fc = FinalCheck(SimpleNamespace(emit="fixed", min_speedup=1.05), ArbiterPolicy(),
                    SimpleNamespace(evaluate=evaluate), None, None, lambda s: None, False,
                    BudgetPolicy(None, lambda: 0.0))
    base = {cid: 1.0 for cid in PERF}
    seen = []
    fc.sweep = sweep(_time_fn({"incumbent": base, "c0": {**{c: 0.5 for c in PERF}, "p3": 1.5},
                               "c1": {c: 0.8 for c in PERF}}, seen),
                     TASK, ORIGINAL, [b, a], sweep_plan(PLAN), ArbiterPolicy(), None)
    notes = []
    final, out = fc._output(TASK, ORIGINAL, [a, b], [], [], 1.25, notes)
    assert asked == [a.hash]                 # b, the chain's best, never went to a fresh process
    assert out is a and final.accepted
    assert any("rejected 'c2'" in n and "p3" in n for n in notes)


def _loop(perf_ids, search_ids, room, interpreted=False, need_per_variant=1.0, finalists=2):
    calls = []
    state = SimpleNamespace(task=SimpleNamespace(name="t", performance_cases=tuple(
        SimpleNamespace(id=c) for c in perf_ids)),
        chain=tuple(_cand(i + 1) for i in range(finalists)), split=(), runners=(),
        search_ids=search_ids)
    estimate = SimpleNamespace(timing_s=lambda ids, variants, plan: need_per_variant * variants)
    me = SimpleNamespace(interpreted=interpreted, settings=Settings(), policy=ArbiterPolicy(),
        _emit=lambda *a, **k: None,
        stages=SimpleNamespace(_time=lambda *a, **k: calls.append(k) or SimpleNamespace(
            results=(_result("incumbent", {c: 1.0 for c in perf_ids}),
                     _result("c0", {c: 0.9 for c in perf_ids})))))
    out = Optimizer._sweep(me, state, ORIGINAL, estimate, lambda: room)
    return out, calls


@pytest.mark.parametrize("perf, search, room, interpreted, finalists, swept", [
    (PERF, PERF[:2], 60.0, False, 2, True),
    (PERF, PERF, 60.0, False, 2, False),         # the search timed every case already
    (PERF, PERF[:2], 1.0, False, 2, False),      # no room beside the final check's shortest plan
    (PERF, PERF[:2], 60.0, True, 2, False),      # the interpreter times nothing
    (PERF, PERF[:2], 60.0, False, 1, False),     # one finalist: its final check times it anyway
])
def test_the_loop_sweeps_only_where_it_adds_cases_and_has_room(perf, search, room, interpreted,
                                                               finalists, swept):
    out, calls = _loop(perf, search, room, interpreted, finalists=finalists)
    assert bool(calls) is swept and bool(out.decisions) is swept
    if swept:
        assert calls[0]["end_within_s"] == room and calls[0]["plan"].rounds == SWEEP_ROUNDS


def test_a_vetoed_runner_up_takes_no_runner_ups_place(monkeypatch):
    """Three runners-up, the best of them vetoed by the sweep: the next two are checked in
    fresh processes (MAX_RUNNERS_UP), and the vetoed one costs no check."""
    import tritonforge.search.final_check as fcm
    monkeypatch.setattr(fcm, "final_check_plan", lambda settings: PLAN)
    monkeypatch.setattr(fcm, "MAX_RUNNERS_UP", 2)
    winner, r1, r2, r3 = _cand(1), _cand(2), _cand(3), _cand(4)
    asked = []

    def evaluate(task, variants, **kwargs):
        asked.append(variants[1].hash)
        o = _result("original", {cid: 1.0 for cid in PERF})
        slow = _result("best", {cid: 1.2 for cid in PERF})        # every check fails
        return SimpleNamespace(result=lambda name: o if name == "original" else slow)

    fc = FinalCheck(SimpleNamespace(emit="fixed", min_speedup=1.05), ArbiterPolicy(),
                    SimpleNamespace(evaluate=evaluate), None, None, lambda s: None, False,
                    BudgetPolicy(None, lambda: 0.0))
    base = {cid: 1.0 for cid in PERF}
    fc.sweep = sweep(_time_fn({"incumbent": base, "c0": {**{c: 0.5 for c in PERF}, "p0": 3.0},
                               "c1": {c: 0.8 for c in PERF}, "c2": {c: 0.8 for c in PERF}}, []),
                     TASK, ORIGINAL, [r1, r2, r3], sweep_plan(PLAN), ArbiterPolicy(), None)
    notes = []
    final, out = fc._runners_up(TASK, ORIGINAL, [winner], [(1.3, 0, r1), (1.2, 0, r2),
                                                         (1.1, 0, r3)], None, notes)
    assert asked == [r2.hash, r3.hash] and out is ORIGINAL
    assert any("runner-up 'c2'" in n and "not checked in a fresh process" in n for n in notes)


def test_a_finalist_slower_within_the_veto_is_at_risk():
    """c0: 1.25x faster but 4.5% slower on p1 (past half the 5% limit, within the sweep's 10%
    veto): at risk; c1: 1% slower on p1: not at risk; c2: 50% slower: vetoed, not at risk."""
    base = {cid: 1.0 for cid in PERF}
    cands = [_cand(i) for i in range(1, 4)]
    spec = {"incumbent": base,
            "c0": {**{cid: 0.8 for cid in PERF}, "p1": 1.045},
            "c1": {**{cid: 0.8 for cid in PERF}, "p1": 1.01},
            "c2": {**{cid: 0.5 for cid in PERF}, "p1": 1.5}}
    out = sweep(_time_fn(spec, []), TASK, ORIGINAL, cands, sweep_plan(TimingPlan()),
                ArbiterPolicy(), None)
    risk = out.risk(cands[0])
    assert risk is not None and risk[1] == "p1" and 1.025 < risk[2] < 1.1
    assert risk[0].speedup > 1.1 and out.veto(cands[0]) is None
    assert out.risk(cands[1]) is None
    assert out.risk(cands[2]) is None and out.veto(cands[2]) is not None


def _at_risk_check(dispatch_result):
    """A FinalCheck whose sweep found the chain's best at risk on p1; the size dispatch's and
    the final checks' outcomes are stubs, and what was asked is recorded."""
    from tritonforge.model import Decision
    best, earlier = _cand(2), _cand(1)
    base = {cid: 1.0 for cid in PERF}
    spec = {"incumbent": base, "c0": {**{cid: 0.6 for cid in PERF}, "p1": 1.04},
            "c1": {cid: 0.9 for cid in PERF}}
    fc = FinalCheck.__new__(FinalCheck)
    fc.settings = Settings()
    fc.policy, fc.interpreted, fc.store = ArbiterPolicy(), False, None
    fc.sweep = sweep(_time_fn(spec, []), TASK, ORIGINAL, [best, earlier], sweep_plan(PLAN),
                     ArbiterPolicy(), None)
    asked = []

    def final(task, orig, cand):
        asked.append(("final", cand.description))
        ok = cand is earlier
        return Decision(cand.hash, ok, 1.1 if ok else 1.5, 1.1, 1.1, 1.0 if ok else 1.06,
                        "checked" if ok else "case p1 is 6% slower")

    def emit_dispatch(task, orig, cand, vetoed_by, notes):
        asked.append(("dispatch", cand.description, vetoed_by.speedup > 1.4))
        if dispatch_result is None:
            return None, orig
        return Decision("joined", True, dispatch_result, dispatch_result, dispatch_result, 1.0,
                        "joined"), Candidate("x = 9\n", "emit:size_dispatch")
    fc._final, fc._emit_dispatch = final, emit_dispatch
    return fc, best, earlier, asked


def test_the_size_dispatch_of_a_finalist_at_risk_is_checked_before_it():
    fc, best, earlier, asked = _at_risk_check(1.55)
    notes = []
    final, out = fc._output_chain(TASK, ORIGINAL, [earlier, best], [], [], 1.5, notes)
    assert asked == [("dispatch", "c2", True)]           # the sweep's decision is its veto
    assert final.accepted and final.speedup == 1.55 and out.origin == "emit:size_dispatch"
    assert any("at risk on case p1" in n for n in notes)


def test_a_dispatch_that_does_not_hold_up_leaves_the_checks_as_before_and_runs_once():
    fc, best, earlier, asked = _at_risk_check(None)
    final, out = fc._output_chain(TASK, ORIGINAL, [earlier, best], [], [], 1.5, [])
    # the best's own check, then the earlier one, which passes; no second dispatch of the best
    assert asked == [("dispatch", "c2", True), ("final", "c2"), ("final", "c1")]
    assert out is earlier and final.accepted
    # with emit fixed, nothing is dispatched
    fc, best, earlier, asked = _at_risk_check(1.55)
    fc.settings = Settings().replace(emit="fixed")
    fc._output_chain(TASK, ORIGINAL, [earlier, best], [], [], 1.5, [])
    assert asked[0] == ("final", "c2")
