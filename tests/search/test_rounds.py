"""One round as a function of the search's state (search.rounds.run_round) with fake stages:
what an acceptance, a round without gain and a round with nothing proposed make of the state;
the config-search flag reaching the proposers; the loop's rounds under the budget policy (a
fake clock) and the one round of configuration search when nothing new is proposed."""

from dataclasses import replace
from types import SimpleNamespace

from tritonforge.model import (
    Candidate, Case, CaseRole, HardwareInfo, SpecCall, Status, Task, Timing, TimingMethod,
    VariantResult,
)
from tritonforge.search.arbiter import ArbiterPolicy
from tritonforge.search.budget import BudgetPolicy
from tritonforge.search.phases import PhaseClock
from tritonforge.search.rounds import RoundEnv, run_round
from tritonforge.search.state import SearchState

ORIGINAL = Candidate("x = 0\n", "original")
TASK = Task("t", ORIGINAL.source, ("f",), (Case("c", CaseRole.CORRECTNESS, SpecCall("f")),
                                            Case("p", CaseRole.PERFORMANCE, SpecCall("f"))), "test")


def _timed(name, h, ms):
    return VariantResult(name, h, Status.OK, timings=(
        Timing("p", name, TimingMethod.CUDA_EVENTS, tuple(ms * (1 + 0.001 * i) for i in range(9))),))


class FakeStages:
    """Proposes ``proposals[round]`` (a list of (source, ms) pairs: a source with "wrong" fails
    verification), times each candidate at its ms and the incumbent at ``incumbent_ms``."""

    def __init__(self, proposals, incumbent_ms=1.0):
        self.proposals, self.incumbent_ms = proposals, incumbent_ms
        self.contexts, self.verified, self.timed = [], [], []
        self.store, self.profile, self.interpreted, self.per_round = None, None, False, 6
        self.ms = {}

    def progress(self, line):
        pass

    def _propose(self, ctx):
        self.contexts.append(ctx)
        out = []
        for src, ms in self.proposals.get(ctx.round, []):
            c = Candidate(src, "fake", ctx.incumbent.hash, src.strip())
            self.ms[c.hash] = ms
            out.append(c)
        return out

    def _prune(self, task, incumbent, cands, hardware, history, notes):
        return cands

    def verify(self, task, original, cands, tiers, in_time=lambda got: True, fresh=True):
        self.verified.append([c.hash for c in cands])
        return {c.hash: VariantResult("candidate", c.hash,
                                      Status.MISMATCH if "wrong" in c.source else Status.OK)
                for c in cands}

    def _cases_the_original_crashes(self, *a):
        return set()

    def _repair_failed(self, *a):
        return []

    def _time(self, task, incumbent, cands, case_ids, end_within_s=None):
        self.timed.append([c.hash for c in cands])
        self.end_within = getattr(self, "end_within", []) + [end_within_s]
        results = {"incumbent": _timed("incumbent", incumbent.hash, self.incumbent_ms)}
        results.update({f"c{i}": _timed(f"c{i}", c.hash, self.ms[c.hash]) for i, c in enumerate(cands)})
        return SimpleNamespace(result=results.__getitem__)


def _env(stages, events=None):
    estimate = SimpleNamespace(observe=lambda *a: None, seconds=lambda ids: 10.0)
    emit = (lambda phase, **kw: events.append((phase, kw))) if events is not None else (lambda *a, **k: None)
    return RoundEnv(stages, ArbiterPolicy(), PhaseClock(), estimate, HardwareInfo("fake", False),
                    lambda d: False, emit, 1.05, 2)


def _state(**kw):
    return SearchState(TASK, ORIGINAL, ORIGINAL, ("p",), (("c",), ("p",)), **kw)


def test_an_accepted_candidate_becomes_the_incumbent_and_joins_the_chain():
    stages, events = FakeStages({1: [("x = 1\n", 0.5), ("x = 2\n", 0.8), ("x = 3 wrong\n", 0.1)]}), []
    out = run_round(_state(), _env(stages, events))
    s = out.state
    assert out.stop is None and s.round == 1 and s.stale == 0
    assert s.incumbent.source == "x = 1\n" and s.chain == (s.incumbent,)
    assert 1.9 < s.factor < 2.1
    assert len(stages.timed[0]) == 2                    # the wrong one was never timed
    assert [h.status for h in s.history].count(Status.MISMATCH) == 1
    assert s.tried == 3 and len(s.runners) == 1         # 1.25x, beaten in its round
    assert [p for p, _ in events][:3] == ["propose", "verify", "time"]
    assert [p for p, _ in events][-1] == "repair"       # the failed one's repair, after timing
    assert any(kw.get("best_speedup") for p, kw in events if p == "time")


class RepairingStages(FakeStages):
    """Repairs each failed ("wrong") candidate into ``fixes[its source]`` (a (source, ms) pair),
    and logs when the round's repairs and timings ran."""

    def __init__(self, proposals, fixes, incumbent_ms=1.0):
        super().__init__(proposals, incumbent_ms)
        self.fixes, self.log = fixes, []

    def _repair_failed(self, task, original, cands, verified, case_ids, ctx, history, in_time):
        self.log.append("repair")
        out = []
        for c in cands:
            if verified[c.hash].status is not Status.OK and c.source in self.fixes:
                src, ms = self.fixes[c.source]
                fix = Candidate(src, "repair:rule", c.hash, "fix of " + c.description)
                self.ms[fix.hash] = ms
                out.append(fix)
        return out

    def _time(self, task, incumbent, cands, case_ids, end_within_s=None):
        self.log.append("time")
        base, self.incumbent_ms = self.incumbent_ms, self.ms.get(incumbent.hash, self.incumbent_ms)
        try:                                  # the incumbent at its own time
            return super()._time(task, incumbent, cands, case_ids, end_within_s)
        finally:
            self.incumbent_ms = base


def test_a_round_times_its_verified_candidates_before_it_repairs_the_failed_ones():
    """The verified candidates are judged first; a fix is timed after, beside the incumbent they
    made, and one that beats it joins the chain."""
    stages = RepairingStages({1: [("x = 1\n", 0.8), ("x = 2 wrong\n", 0.1)]},
                             {"x = 2 wrong\n": ("x = 3\n", 0.4)})
    s = run_round(_state(), _env(stages)).state
    assert stages.log == ["time", "repair", "time"]
    assert [c.source for c in s.chain] == ["x = 1\n", "x = 3\n"]
    assert s.incumbent.source == "x = 3\n" and s.stale == 0 and 2.4 < s.factor < 2.6


def test_a_fix_that_gains_nothing_does_not_count_the_round_twice():
    stages = RepairingStages({1: [("x = 1\n", 1.0), ("x = 2 wrong\n", 0.1)]},
                             {"x = 2 wrong\n": ("x = 3\n", 1.0)})
    s = run_round(_state(patience=3), _env(stages)).state
    assert stages.log == ["time", "repair", "time"] and s.stale == 1
    stages = RepairingStages({1: [("x = 1\n", 0.5), ("x = 2 wrong\n", 0.1)]},
                             {"x = 2 wrong\n": ("x = 3\n", 1.0)})
    s = run_round(_state(patience=3), _env(stages)).state
    assert s.stale == 0 and s.incumbent.source == "x = 1\n"


def test_with_nothing_verified_the_repairs_come_first_and_their_fixes_are_timed():
    stages = RepairingStages({1: [("x = 2 wrong\n", 0.1)]}, {"x = 2 wrong\n": ("x = 3\n", 0.5)})
    s = run_round(_state(), _env(stages)).state
    assert stages.log == ["repair", "time"] and s.incumbent.source == "x = 3\n"
    assert s.first_verified_s is not None
    stages = RepairingStages({1: [("x = 2 wrong\n", 0.1)]}, {})
    s = run_round(_state(patience=3), _env(stages)).state
    assert stages.log == ["repair"] and s.stale == 1 and s.first_verified_s is None


def test_a_round_without_gain_counts_towards_patience():
    stages = FakeStages({1: [("x = 1\n", 1.0)], 2: [("x = 2\n", 1.2)]})
    s = run_round(_state(patience=2), _env(stages)).state
    assert s.stale == 1 and s.incumbent is ORIGINAL
    out = run_round(s, _env(stages))
    assert out.stop == "no gain for 2 rounds" and out.state.round == 2


def test_nothing_proposed_stops_without_counting_a_round():
    out = run_round(_state(), _env(FakeStages({})))
    assert out.stop == "no new candidates" and out.state.round == 0


def test_the_config_search_flag_reaches_the_proposers_once():
    stages = FakeStages({1: [("x = 1\n", 1.0)]})
    s = run_round(_state(config_search=True), _env(stages)).state
    assert stages.contexts[0].config_search_only
    assert s.config_search_done and not s.config_search


def test_the_state_is_a_value_a_round_does_not_change_it():
    before = _state()
    run_round(before, _env(FakeStages({1: [("x = 1\n", 0.5)]})))
    assert before.round == 0 and before.chain == () and before.history == ()


def test_nothing_proposed_asks_once_for_a_config_search(monkeypatch):
    """The proposers find nothing (a diagnosis near the roofline, say); the loop asks them once
    more with ``config_search_only`` set, and a config found then is judged like any other."""
    from tritonforge.search.loop import Optimizer

    class ConfigOnly(FakeStages):
        def _propose(self, ctx):
            self.contexts.append(ctx)
            if not ctx.config_search_only:
                return []
            c = Candidate("x = 9  # num_warps\n", "config", ctx.incumbent.hash, "num_warps 8")
            self.ms[c.hash] = 0.8
            return [c]

    stages = ConfigOnly({})
    opt = Optimizer.__new__(Optimizer)
    opt.interpreted = False
    clock = [0.0]
    state, stop = opt._rounds(_state(patience=1), _env(stages), BudgetPolicy(100.0, lambda: clock[0]), 8)
    assert [c.config_search_only for c in stages.contexts] == [False, True, False]
    assert state.chain and state.chain[0].description == "num_warps 8"
    assert stop == "no new candidates" and state.config_search_done


def test_the_loop_stops_rounds_when_the_budget_policy_says_so():
    from tritonforge.search.loop import Optimizer

    clock = [0.0]

    class Slow(FakeStages):
        def _time(self, *a, **kw):
            clock[0] += 40.0                    # each round's timing: 40 s on the fake clock
            return super()._time(*a, **kw)

    stages = Slow({r: [(f"x = {r}\n", 0.9)] for r in range(1, 9)})   # 1.11x a round: never banked
    opt = Optimizer.__new__(Optimizer)
    opt.interpreted = False
    env = _env(stages)
    import tritonforge.search.rounds as rounds_mod
    saved = rounds_mod._busy_s
    rounds_mod._busy_s = lambda since, blocked: 40.0
    try:
        state, stop = opt._rounds(_state(patience=2), env, BudgetPolicy(120.0, lambda: clock[0]), 8)
    finally:
        rounds_mod._busy_s = saved
    # 40 s, 80 s, then 120 s: a third round starts at 80 s (a quarter of a 40 s round and the
    # 10 s final check fit: 100 s), a fourth would not (140 s)
    assert stop == "time budget spent" and state.round == 3
    assert any("round 4 not started" in n for n in state.notes)


def test_out_of_time_round_one_still_verifies_until_one_candidate_passes():
    """The final check no longer fits: round 1 keeps verifying until a candidate passes (else
    the record's fixed cost bought nothing); a later round starts no request at all."""
    from tritonforge.search.cascade import verify_cascade
    from tritonforge.search.rounds import _verify_while

    class Pool:
        def __init__(self):
            self.asked = []

        def evaluate(self, task, variants, **kwargs):
            self.asked.append(variants[1].source)
            status = Status.MISMATCH if "wrong" in variants[1].source else Status.OK
            r = VariantResult("candidate", variants[1].hash, status)
            return SimpleNamespace(result=lambda name: r)

    env = SimpleNamespace(in_time=lambda: False, within_budget=lambda: True)
    cands = [Candidate(s, "r") for s in ("x = 1 wrong\n", "x = 2\n", "x = 3\n", "x = 4\n")]
    pool = Pool()
    got = verify_cascade([pool], TASK, ORIGINAL, cands, (("c",),), in_time=_verify_while(env, 1))
    assert pool.asked == ["x = 1 wrong\n", "x = 2\n"]
    assert [got[c.hash].status for c in cands] == [Status.MISMATCH, Status.OK, Status.SKIPPED,
                                                   Status.SKIPPED]
    pool = Pool()
    got = verify_cascade([pool], TASK, ORIGINAL, cands, (("c",),), in_time=_verify_while(env, 2))
    assert pool.asked == [] and all(r.status is Status.SKIPPED for r in got.values())


def test_the_first_verified_candidates_time_is_kept_once():
    stages = FakeStages({1: [("x = 1 wrong\n", 0.5)], 2: [("x = 2\n", 1.0)], 3: [("x = 3\n", 1.0)]})
    clock = iter([7.0, 9.0, 11.0])
    env = _env(stages)
    env.elapsed = lambda: next(clock)
    s = run_round(_state(patience=5), env).state
    assert s.first_verified_s is None                    # round 1: nothing passed
    s = run_round(s, env).state
    assert s.first_verified_s == 7.0
    s = run_round(s, env).state
    assert s.first_verified_s == 7.0                     # kept, not moved


def test_the_round_width_follows_the_device_unless_set():
    from tritonforge.config import Settings
    from tritonforge.search.loop import auto_per_round

    assert auto_per_round(Settings(), interpreted=False) > auto_per_round(Settings(), interpreted=True)
    assert auto_per_round(Settings(candidates_per_round=9), interpreted=False) == 9
    assert auto_per_round(Settings(candidates_per_round=9), interpreted=True) == 9


def test_round_one_stops_verifying_once_the_budget_itself_is_spent():
    """Past the budget (not only the final check's room), round 1 no longer waits for a
    candidate to pass: the record's wall must stay under its cap."""
    from tritonforge.search.rounds import _verify_while

    spent = SimpleNamespace(in_time=lambda: False, within_budget=lambda: False)
    assert not _verify_while(spent, 1)({})
    left = SimpleNamespace(in_time=lambda: False, within_budget=lambda: True)
    assert _verify_while(left, 1)({})


def test_a_later_round_verifies_only_while_the_final_check_fits_the_budget():
    """Round 2 and on start with room for part of a round: each request needs the final check's
    room before the budget, not only before the cap, and never waits for a pass."""
    from tritonforge.search.rounds import _verify_while

    before_cap_only = SimpleNamespace(in_time=lambda: True, in_budget=lambda: False,
                                      within_budget=lambda: True)
    assert _verify_while(before_cap_only, 1)({})
    assert not _verify_while(before_cap_only, 2)({})
    both = SimpleNamespace(in_time=lambda: True, in_budget=lambda: True, within_budget=lambda: True)
    assert _verify_while(both, 3)({})


def test_verification_stops_once_timing_what_passed_would_not_fit():
    """Once candidates have passed, a request starts only while timing them and one more beside
    the incumbent fits the room the final check leaves: verified candidates never timed bought
    nothing (attn_fwd_causal, H100: 14 verified in round 1 to the cap, none timed)."""
    from tritonforge.search.cascade import verify_cascade
    from tritonforge.search.rounds import _verify_while

    class Pool:
        def __init__(self):
            self.asked = []

        def evaluate(self, task, variants, **kwargs):
            self.asked.append(variants[1].source)
            r = VariantResult("candidate", variants[1].hash, Status.OK)
            return SimpleNamespace(result=lambda name: r)

    seen = []

    def timing_s(ids, variants):
        seen.append((tuple(ids), variants))
        return 10.0 * variants            # 10 s a variant on the search cases
    env = SimpleNamespace(in_time=lambda: True, within_budget=lambda: True, in_budget=lambda: True,
                          timing_room_s=lambda: 45.0, timing_room_in_budget_s=lambda: 35.0,
                          estimate=SimpleNamespace(timing_s=timing_s))
    cands = [Candidate(f"x = {i}\n", "r") for i in range(6)]
    pool = Pool()
    got = verify_cascade([pool], TASK, ORIGINAL, cands, (("c",),),
                         in_time=_verify_while(env, 1, ("p0",)))
    # 1 passed: 3 variants, 30 s; 2 passed: 40 s; 3 passed: 50 s > 45 s: no fourth request
    assert len(pool.asked) == 3
    assert [got[c.hash].status for c in cands] == [Status.OK] * 3 + [Status.SKIPPED] * 3
    assert seen and all(ids == ("p0",) for ids, _ in seen)
    pool = Pool()
    verify_cascade([pool], TASK, ORIGINAL, cands, (("c",),), in_time=_verify_while(env, 2, ("p0",)))
    assert len(pool.asked) == 2          # a later round: the room before the budget, 35 s


def test_no_twin_run_of_the_original_once_the_budget_is_spent():
    class Twins(FakeStages):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.twins = 0

        def _cases_the_original_crashes(self, *a):
            self.twins += 1
            return set()

    stages = Twins({1: [("x = 1 wrong\n", 1.0)]})
    env = _env(stages)
    env.in_time, env.within_budget = (lambda: False), (lambda: False)
    run_round(_state(), env)
    assert stages.twins == 0
    env.within_budget = lambda: True
    run_round(_state(), env)
    assert stages.twins == 1


def test_a_round_times_only_the_verified_candidates_that_leave_the_final_check_room():
    """Timing each candidate costs 10 s here and 25 s of room is left: the first two verified
    (proposal order, the cost model's best first) are timed, the rest noted, untimed."""
    stages = FakeStages({1: [(f"x = {i}\n", 0.5 + 0.01 * i) for i in range(1, 6)]})
    env = _env(stages)
    env.estimate = SimpleNamespace(observe=lambda *a: None, seconds=lambda ids: 10.0,
                                   timing_s=lambda ids, variants: 10.0 * (variants - 1))
    env.timing_room_s = lambda: 25.0
    out = run_round(_state(), env)
    assert len(stages.timed) == 1 and len(stages.timed[0]) == 2
    assert any("3 verified candidate(s) not timed" in n for n in out.state.notes)
    assert out.state.incumbent.source == "x = 1\n"          # the faster of the two timed
    # the timing request itself is told to end within that room (on fewer samples where the
    # estimate fell short: runtime.worker_evaluate.case_plan)
    assert stages.end_within == [25.0]
    # without a budget every verified candidate is timed, with no bound on its end
    stages = FakeStages({1: [(f"x = {i}\n", 0.5) for i in range(1, 6)]})
    run_round(_state(), _env(stages))
    assert len(stages.timed[0]) == 5 and stages.end_within == [None]


def test_a_later_round_times_what_leaves_the_final_check_room_before_the_budget():
    """Round 1 times up to the cap's room (35 s: three), a later round only to the budget's
    (15 s: one), since it started with room for part of a round only."""
    def timed_in(round_):
        stages = FakeStages({round_: [(f"x = {i}\n", 0.5 + 0.01 * i) for i in range(1, 6)]})
        env = _env(stages)
        env.estimate = SimpleNamespace(observe=lambda *a: None, seconds=lambda ids: 10.0,
                                       timing_s=lambda ids, variants: 10.0 * (variants - 1))
        env.timing_room_s = lambda: 35.0
        env.timing_room_in_budget_s = lambda: 15.0
        run_round(_state(round=round_ - 1), env)
        return len(stages.timed[0])
    assert timed_in(1) == 3
    assert timed_in(2) == 1


def test_at_least_one_verified_candidate_is_timed_however_short_the_room():
    stages = FakeStages({1: [("x = 1\n", 0.5), ("x = 2\n", 0.5)]})
    env = _env(stages)
    env.estimate = SimpleNamespace(observe=lambda *a: None, seconds=lambda ids: 10.0,
                                   timing_s=lambda ids, variants: 10.0 * (variants - 1))
    env.timing_room_s = lambda: -5.0
    run_round(_state(), env)
    assert [len(t) for t in stages.timed] == [1]


class LateWrong(FakeStages):
    """A source with "latewrong" passes the first tiers and fails the deferred one."""

    def __init__(self, proposals, incumbent_ms=1.0):
        super().__init__(proposals, incumbent_ms)
        self.tiers = []

    def verify(self, task, original, cands, tiers, in_time=lambda got: True, fresh=True):
        self.tiers.append((tuple(tiers), [c.source for c in cands]))
        late = tuple(tiers) == (("p",),)
        return {c.hash: VariantResult("candidate", c.hash,
                                      Status.MISMATCH if late and "latewrong" in c.source
                                      else Status.OK) for c in cands}


def test_the_performance_tier_is_verified_only_for_accepted_candidates_best_first():
    """Every candidate is verified on the tiers before the last; only those the arbiter accepts
    are verified on the last (performance cases alone), fastest first, until one passes: it is
    the incumbent. The faster one that failed there is recorded as that failure and leaves the
    ranking; the slower one never runs the performance tier."""
    stages = LateWrong({1: [("x = 1 latewrong\n", 0.4), ("x = 2\n", 0.6), ("x = 3\n", 1.2)]})
    s = run_round(_state(), _env(stages)).state
    assert stages.tiers[0] == ((("c",),), ["x = 1 latewrong\n", "x = 2\n", "x = 3\n"])
    assert stages.tiers[1:] == [((("p",),), ["x = 1 latewrong\n"]), ((("p",),), ["x = 2\n"])]
    assert s.incumbent.source == "x = 2\n" and s.stale == 0
    failed = [h for h in s.history if h.description == "x = 1 latewrong"]
    assert [h.status for h in failed] == [Status.MISMATCH]
    assert "checked once accepted" in failed[0].reason and "2.500x" in failed[0].reason
    assert all(c.source != "x = 1 latewrong\n" for _, _, c in s.ranked)


def test_a_deferred_tier_that_defines_no_result_of_the_originals_leaves_the_earlier_tiers_standing():
    """The deferred tier checked nothing (the original read outside its arguments on every
    case of it): the accepted candidate becomes the incumbent on its earlier tiers. A deferred
    tier that found a mismatch, or checked a case and then judged nothing else, still fails it."""
    from tritonforge.model import Failure, Mismatch, Verdict
    from tritonforge.search.blame import judged_nothing

    undefined = Failure(Status.SKIPPED, "nothing verified: the original reads outside its "
                        "arguments' memory on every case checked, so no case defines its result")

    def result(checked=0, mismatches=(), failure=undefined):
        return VariantResult("candidate", "h", Status.MISMATCH,
                             verdict=Verdict(passed=False, mismatches=mismatches, checked=checked,
                                             failure=failure))

    assert judged_nothing(result())
    assert not judged_nothing(result(checked=1))
    assert not judged_nothing(result(mismatches=(Mismatch("p", 0, "return", "value", "differs"),)))
    assert not judged_nothing(result(failure=None))
    assert not judged_nothing(VariantResult("candidate", "h", Status.OK))

    class Undefined(LateWrong):
        def verify(self, task, original, cands, tiers, in_time=lambda got: True, fresh=True):
            got = super().verify(task, original, cands, tiers, in_time)
            if tuple(tiers) == (("p",),):
                return {h: (result() if r.status is Status.OK else r) for h, r in got.items()}
            return got

    stages = Undefined({1: [("x = 1 latewrong\n", 0.4), ("x = 2\n", 0.6)]})
    s = run_round(_state(), _env(stages)).state
    assert s.incumbent.source == "x = 2\n"          # the mismatching faster one still fails


def test_no_accepted_candidate_passing_the_performance_tier_is_a_round_without_gain():
    stages = LateWrong({1: [("x = 1 latewrong\n", 0.4), ("x = 3\n", 1.2)]})
    s = run_round(_state(), _env(stages)).state
    assert s.incumbent is ORIGINAL and s.stale == 1 and s.chain == ()


def test_a_last_tier_with_a_generated_case_or_a_single_tier_defers_nothing():
    from dataclasses import replace

    from tritonforge.search.cases import split_deferred

    assert split_deferred(TASK, (("c",), ("p",))) == ((("c",),), ("p",))
    assert split_deferred(TASK, (("c", "p"),)) == ((("c", "p"),), ())
    made = replace(TASK, cases=TASK.cases + (Case("g", CaseRole.CORRECTNESS, SpecCall("f"),
                                                   generated=True),))
    assert split_deferred(made, (("c", "p"), ("g",))) == ((("c", "p"), ("g",)), ())
    # an own case is in the last tier only as a costly one (cases.costly_cases): deferred
    assert split_deferred(TASK, (("p",), ("c",))) == ((("p",),), ("c",))
    stages = LateWrong({1: [("x = 1 latewrong\n", 0.4)]})
    s = run_round(SearchState(TASK, ORIGINAL, ORIGINAL, ("p",), (("c", "p"),)), _env(stages)).state
    assert len(stages.tiers) == 1 and s.incumbent.source == "x = 1 latewrong\n"


def test_accepted_candidates_the_budget_left_unchecked_go_to_the_final_check_as_runners_up():
    """No time left for the deferred tier: nothing becomes the incumbent, and the accepted
    candidates are handed to the final check (which verifies every case) as runners-up."""
    class NoTimeLate(LateWrong):
        def verify(self, task, original, cands, tiers, in_time=lambda got: True, fresh=True):
            got = super().verify(task, original, cands, tiers, in_time)
            if tuple(tiers) == (("p",),):
                return {h: VariantResult("candidate", h, Status.SKIPPED) for h in got}
            return got

    stages = NoTimeLate({1: [("x = 1\n", 0.4), ("x = 2\n", 0.6)]})
    s = run_round(_state(), _env(stages)).state
    assert s.incumbent is ORIGINAL and s.stale == 1
    assert {c.source for _, _, c in s.runners} == {"x = 1\n", "x = 2\n"}


def test_a_deferred_case_the_original_itself_fails_is_dropped_and_the_candidate_checked_again():
    """The accepted candidate fails the deferred tier on a case where the original, run after
    itself, fails too: the case leaves the task (and the tiers), the candidate is verified again
    on the rest of the tier and becomes the incumbent."""
    from tritonforge.model import Failure

    task = Task("t", ORIGINAL.source, ("f",), (
        Case("c", CaseRole.CORRECTNESS, SpecCall("f")), Case("p", CaseRole.PERFORMANCE, SpecCall("f")),
        Case("q", CaseRole.PERFORMANCE, SpecCall("f")), Case("r", CaseRole.PERFORMANCE, SpecCall("f"))),
        "test")

    class BrokenCase(FakeStages):
        def __init__(self, proposals):
            super().__init__(proposals)
            self.tiers, self.twins = [], []

        def verify(self, task, original, cands, tiers, in_time=lambda got: True, fresh=True):
            self.tiers.append(tuple(tiers))
            ids = {cid for t in tiers for cid in t}
            bad = "r" in ids
            return {c.hash: VariantResult("candidate", c.hash, Status.CRASH if bad else Status.OK,
                                          Failure(Status.CRASH, "illegal memory access", case_id="r")
                                          if bad else None) for c in cands}

        def _cases_the_original_crashes(self, task, original, cands, verified, case_ids):
            self.twins.append(tuple(case_ids))
            blamed = {r.failure.case_id for r in verified.values() if r.failure is not None}
            return {"r"} & blamed & set(case_ids)

    stages = BrokenCase({1: [("x = 1\n", 0.5)]})
    state = SearchState(task, ORIGINAL, ORIGINAL, ("p",), (("c", "p"), ("q", "r")))
    s = run_round(state, _env(stages)).state
    assert stages.tiers == [(("c", "p"),), (("q", "r"),), (("q",),)]
    assert stages.twins[-1] == ("q", "r")
    assert s.incumbent.source == "x = 1\n"
    assert "r" not in {c.id for c in s.task.cases} and s.verify_ids == ("c", "p", "q")
    assert any("case r dropped" in n for n in s.notes)


def test_a_search_out_of_patience_early_runs_one_more_config_round():
    """Stopped for want of gain with over half its budget left, or later with nothing accepted
    yet, the search runs one more round, of configuration search alone, once; without a budget,
    or later with an accepted incumbent (a found win to lose), it stops."""
    from tritonforge.search.loop import Optimizer

    def run(clock_s, budget_s, accepted=False):
        # never faster, nor near (a near miss would be branched from: the tests below)
        stages = FakeStages({r: [(f"x = {r}\n", 2.0)] for r in range(1, 9)})
        opt = Optimizer.__new__(Optimizer)
        opt.interpreted = False
        chain = (Candidate("x = 7\n", "fake"),) if accepted else ()
        state, stop = opt._rounds(_state(patience=1, chain=chain), _env(stages),
                                  BudgetPolicy(budget_s, lambda: clock_s), 8)
        return stages, state, stop

    stages, state, stop = run(10.0, 120.0)
    assert [c.config_search_only for c in stages.contexts] == [False, True]
    assert stop == "no gain for 2 rounds" and state.spare_round and state.round == 2
    assert any("one more round of configuration search" in n for n in state.notes)
    stages, state, stop = run(70.0, 120.0)                    # nothing accepted: the round fits
    assert [c.config_search_only for c in stages.contexts] == [False, True] and state.spare_round
    stages, state, stop = run(70.0, 120.0, accepted=True)
    assert len(stages.contexts) == 1 and stop == "no gain for 1 rounds" and not state.spare_round
    stages, state, stop = run(10.0, None)
    assert len(stages.contexts) == 1 and stop == "no gain for 1 rounds"


def test_a_config_only_search_out_of_configurations_asks_every_proposer_once():
    """Near the roofline the rounds are configuration search alone; once it has nothing new,
    with over half the budget left or nothing accepted yet, one round asks every proposer; with
    less left and an accepted incumbent, or once that round ran, the search ends."""
    from tritonforge.search.loop import Optimizer

    class ConfigsThenRules(FakeStages):
        """Configurations (``proposals``) while the rounds ask for them alone, then one rule."""

        def _propose(self, ctx):
            if ctx.config_search_only:
                return super()._propose(ctx)
            self.contexts.append(ctx)
            c = Candidate("x = 9\n", "fake", ctx.incumbent.hash, "a rule")
            self.ms[c.hash] = 0.5
            return [c]

    def run(clock_s, proposals, accepted=False):
        stages = ConfigsThenRules(proposals)
        opt = Optimizer.__new__(Optimizer)
        opt.interpreted = False
        chain = (Candidate("x = 7\n", "fake"),) if accepted else ()
        start = replace(_state(patience=1, chain=chain), config_search=True)
        state, stop = opt._rounds(start, _env(stages), BudgetPolicy(120.0, lambda: clock_s), 8)
        return stages, state, stop

    # round 1: one config, not faster; the spare config round: nothing new; then every proposer,
    # whose rule is faster
    stages, state, stop = run(10.0, {1: [("x = 1\n", 2.0)]})
    asked = [c.config_search_only for c in stages.contexts]
    assert asked[:3] == [True, True, False] and not any(asked[3:])   # then a search as any other
    assert state.open_round_done and state.incumbent.source == "x = 9\n"
    assert any("one round of every proposer" in n for n in state.notes)
    stages, state, stop = run(70.0, {1: [("x = 1\n", 2.0)]})      # under half left, none accepted
    assert [c.config_search_only for c in stages.contexts][:3] == [True, True, False]
    stages, state, stop = run(70.0, {1: [("x = 1\n", 2.0)]}, accepted=True)
    assert [c.config_search_only for c in stages.contexts] == [True]
    assert stop == "no gain for 1 rounds" and not state.open_round_done


class FromTheBase(FakeStages):
    """Proposes ``proposals[base source]`` (the context's incumbent: the near miss in a branch
    round), each a (source, ms) pair, and records each context."""

    def _propose(self, ctx):
        self.contexts.append(ctx)
        out = []
        for src, ms in self.proposals.get(ctx.incumbent.source, []):
            c = Candidate(src, "fake", ctx.incumbent.hash, src.strip())
            self.ms[c.hash] = ms
            out.append(c)
        return out


def _branching(clock_s, proposals, budget_s=120.0, accepted=False, runner=False):
    """``Optimizer._rounds`` past its other fallbacks (the spare config round, the open round)."""
    from tritonforge.search.loop import Optimizer

    stages = FromTheBase(proposals)
    opt = Optimizer.__new__(Optimizer)
    opt.interpreted = False
    chain = (Candidate("x = 7\n", "fake"),) if accepted else ()
    runners = ((1.5, 0, Candidate("x = 8\n", "fake")),) if runner else ()
    start = replace(_state(patience=1, chain=chain, runners=runners), spare_round=True,
                    config_search_done=True, open_round_done=True)
    state, stop = opt._rounds(start, _env(stages), BudgetPolicy(budget_s, lambda: clock_s), 8)
    return stages, state, stop


def test_a_search_that_would_stop_with_time_left_proposes_from_its_near_miss():
    """Out of patience with over half its budget left, the search proposes once from the timed
    candidate closest to the incumbent's speed (not one far slower); what it finds there is timed
    beside the incumbent, accepted, and described as a change on the near miss. A proposal that
    undoes the near miss's change (the original's own source) is never verified."""
    proposals = {"x = 0\n": [("x = 1\n", 1.02), ("x = 2\n", 3.0)],      # 0.98x and 0.33x
                 "x = 1\n": [("x = 0\n", 1.0), ("x = 1; y = 1\n", 0.5)]}
    stages, state, stop = _branching(10.0, proposals)
    assert [c.incumbent.source for c in stages.contexts][:2] == ["x = 0\n", "x = 1\n"]
    assert [c.branch for c in stages.contexts][:2] == [False, True]
    assert state.incumbent.source == "x = 1; y = 1\n"
    assert state.incumbent.description == "x = 1; y = 1 (on x = 1)"
    verified = {h for batch in stages.verified for h in batch}
    assert ORIGINAL.hash not in verified and len(verified) == 3
    assert state.branched == (Candidate("x = 1\n", "fake").hash,)
    assert any("one round from the near miss 'x = 1'" in n for n in state.notes)


def test_no_branch_round_from_a_candidate_far_slower_late_in_the_budget_or_past_the_limit():
    from tritonforge.search import branch

    far = {"x = 0\n": [("x = 2\n", 3.0)], "x = 2\n": [("x = 2; y = 1\n", 0.5)]}
    stages, state, stop = _branching(10.0, far)
    assert len(stages.contexts) == 1 and stop == "no gain for 1 rounds" and not state.branched
    near = {"x = 0\n": [("x = 1\n", 1.02)], "x = 1\n": [("x = 1; y = 1\n", 0.5)]}
    stages, state, stop = _branching(70.0, near, accepted=True)  # under half left, a win found
    assert len(stages.contexts) == 1 and not state.branched
    stages, state, stop = _branching(70.0, near)                 # under half left, none accepted
    assert len(stages.contexts) == 2 and state.branched
    stages, state, stop = _branching(70.0, near, runner=True)    # one left to the final check
    assert len(stages.contexts) == 1 and not state.branched
    stages, state, stop = _branching(10.0, near, budget_s=None)   # no budget: no time to spare
    assert len(stages.contexts) == 1 and not state.branched
    # a run of near misses, each a little slower: branched from at most MAX_BRANCHES times
    run = {f"x = {i}\n": [(f"x = {i + 1}\n", 1.0 + 0.01 * (i + 1))] for i in range(6)}
    stages, state, stop = _branching(10.0, run)
    assert len(state.branched) == branch.MAX_BRANCHES
    assert len(stages.contexts) == 1 + branch.MAX_BRANCHES and stop.startswith("no gain")


def test_a_round_whose_incumbent_crashed_on_its_first_timed_case_times_again_without_it():
    """The incumbent failed while timed before any case was timed (the crash broke the worker):
    the round times again on the other search cases, so its candidates are judged there."""
    from tritonforge.model import Failure

    class CrashFirst(FakeStages):
        def _time(self, task, incumbent, cands, case_ids, end_within_s=None):
            self.case_ids = getattr(self, "case_ids", []) + [case_ids]
            if "q" in case_ids:
                crash = Failure(Status.CRASH, "illegal memory access", case_id="q", seed=0)
                results = {"incumbent": VariantResult("incumbent", incumbent.hash, Status.CRASH,
                                                      case_failures=(crash,))}
                results.update({f"c{i}": VariantResult(f"c{i}", c.hash, Status.OK)
                                for i, c in enumerate(cands)})
                self.timed.append([c.hash for c in cands])
                return SimpleNamespace(result=results.__getitem__)
            return super()._time(task, incumbent, cands, case_ids, end_within_s)

    stages = CrashFirst({1: [("x = 1\n", 0.5)]})
    out = run_round(SearchState(TASK, ORIGINAL, ORIGINAL, ("q", "p"), (("c",), ("p",))),
                    _env(stages))
    assert stages.case_ids == [("q", "p"), ("p",)]
    assert out.state.incumbent.source == "x = 1\n"          # judged on p: 2x faster
    assert any("timed again without case(s) q" in n for n in out.state.notes)
    assert out.state.search_ids == ("p",)
    # no room for it: the round judges nothing, as before
    stages = CrashFirst({1: [("x = 1\n", 0.5)]})
    env = _env(stages)
    env.estimate = SimpleNamespace(observe=lambda *a: None, seconds=lambda ids: 10.0,
                                   timing_s=lambda ids, variants: 10.0 * variants)
    env.timing_room_s = lambda: 15.0
    out = run_round(SearchState(TASK, ORIGINAL, ORIGINAL, ("q", "p"), (("c",), ("p",))), env)
    assert stages.case_ids == [("q", "p")] and out.state.incumbent is ORIGINAL


def test_a_round_whose_incumbent_keeps_crashing_first_is_timed_again_until_a_case_is_timed():
    """Crashing first on q, then (timed again) on r: timed a third time, on p alone. An incumbent
    that crashes first on every case leaves the round judged on nothing, after at most
    RETIME_WITHOUT_LOST retries."""
    from tritonforge.model import Failure
    from tritonforge.search.rounds import RETIME_WITHOUT_LOST

    class CrashOn(FakeStages):
        crashing = ("q", "r")

        def _time(self, task, incumbent, cands, case_ids, end_within_s=None):
            self.case_ids = getattr(self, "case_ids", []) + [case_ids]
            first = next((c for c in case_ids if c in self.crashing), None)
            if first:
                crash = Failure(Status.CRASH, "illegal memory access", case_id=first, seed=0)
                results = {"incumbent": VariantResult("incumbent", incumbent.hash, Status.CRASH,
                                                      case_failures=(crash,))}
                results.update({f"c{i}": VariantResult(f"c{i}", c.hash, Status.OK)
                                for i, c in enumerate(cands)})
                return SimpleNamespace(result=results.__getitem__)
            return super()._time(task, incumbent, cands, case_ids, end_within_s)

    stages = CrashOn({1: [("x = 1\n", 0.5)]})
    out = run_round(SearchState(TASK, ORIGINAL, ORIGINAL, ("q", "r", "p"), (("c",), ("p",))),
                    _env(stages))
    assert stages.case_ids == [("q", "r", "p"), ("r", "p"), ("p",)]
    assert out.state.incumbent.source == "x = 1\n" and out.state.search_ids == ("p",)
    ids = tuple(f"k{i}" for i in range(RETIME_WITHOUT_LOST + 3))
    stages = CrashOn({1: [("x = 1\n", 0.5)]})
    stages.crashing = ids
    out = run_round(SearchState(TASK, ORIGINAL, ORIGINAL, ids, (("c",), ("p",))), _env(stages))
    assert len(stages.case_ids) == 1 + RETIME_WITHOUT_LOST and out.state.incumbent is ORIGINAL


def test_the_first_verified_time_is_when_a_candidate_passed_ahead_where_one_did():
    stages = FakeStages({1: [("x = 1\n", 0.5), ("x = 2\n", 0.6)]})
    env = _env(stages)
    env.elapsed = lambda: 70.0
    env.verified_before = {Candidate("x = 2\n", "fake", ORIGINAL.hash, "x = 2").hash: 31.0,
                           "not-in-this-round": 12.0}
    out = run_round(_state(), env)
    assert out.state.first_verified_s == 31.0
    env.verified_before = {}
    assert run_round(_state(), env).state.first_verified_s == 70.0


def test_a_decisive_win_with_a_budget_ends_the_search_and_skips_the_sweep():
    """Round 1 makes the incumbent 4x faster on the search's cases: with a budget the search
    ends there (no round 2), banked; without one it goes on. A win short of BANK_AT goes on too."""
    from tritonforge.search.loop import BANK_AT, BANKED, Optimizer

    def run(ms, budget_s, ms2=None):
        stages = FakeStages({1: [("x = 1\n", ms)], 2: [("x = 2\n", ms2 or ms / 2)]})
        opt = Optimizer.__new__(Optimizer)
        opt.interpreted = False
        return opt._rounds(_state(patience=1), _env(stages),
                           BudgetPolicy(budget_s, lambda: 10.0), 8)

    state, stop = run(0.25, 120.0)
    assert stop == BANKED and state.round == 1 and state.factor >= BANK_AT
    assert any("banked" in n for n in state.notes)
    state, stop = run(0.25, None)
    assert stop != BANKED and state.round >= 2
    state, stop = run(0.8, 120.0, ms2=0.9)      # 1.25x, then 1.11x: 1.39x in all
    assert stop != BANKED and state.round >= 2 and state.factor < BANK_AT



def test_a_pending_split_config_keeps_room_for_its_size_dispatch():
    """While a split config the final phase will try is pending (``FinalCheck.split_pending``),
    a round starts only where the final check and the size dispatch after it
    (``FinalCheck.dispatch_reserve_s``) both fit the budget; the reserve is kept for the
    finalists' sweep too. Rounds of 40 s in a 120 s budget: three without a split, two with
    one (80 s + 10 s of round + 10 s of check + 30 s of dispatch is past 120 s)."""
    from tritonforge.search.loop import Optimizer

    class Check:
        estimate_s = staticmethod(lambda cand: 10.0)

        def __init__(self, pending):
            self.pending, self.asked = pending, []

        def _shortest(self, cand, original, perf):
            return 10.0, 10.0

        def split_pending(self, split, factor):
            self.asked.append(factor)
            return self.pending

        def dispatch_reserve_s(self, cand, original, perf):
            return 30.0

    def run(pending):
        clock = [0.0]

        class Slow(FakeStages):
            def _time(self, *a, **kw):
                clock[0] += 40.0
                return super()._time(*a, **kw)

        stages = Slow({r: [(f"x = {r}\n", 0.9)] for r in range(1, 9)})   # 1.11x a round
        opt = Optimizer.__new__(Optimizer)
        opt.interpreted, opt.final_check = False, Check(pending)
        import tritonforge.search.rounds as rounds_mod
        saved = rounds_mod._busy_s
        rounds_mod._busy_s = lambda since, blocked: 40.0
        try:
            state, stop = opt._rounds(_state(patience=2), _env(stages),
                                      BudgetPolicy(120.0, lambda: clock[0]), 8)
        finally:
            rounds_mod._busy_s = saved
        return state, stop, opt

    state, stop, opt = run(False)
    assert stop == "time budget spent" and state.round == 3 and opt._reserve_s == 0.0
    state, stop, opt = run(True)
    assert stop == "time budget spent" and state.round == 2 and opt._reserve_s == 30.0
    assert any("round 3 not started" in n for n in state.notes)


def test_a_split_is_pending_where_it_beats_the_chain_by_the_gain_and_its_dispatch_is_reserved():
    from tritonforge.search.budget import shortest_check_s
    from tritonforge.search.final_check import PROBE_CASE_S, FinalCheck

    check = FinalCheck.__new__(FinalCheck)
    check.settings, check.policy = SimpleNamespace(emit="auto"), ArbiterPolicy()
    split = [(1.9, 0, ORIGINAL), (1.2, 0, ORIGINAL)]
    assert check.split_pending(split, 1.05)
    assert not check.split_pending(split, 1.9)           # no gain over the chain
    assert not check.split_pending([], 1.0)
    check.settings = SimpleNamespace(emit="fixed")
    assert not check.split_pending(split, 1.05)
    check._shortest = lambda cand, original, perf: (20.0, 8.0)
    assert abs(check.dispatch_reserve_s(ORIGINAL, ORIGINAL, 10) - (
        shortest_check_s(20.0, 8.0) + 10 * PROBE_CASE_S)) < 1e-9


def test_no_room_for_the_deferred_tier_hands_the_accepted_candidates_to_the_final_check():
    """Where verifying the accepted candidates on the deferred tier would leave the final check
    no room (``RoundEnv.deferred_room``), none is verified there: the best accepted becomes the
    incumbent on its earlier tiers, first in line for the final check (which verifies every
    case), the others runners-up; with room, the deferred tier runs as before."""
    stages = LateWrong({1: [("x = 1 latewrong\n", 0.4), ("x = 2\n", 0.6), ("x = 3\n", 1.2)]})
    env = replace(_env(stages), deferred_room=lambda: False)
    s = run_round(_state(), env).state
    assert [tiers for tiers, _ in stages.tiers] == [(("c",),)]     # the deferred tier never ran
    assert s.incumbent.source == "x = 1 latewrong\n" and s.stale == 0 and len(s.chain) == 1
    assert [c.source for _, _, c in s.runners] == ["x = 2\n"]
    assert any("left to the final check" in n and "(p)" in n for n in s.notes)
    stages = LateWrong({1: [("x = 1 latewrong\n", 0.4), ("x = 2\n", 0.6)]})
    s = run_round(_state(), replace(_env(stages), deferred_room=lambda: True)).state
    assert s.incumbent.source == "x = 2\n" and len(stages.tiers) == 3
