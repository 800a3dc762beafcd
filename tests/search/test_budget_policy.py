"""The record's budget as one policy (search.budget.BudgetPolicy) under a fake clock: whether a
round starts, the final check's plan shortened to end by the cap, a second final check refused
when it would not fit (the best already checked stands), the size probes' share of the time, and
an autotuned file's first-run tuning in the estimate."""

from types import SimpleNamespace

import pytest

from tritonforge.model import Candidate, Decision, Status, Timing, TimingMethod, VariantResult
from tritonforge.runtime.timing import TimingPlan
from tritonforge.search.arbiter import ArbiterPolicy
from tritonforge.search.budget import (
    AUTOTUNE_CONFIG_S, FINAL_FIXED_S, MIN_PLAN_FRACTION, ROUND_MIN_SHARE, BudgetPolicy,
    AutotuneCost, autotune_first_run_s, shortest_check_s, tuned_keys,
)
from tritonforge.search.final_check import FinalCheck

PLAN = TimingPlan(rounds=10, min_rounds=4, case_budget_ms=6000.0)


class Clock:
    """A fake clock: ``now`` seconds busy, moved by hand or by a fake evaluator."""

    def __init__(self, now=0.0):
        self.now = now

    def __call__(self):
        return self.now


def test_no_budget_says_go_to_everything():
    policy = BudgetPolicy(None, Clock(10_000.0))
    assert policy.start_round(5, 1e6, 1e6)
    assert policy.another_check(1e9)
    assert policy.fit_plan(PLAN, 20.0, 1e9) is PLAN
    assert policy.probe_budget_s(90.0, 1e9) == 90.0


def test_the_first_round_runs_unless_the_fixed_cost_took_the_budget():
    clock = Clock(90.0)
    policy = BudgetPolicy(120.0, clock)
    assert policy.start_round(1, 0.0, 500.0)        # the final estimate cannot stop round 1
    clock.now = 121.0
    go = policy.start_round(1, 0.0, 0.0)
    assert not go and "before the first" in go.reason


def test_a_later_round_starts_if_part_of_a_round_and_the_final_check_fit_the_budget():
    clock = Clock(60.0)
    policy = BudgetPolicy(120.0, clock)
    share = ROUND_MIN_SHARE * 40.0                   # a quarter of a 40 s round: 10 s
    assert policy.start_round(2, 40.0, 50.0 - share)         # 60 + 10 + 50 - 10 = 110
    assert policy.start_round(2, 40.0, 60.0 - share)         # 120: still fits
    go = policy.start_round(2, 40.0, 61.0 - share)           # 121
    assert not go and "round 2 not started" in go.reason and "51 s" in go.reason


def test_a_later_round_reserves_the_final_checks_shortest_plan_where_its_fixed_part_is_known():
    """The first final check shortens its timing to end by the cap: a round is started, and its
    requests sent, while that shortest check fits the budget, not only the full one."""
    clock = Clock(62.0)
    policy = BudgetPolicy(120.0, clock)
    full, fixed = 67.0, 15.0                          # logsumexp_fwd's reservation, 2026-11-27
    assert not policy.start_round(2, 21.0, full)      # 62 + 5 + 67 > 120
    go = policy.start_round(2, 21.0, full, fixed)     # 62 + 5 + 15 + 13 = 95
    assert go, go.reason
    assert not policy.room_in_budget(full) and policy.room_in_budget(full, fixed)
    clock.now = 100.0                                 # 20 s left: 28 s no longer fit
    assert not policy.start_round(2, 21.0, full, fixed)
    assert not policy.room_in_budget(full, fixed)


def test_a_later_rounds_requests_stop_where_the_final_check_would_pass_the_budget():
    clock = Clock(60.0)
    policy = BudgetPolicy(120.0, clock)               # cap 150 s
    assert policy.room_in_budget(60.0)
    assert not policy.room_in_budget(61.0)
    assert policy.room_for(61.0)                      # round 1's room is the cap's
    assert BudgetPolicy(None, clock).room_in_budget(1e9)
    # the timing room before the budget: 60 s left, less the final check's shortest plan
    assert policy.timing_room_in_budget_s(60.0, 20.0) == pytest.approx(60.0 - (20.0 + 0.25 * 40.0))
    assert policy.timing_room_s(60.0, 20.0) == pytest.approx(90.0 - (20.0 + 0.25 * 40.0))


def test_a_second_final_check_runs_only_before_the_cap():
    clock = Clock(100.0)
    policy = BudgetPolicy(120.0, clock)               # cap 150 s
    assert policy.cap_s == pytest.approx(150.0)
    assert policy.another_check(50.0)
    go = policy.another_check(51.0)
    assert not go and "best result already checked stands" in go.reason


def test_the_final_plan_is_shortened_to_end_by_the_cap_never_below_its_floor():
    clock = Clock(100.0)
    policy = BudgetPolicy(120.0, clock)               # 50 s left
    assert policy.fit_plan(PLAN, 20.0, 40.0) is PLAN  # fits with FIT_SLACK to spare: unchanged
    # 60 s asked: it aims 9 s (15% of 60) before the cap, 21 s of timing for 40 asked
    half = policy.fit_plan(PLAN, 20.0, 60.0)
    assert half.rounds == 5 and half.case_budget_ms == pytest.approx(6000.0 * 21 / 40)
    # exactly the time left is no longer enough: the slack shortens it
    assert policy.fit_plan(PLAN, 20.0, 50.0).rounds < PLAN.rounds
    clock.now = 149.0                                 # 1 s left: the floor, never nothing
    floor = policy.fit_plan(PLAN, 20.0, 80.0)
    assert floor.rounds == PLAN.min_rounds
    assert floor.case_budget_ms == pytest.approx(PLAN.case_budget_ms * MIN_PLAN_FRACTION)


def test_probes_get_what_leaves_their_final_check_room():
    clock = Clock(100.0)
    policy = BudgetPolicy(120.0, clock)               # 50 s left
    assert policy.probe_budget_s(90.0, 30.0) == pytest.approx(20.0)
    assert policy.probe_budget_s(90.0, 60.0) == 0.0


AUTOTUNED = '''
import triton
@triton.autotune(configs=[triton.Config({'B': 64}), triton.Config({'B': 128}),
                          triton.Config({'B': 256})], key=['n'])
@triton.jit
def k(x, n, B: tl.constexpr):
    pass
'''


def test_an_autotuned_file_counts_its_first_run_tuning():
    assert autotune_first_run_s(AUTOTUNED, 10) == pytest.approx(3 * 10 * AUTOTUNE_CONFIG_S)
    assert autotune_first_run_s("import triton\n", 10) == 0.0


ORIGINAL = Candidate("x = 0\n", "original")


def _timed(variant, ms):
    return VariantResult(variant, variant, Status.OK, timings=(
        Timing("p", variant, TimingMethod.CUDA_EVENTS, (ms,) * 9),))


def _final_check(clock, budget_s, check_s, finals):
    """A FinalCheck whose every check takes ``check_s`` on the fake clock and says ``finals``."""
    asked = []

    def evaluate(task, variants, **kwargs):
        asked.append((variants[1].hash, kwargs.get("plan")))
        clock.now += check_s
        best_ms = finals[variants[1].hash]
        o, b = _timed("original", 1.0), _timed("best", best_ms)
        return SimpleNamespace(result=lambda name: o if name == "original" else b)

    said = []
    fc = FinalCheck(SimpleNamespace(emit="fixed", min_speedup=1.05), ArbiterPolicy(),
                    SimpleNamespace(evaluate=evaluate), None, None, said.append, False,
                    BudgetPolicy(budget_s, clock), estimate_s=lambda cand: check_s)
    fc.said = said
    return fc, asked


def test_a_fallback_check_that_would_overrun_the_cap_is_not_run(monkeypatch):
    import tritonforge.search.final_check as fcm
    monkeypatch.setattr(fcm, "final_check_plan", lambda settings: PLAN)
    task = SimpleNamespace(name="t", performance_cases=(SimpleNamespace(id="p"),), cases=())
    a, b = Candidate("x = 1\n", "r", description="a"), Candidate("x = 2\n", "r", description="b")
    # the best (b) fails its check (slower); a fallback to a would end past the 150 s cap, by
    # more than the estimate's stretch (budget.FIRST_CHECK_STRETCH)
    clock = Clock(110.0)
    fc, asked = _final_check(clock, 120.0, 30.0, {a.hash: 0.5, b.hash: 2.0})
    final, out = fc._output(task, ORIGINAL, [a, b], [], [], 2.0, [])
    assert [h for h, _ in asked] == [b.hash]                  # one check, b's
    assert out is ORIGINAL and final.reason.startswith("not checked")
    assert clock.now <= 1.25 * 120.0
    # with room for it, the same fallback runs and a is written
    clock = Clock(40.0)
    fc, asked = _final_check(clock, 120.0, 30.0, {a.hash: 0.5, b.hash: 2.0})
    final, out = fc._output(task, ORIGINAL, [a, b], [], [], 2.0, [])
    assert [h for h, _ in asked] == [b.hash, a.hash] and out is a and final.accepted
    # each check's wall beside its estimate, in the run's log (what a calibration learns from)
    # (the second expected longer: the first check's wall, with a fresh worker's start,
    # rescaled the model)
    assert [s.split(" (")[0] for s in fc.said if "final check of" in s] == [
        "t: final check of b took 30 s", "t: final check of a took 30 s"]
    assert "expected 30 s on the full plan" in fc.said[0] and "expected 40 s" in fc.said[1]


def test_the_first_final_check_runs_on_a_plan_shortened_to_fit(monkeypatch):
    import tritonforge.search.final_check as fcm
    monkeypatch.setattr(fcm, "final_check_plan", lambda settings: PLAN)
    task = SimpleNamespace(name="t", performance_cases=(SimpleNamespace(id="p"),), cases=())
    a = Candidate("x = 1\n", "r", description="a")
    clock = Clock(120.0)                      # 30 s before the cap: 20 s fixed + 40 s x 0.25 fits
    fc, asked = _final_check(clock, 120.0, FINAL_FIXED_S + 40.0, {a.hash: 0.5})
    final, out = fc._output(task, ORIGINAL, [a], [], [], 2.0, [])
    assert len(asked) == 1 and out is a
    plan = asked[0][1]
    assert plan.rounds < PLAN.rounds and plan.case_budget_ms < PLAN.case_budget_ms


def test_a_size_dispatch_out_of_time_runs_no_probe(tmp_path):
    """With less time left than the joined file's check needs, no probe runs and no check."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
    src = example.read_text()
    original = Candidate(src, "original")
    cand = Candidate(src.replace("BLOCK_SIZE = 4\n", "BLOCK_SIZE = 64\n"), "r", original.hash, "64")
    asked = []
    clock = Clock(140.0)                                       # 10 s before the 150 s cap
    fc = FinalCheck(SimpleNamespace(emit="auto", min_speedup=1.05, run_dir=str(tmp_path)),
                    ArbiterPolicy(), SimpleNamespace(evaluate=lambda *a, **k: asked.append(k)),
                    None, None, lambda s: None, False, BudgetPolicy(120.0, clock),
                    estimate_s=lambda c: 30.0)
    task = SimpleNamespace(name="t", performance_cases=(SimpleNamespace(id="p"),))
    vetoed = Decision(cand.hash, False, 1.5, 1.4, 1.2, 1.3, "case p is 30% slower",
                      (("p", 0.77), ("q", 2.5)))
    notes = []
    decision, out = fc._emit_dispatch(task, original, cand, vetoed, notes)
    assert decision is None and out is original and asked == []
    assert "size dispatch not tried" in notes[-1]


def test_room_for_more_work_and_the_profile_timeout_follow_the_budget():
    clock = Clock(100.0)
    policy = BudgetPolicy(120.0, clock)                # 50 s to the cap
    assert policy.room_for(50.0) and not policy.room_for(51.0)
    assert policy.profile_timeout_s() == pytest.approx(30.0)          # a quarter of 120 s
    assert BudgetPolicy(600.0, clock).profile_timeout_s() == pytest.approx(120.0)
    assert BudgetPolicy(60.0, clock).profile_timeout_s() == pytest.approx(30.0)   # the floor
    assert BudgetPolicy(None, clock).profile_timeout_s() == pytest.approx(120.0)
    # the static compile: an eighth of the budget, at least 10 s
    assert policy.static_timeout_s() == pytest.approx(15.0)
    assert BudgetPolicy(40.0, clock).static_timeout_s() == pytest.approx(10.0)
    assert BudgetPolicy(None, clock).static_timeout_s() == pytest.approx(120.0)


def test_the_first_check_runs_only_if_its_shortest_plan_is_near_enough_the_cap():
    from tritonforge.search.budget import FIRST_CHECK_STRETCH

    clock = Clock(100.0)
    policy = BudgetPolicy(120.0, clock)               # cap 150 s: 50 s left
    # 20 s fixed + a quarter of 80 s of timing = 40 s: fits, though the full plan (100 s) does not
    assert policy.first_check(100.0, 20.0)
    # 45 + 0.25 * 55 = 58.75 s: past the cap by the estimate, within its stretch: the cap
    # kills it if the estimate was right
    assert 58.75 <= FIRST_CHECK_STRETCH * 50 and policy.first_check(100.0, 45.0)
    go = policy.first_check(200.0, 70.0)              # 70 + 0.25 * 130 = 102.5 s: twice the room
    assert not go and "shortest" in go.reason and "150 s cap" in go.reason
    assert BudgetPolicy(None, clock).first_check(1e9, 1e9)


def test_a_first_check_that_cannot_end_by_the_cap_is_not_run(monkeypatch):
    """A best whose check cannot end by the cap even on its shortest plan is not checked: the
    record ends within its cap, unimproved, instead of accepting past it."""
    import tritonforge.search.final_check as fcm
    monkeypatch.setattr(fcm, "final_check_plan", lambda settings: PLAN)
    task = SimpleNamespace(name="t", performance_cases=(SimpleNamespace(id="p"),), cases=())
    best = Candidate("x = 1\n", "r", description="best")
    clock = Clock(140.0)                      # 10 s left; 20 s fixed + 0.25 x 40 s needed
    fc, asked = _final_check(clock, 120.0, FINAL_FIXED_S + 40.0, {best.hash: 0.5})
    final, out = fc._output(task, ORIGINAL, [best], [], [], 2.0, [])
    assert asked == [] and out is ORIGINAL and final.reason.startswith("not checked")
    assert "shortest" in final.reason
    # the same check with the time for it runs, and the best is written
    clock = Clock(60.0)
    fc, asked = _final_check(clock, 120.0, FINAL_FIXED_S + 40.0, {best.hash: 0.5})
    final, out = fc._output(task, ORIGINAL, [best], [], [], 2.0, [])
    assert [h for h, _ in asked] == [best.hash] and out is best and final.accepted


def test_an_autotuned_best_counts_its_tuning_in_the_unshortened_part():
    """First-run tuning is never cut by a shorter plan: an autotuned best over 40 cases needs
    more than the plain one at the same clock."""
    perf = tuple(SimpleNamespace(id=f"p{i}") for i in range(40))
    plain, tuned = Candidate("x = 1\n", "r"), Candidate(AUTOTUNED, "r")
    fc, _ = _final_check(Clock(0.0), 120.0, 10.0, {})
    assert fc._fixed_s(plain, ORIGINAL, len(perf)) == FINAL_FIXED_S
    assert fc._fixed_s(tuned, ORIGINAL, len(perf)) == pytest.approx(
        FINAL_FIXED_S + 3 * 40 * AUTOTUNE_CONFIG_S)
    fixed_plain, fixed_tuned = fc._fixed_s(plain, ORIGINAL, 40), fc._fixed_s(tuned, ORIGINAL, 40)
    check_s = fixed_tuned + 10.0
    left = (shortest_check_s(check_s, fixed_plain) + shortest_check_s(check_s, fixed_tuned)) / 2
    from tritonforge.search.budget import FIRST_CHECK_STRETCH
    # the time left, stretched, between the two shortest checks
    policy = BudgetPolicy(120.0, Clock(150.0 - left / FIRST_CHECK_STRETCH))
    assert policy.first_check(check_s, fixed_plain)
    assert not policy.first_check(check_s, fixed_tuned)


TWO_TUNED = AUTOTUNED + '''
@triton.autotune(configs=[triton.Config({'B': 32}), triton.Config({'B': 64})], key=['n'])
@triton.jit
def k_backward(x, n, B: tl.constexpr):
    pass

@triton.jit
def plain(x, n, B: tl.constexpr):
    pass
'''


def test_the_tuning_counted_is_what_the_originals_baseline_run_tuned():
    """From the baseline's autotune-pick notes: a kernel's configs times the keys it tuned; an
    autotuned kernel the run never launched (a backward one) costs nothing; a kernel a candidate
    newly autotunes costs the worst case; notes that may have been cut give the worst case."""
    notes = ["worker seconds (autotune short): import 0.0",
             "autotune pick original: k (1024,) -> B=64, num_warps=4, num_stages=3",
             "autotune pick original: k (4096,) -> B=128, num_warps=4, num_stages=3",
             "autotune pick original: k (4096,) -> B=128, num_warps=4, num_stages=3"]
    keys = tuned_keys(notes, max_lines=64)
    assert keys == {"k": 2}
    assert tuned_keys(notes, max_lines=3) is None            # maybe cut: not trusted
    cost = AutotuneCost(keys, {"k": ("n",), "k_backward": ("n",)})
    assert cost.seconds(TWO_TUNED, 16) == pytest.approx(3 * 2 * AUTOTUNE_CONFIG_S)
    assert cost.seconds(TWO_TUNED, 16, new_cases=5) == pytest.approx(3 * 7 * AUTOTUNE_CONFIG_S)
    assert AutotuneCost().seconds(TWO_TUNED, 16) == pytest.approx(5 * 16 * AUTOTUNE_CONFIG_S)
    # a candidate that autotunes the plain kernel: that kernel on every performance case
    newly = TWO_TUNED.replace("@triton.jit\ndef plain",
                              "@triton.autotune(configs=[triton.Config({'B': 8})], key=['n'])\n"
                              "@triton.jit\ndef plain")
    assert cost.seconds(newly, 16) == pytest.approx((3 * 2 + 16) * AUTOTUNE_CONFIG_S)
    assert AutotuneCost({}, {"k": ("n",), "k_backward": ("n",)}).seconds(TWO_TUNED, 16) == 0.0


def test_a_candidate_keyed_on_more_than_the_original_counts_a_key_per_case():
    """A candidate whose autotune key holds a name the original's does not (autotune_blocks adds
    the sizes a key leaves out) tunes on keys the original's run never saw: a key per performance
    case, not the original's tuned keys."""
    keys = {"k": 2}
    cost = AutotuneCost(keys, {"k": ("n",)})
    assert cost.seconds(AUTOTUNED, 16) == pytest.approx(3 * 2 * AUTOTUNE_CONFIG_S)
    keyed = AUTOTUNED.replace("key=['n']", "key=['n', 'm']")
    assert keyed != AUTOTUNED
    assert cost.seconds(keyed, 16) == pytest.approx(3 * 16 * AUTOTUNE_CONFIG_S)


def test_timing_room_is_what_leaves_the_shortest_first_check_before_the_cap():
    policy = BudgetPolicy(120.0, Clock(100.0))          # 50 s before the cap
    assert policy.timing_room_s(60.0, 20.0) == pytest.approx(50.0 - (20.0 + 0.25 * 40.0))
    assert BudgetPolicy(None, Clock(0.0)).timing_room_s(60.0, 20.0) == float("inf")


def test_the_search_timing_estimate_follows_the_measured_ratio():
    from tritonforge.search.budget import (
        CALL_OVERHEAD_MS, DEFAULT_RATIO, FinalCheckEstimate, case_timing_ms,
    )

    est = FinalCheckEstimate({"p": 1.0}, PLAN, PLAN)
    model = case_timing_ms(1.0, 3, PLAN, CALL_OVERHEAD_MS) / 1000.0
    assert est.timing_s(["p"], 3) == pytest.approx(DEFAULT_RATIO * model)
    measured = 4.0 * case_timing_ms(1.0, 2, PLAN, CALL_OVERHEAD_MS) / 1000.0    # 4x the model
    est.observe(measured, 2, ["p"])
    assert est.timing_s(["p"], 3) == pytest.approx(4.0 * model)


def test_the_final_checks_fixed_part_comes_from_the_baselines_first_runs():
    """Five times the baseline's first runs plus 2 s, at least 5 s; 15 s where no note says
    (nine H100 final checks spent 2.8-39x their first runs outside timing, median 5.2)."""
    from tritonforge.search.budget import (
        FINAL_FIXED_S, FinalCheckEstimate, final_fixed_s, first_runs_s,
    )
    from tritonforge.runtime.timing import TimingPlan
    note = ("worker seconds (autotune short): import 0.0, first runs (compile, autotune) 2.8, "
            "verify 0.0, timing 5.9")
    assert first_runs_s(("another note", note)) == 2.8
    assert first_runs_s(("no such note",)) is None and first_runs_s(None) is None
    assert final_fixed_s(2.8) == 16.0
    assert final_fixed_s(0.1) == 5.0
    assert final_fixed_s(None) == FINAL_FIXED_S
    est = FinalCheckEstimate({}, TimingPlan(), TimingPlan(), fixed_s=7.0)
    assert est.seconds(()) == 7.0


def _autotuned_final_check(clock, rep_ms=10.0):
    """A FinalCheck over an autotuned original whose estimate counts both files' tuning with
    Triton's own benchmark, as the loop's does, on 40 performance cases; its requests' plans kept."""
    perf = tuple(SimpleNamespace(id=f"p{i}") for i in range(40))
    task = SimpleNamespace(name="t", performance_cases=perf, cases=perf)
    original = Candidate(AUTOTUNED, "original")
    best = Candidate(AUTOTUNED + "\n# faster\n", "r", description="best")
    asked = []
    fc = None

    def evaluate(task, variants, **kwargs):
        asked.append(kwargs.get("plan"))
        o = VariantResult("original", "original", Status.OK, timings=tuple(
            Timing(c.id, "original", TimingMethod.CUDA_EVENTS, (1.0,) * 9) for c in perf))
        b = VariantResult("best", "best", Status.OK, timings=tuple(
            Timing(c.id, "best", TimingMethod.CUDA_EVENTS, (0.5,) * 9) for c in perf))
        return SimpleNamespace(result=lambda name: o if name == "original" else b)

    settings = SimpleNamespace(emit="fixed", min_speedup=1.05,
                               timing=SimpleNamespace(search_autotune_rep_ms=rep_ms))
    fc = FinalCheck(settings, ArbiterPolicy(), SimpleNamespace(evaluate=evaluate), None, None,
                    lambda s: None, False, BudgetPolicy(120.0, clock),
                    estimate_s=lambda cand: FINAL_FIXED_S + 10.0
                    + fc._autotune_s(cand, original, len(perf)))
    return fc, task, original, best, asked


def test_an_autotuned_check_reserves_room_for_the_short_benchmark_only():
    """The shortest check tunes on the search's short benchmark: the rounds reserve room for
    that, not for Triton's own 125 ms per config and key."""
    from tritonforge.search.budget import AUTOTUNE_SHORT_CONFIG_S
    fc, task, original, best, _ = _autotuned_final_check(Clock(0.0))
    full_check, full_fixed = fc._expected_s(best), fc._fixed_s(best, original, 40)
    check, fixed = fc._shortest(best, original, 40)
    saving = 2 * 3 * 40 * (AUTOTUNE_CONFIG_S - AUTOTUNE_SHORT_CONFIG_S)
    assert full_fixed - fixed == pytest.approx(saving) and full_check - check == pytest.approx(saving)
    # a file that autotunes nothing saves nothing; nor does a search timed with Triton's own
    plain = Candidate("x = 1\n", "r")
    assert fc._shortest(plain, plain, 40) == (fc._expected_s(plain), fc._fixed_s(plain, plain, 40))
    own, *_ = _autotuned_final_check(Clock(0.0), rep_ms=0.0)
    assert own._shortest(best, original, 40) == (own._expected_s(best),
                                                 own._fixed_s(best, original, 40))


def test_an_autotuned_check_tunes_as_the_user_does_where_it_fits_and_short_where_not(monkeypatch):
    """Triton's own benchmark (the plan's autotune_rep_ms None) with time for it; the short one,
    said in the decision, where Triton's own would not end by the cap. With the full tuning's
    60 s on top of the fixed part, a check at 100 s of a 120 s budget used to be refused."""
    import tritonforge.search.final_check as fcm
    monkeypatch.setattr(fcm, "final_check_plan", lambda settings: PLAN)
    clock = Clock(0.0)
    fc, task, original, best, asked = _autotuned_final_check(clock)
    final, out = fc._output(task, original, [best], [], [], 2.0, [])
    assert asked[-1].autotune_rep_ms is None and out is best and "benchmark" not in final.reason
    clock.now = 100.0                          # 50 s left before the 150 s cap
    full = shortest_check_s(fc._expected_s(best), fc._fixed_s(best, original, 40))
    assert full > 50.0                         # Triton's own tuning alone would not end by it
    fc, task, original, best, asked = _autotuned_final_check(clock)
    final, out = fc._output(task, original, [best], [], [], 2.0, [])
    assert asked and asked[-1].autotune_rep_ms == 10.0
    assert out is best and final.accepted and "10 ms benchmark" in final.reason


def test_the_profile_runs_only_within_its_share_of_the_budget():
    from tritonforge.search.budget import PROFILE_SKIP_SHARE
    clock = Clock(PROFILE_SKIP_SHARE * 120.0)
    assert BudgetPolicy(120.0, clock).profile_go()
    clock.now += 1.0
    go = BudgetPolicy(120.0, clock).profile_go()
    assert not go and go.reason.startswith("not profiled: 37 s of the 120 s budget")
    assert BudgetPolicy(None, Clock(1e6)).profile_go()


def test_a_measured_check_counts_a_fresh_start_only_where_later_workers_are_not_started_ahead(
        monkeypatch):
    """A final check on its full plan rescales later ones (``FinalCheck._observe``) by what it
    took, plus a fresh worker's start where a later check would pay one; with quiet-starting
    spares (``PrestartedEvaluators.starts_ahead``) it would not."""
    import tritonforge.search.final_check as fcm
    from tritonforge.search.final_check import FRESH_START_S, FinalCheck

    plan = object()
    monkeypatch.setattr(fcm, "final_check_plan", lambda settings: plan)

    def calibrated(maker):
        fc = FinalCheck(SimpleNamespace(emit="fixed", min_speedup=1.05), ArbiterPolicy(), None,
                        maker, None, lambda s: None, False, estimate_s=lambda cand: 20.0)
        fc._observe(Candidate("x = 1\n", "r"), plan, 10.0)
        return fc.calibration

    assert calibrated(SimpleNamespace(starts_ahead=True)) == pytest.approx(10.0 / 20.0)
    assert calibrated(SimpleNamespace(starts_ahead=False)) == \
        pytest.approx((10.0 + FRESH_START_S) / 20.0)
    assert calibrated(None) == pytest.approx((10.0 + FRESH_START_S) / 20.0)
