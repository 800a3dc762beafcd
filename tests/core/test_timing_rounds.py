"""The timing loop's bookkeeping, with the CUDA parts stubbed: interleaving, abandoning variants
already far slower than the reference, and the per-case time budget."""

from __future__ import annotations

from tritonforge.runtime import timing
from tritonforge.runtime.timing import TimingPlan, time_interleaved_cuda


def _stub(monkeypatch, per_call_ms: dict[str, float]):
    """Each variant 'runs' in its given time; records how many timed calls each one got."""
    made = {}
    calls = {name: 0 for name in per_call_ms}

    def fn_for(name):
        def fn():
            return name
        made[fn] = name
        return fn

    fns = {name: fn_for(name) for name in per_call_ms}
    monkeypatch.setattr(timing, "_Flusher", lambda enabled, mode="write": (lambda: None))
    monkeypatch.setattr(timing, "_estimate_ms", lambda fn, flush, warmup: per_call_ms[made[fn]])

    def time_events(fn, n, flush):
        calls[made[fn]] += n
        return [per_call_ms[made[fn]]] * n

    monkeypatch.setattr(timing, "_time_events", time_events)
    return fns, calls


def test_every_variant_gets_every_round_when_they_are_close(monkeypatch):
    fns, calls = _stub(monkeypatch, {"inc": 1.0, "a": 1.1, "b": 0.9})
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=10, round_ms=0.5, case_budget_ms=None))
    assert {len(v) for v in samples.values()} == {10}          # one call a round each


def test_a_variant_far_slower_than_the_reference_is_dropped_after_the_minimum_rounds(monkeypatch):
    fns, calls = _stub(monkeypatch, {"inc": 1.0, "slow": 1.5, "ok": 1.2})
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=10, round_ms=0.5, min_rounds=4,
                                                       case_budget_ms=None))
    assert len(samples["inc"]) == len(samples["ok"]) == 10     # 1.2x: within the 1.3x margin
    assert len(samples["slow"]) == 4                           # dropped after 4 rounds


def test_the_screen_stops_a_variant_on_this_case_only_and_keeps_its_samples(monkeypatch):
    """Past the minimum rounds, a variant 1.2x slower is screened off the case (1.1x screen) and
    keeps its four rounds; one 1.05x slower stays in the race; the screen does not reach
    ``far_slower``, which keeps a variant off the next cases."""
    fns, calls = _stub(monkeypatch, {"inc": 1.0, "screened": 1.2, "close": 1.05})
    plan = TimingPlan(rounds=10, round_ms=0.5, min_rounds=4, case_budget_ms=None, screen_slower=1.1)
    samples, _ = time_interleaved_cuda(fns, plan)
    assert len(samples["screened"]) == 4 and samples["screened"] == [1.2] * 4
    assert len(samples["inc"]) == len(samples["close"]) == 10
    assert timing.far_slower(samples, "inc", plan.abandon_slower) == set()


def test_a_tie_is_screened_off_the_case_a_gain_stays_and_a_case_with_no_race_left_ends(monkeypatch):
    """Past the minimum rounds a variant no faster than 0.99 of the reference is timed no further
    on the case (its four rounds stay); one 3% faster stays in the race. Once only the reference
    is left, the case ends."""
    fns, calls = _stub(monkeypatch, {"inc": 1.0, "tie": 0.995, "slower": 1.02, "gain": 0.97})
    plan = TimingPlan(rounds=10, round_ms=0.5, min_rounds=4, case_budget_ms=None,
                      screen_slower=1.1, screen_not_faster=0.99)
    samples, _ = time_interleaved_cuda(fns, plan)
    assert len(samples["tie"]) == len(samples["slower"]) == 4
    assert len(samples["inc"]) == len(samples["gain"]) == 10
    fns, calls = _stub(monkeypatch, {"inc": 1.0, "tie": 1.0, "slower": 1.02})
    samples, _ = time_interleaved_cuda(fns, plan)
    assert {len(v) for v in samples.values()} == {4}
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=10, round_ms=0.5, min_rounds=4,
                                                       case_budget_ms=None, screen_slower=1.1))
    assert {len(v) for v in samples.values()} == {10}      # no tie screen: ties get every round


def test_on_a_slow_case_the_screen_stops_a_slower_variant_on_its_estimate(monkeypatch):
    """With a reference call of 20 ms or more, a variant the screen would stop after its minimum
    rounds is stopped at once, on two confirming calls (its samples); one within the screen, and
    the same variants on a quick case, get every round."""
    plan = TimingPlan(rounds=10, round_ms=0.5, min_rounds=4, case_budget_ms=None, screen_slower=1.1)
    fns, calls = _stub(monkeypatch, {"inc": 40.0, "slower": 46.0, "close": 42.0})
    samples, _ = time_interleaved_cuda(fns, plan)
    assert samples["slower"] == [46.0, 46.0] and calls["slower"] == 2
    assert len(samples["inc"]) == len(samples["close"]) == 10
    fns, calls = _stub(monkeypatch, {"inc": 4.0, "slower": 4.6, "close": 4.2})
    samples, _ = time_interleaved_cuda(fns, plan)
    assert len(samples["slower"]) == 4                  # the screen after the minimum rounds
    fns, calls = _stub(monkeypatch, {"inc": 40.0, "slower": 46.0})
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=10, round_ms=0.5, min_rounds=4,
                                                       case_budget_ms=None, abandon_slower=None))
    assert len(samples["slower"]) == 10                 # no screen (the final check): every round


def test_a_slow_estimate_its_confirming_calls_do_not_bear_out_stops_nothing(monkeypatch):
    fns, calls = _stub(monkeypatch, {"inc": 40.0, "noisy": 40.0})
    monkeypatch.setattr(timing, "_estimate_ms",
                        lambda fn, flush, warmup: 50.0 if fn() == "noisy" else 40.0)
    plan = TimingPlan(rounds=10, round_ms=0.5, min_rounds=4, case_budget_ms=None, screen_slower=1.1)
    samples, _ = time_interleaved_cuda(fns, plan)
    assert len(samples["noisy"]) == 10 and len(samples["inc"]) == 10


def test_the_search_plan_screens_at_twice_the_regression_limit_and_the_final_check_never():
    from tritonforge.config import Settings
    from tritonforge.runtime.timing_plan import final_check_plan, timing_plan

    settings = Settings()
    limit = settings.search.max_case_regression
    assert timing_plan(settings).screen_slower == 1.0 + 2 * limit
    assert final_check_plan(settings).screen_slower is None
    assert timing_plan(settings).screen_not_faster == 0.99
    assert final_check_plan(settings).screen_not_faster is None


def test_a_hopeless_variant_is_dropped_once_a_few_calls_confirm_its_estimate(monkeypatch):
    fns, calls = _stub(monkeypatch, {"inc": 10.0, "awful": 80.0})
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=10, round_ms=5, case_budget_ms=None))
    assert samples["awful"] == [80.0] * 3 and calls["awful"] == 3     # 3 confirming calls, no rounds
    assert len(samples["inc"]) == 4       # the minimum rounds: alone, it compares with nothing


def test_a_slow_estimate_the_calls_do_not_confirm_drops_nothing(monkeypatch):
    """The estimate read 0.71 ms for a 5 us call (l2_norm_bwd, H100, 2026-11-24): below a
    millisecond the estimate drops nothing, and the variant is timed in turns like any other."""
    fns, calls = _stub(monkeypatch, {"inc": 0.005, "c0": 0.005})
    monkeypatch.setattr(timing, "_estimate_ms",
                        lambda fn, flush, warmup: 0.71 if fn is fns["c0"] else 0.005)
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=4, round_ms=0.05, case_budget_ms=None))
    assert len(samples["c0"]) > 3 and max(samples["c0"]) == 0.005


def test_the_reference_is_never_dropped_and_no_abandoning_when_switched_off(monkeypatch):
    fns, _ = _stub(monkeypatch, {"inc": 2.0, "fast": 1.0})
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=6, round_ms=2, case_budget_ms=None))
    assert len(samples["inc"]) == 6 and len(samples["fast"]) == 12
    fns, _ = _stub(monkeypatch, {"inc": 1.0, "slow": 2.0})
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=6, round_ms=2, abandon_slower=None,
                                                       case_budget_ms=None))
    assert len(samples["slow"]) == 6


def test_slow_cases_stop_at_the_case_budget_after_the_minimum_rounds(monkeypatch):
    fns, _ = _stub(monkeypatch, {"inc": 300.0, "c": 290.0})
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=10, round_ms=25, min_rounds=4,
                                                       case_budget_ms=2000.0))
    assert len(samples["inc"]) == 4 and len(samples["c"]) == 4     # 4 x 590 ms > 2 s: stop


def test_variants_far_slower_on_one_case_are_not_timed_on_the_next():
    from tritonforge.runtime.timing import far_slower as _far_slower

    samples = {"inc": [1.0, 1.0, 1.1], "ok": [1.2, 1.2], "awful": [40.0], "empty": []}
    assert _far_slower(samples, "inc", 1.3) == {"awful"}
    assert _far_slower(samples, "inc", None) == set()
    assert _far_slower({"ok": [1.0]}, "inc", 1.3) == set()


def test_one_hiccup_in_the_warm_up_does_not_make_the_estimate(monkeypatch):
    """A 0.44 ms hiccup among 0.016 ms calls once dropped a 27x faster candidate (H100)."""
    seen = iter([[0.44], [0.016, 0.9, 0.017, 0.5, 0.018]])   # first call, then five one by one
    monkeypatch.setattr(timing, "_time_events", lambda fn, n, flush: next(seen))
    monkeypatch.setattr(timing.torch.cuda, "synchronize", lambda: None)
    assert timing._estimate_ms(lambda: None, lambda: None, warmup_ms=25.0) == 0.018
    slow = iter([[40.0]])                              # a slow call is its own estimate
    monkeypatch.setattr(timing, "_time_events", lambda fn, n, flush: next(slow))
    assert timing._estimate_ms(lambda: None, lambda: None, warmup_ms=25.0) == 40.0


def test_the_final_check_times_every_variant_in_full():
    from tritonforge.config import Settings
    from tritonforge.runtime.timing_plan import final_check_plan, timing_plan

    assert timing_plan(Settings()).abandon_slower is not None      # the search may drop variants
    plan = final_check_plan(Settings())
    assert plan.abandon_slower is None and plan.case_budget_ms == timing_plan(Settings()).case_budget_ms


def test_a_quick_variant_is_never_dropped_on_its_estimate_however_slow(monkeypatch):
    """Quick calls timed alone land in one regime as a whole (15 confirming calls of the same
    file read 76 us where it read 38 us in turns, H100, 2026-11-24): only the rounds judge them."""
    fns, calls = _stub(monkeypatch, {"inc": 0.005, "c0": 0.5})
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=6, round_ms=0.5, min_rounds=4,
                                                       case_budget_ms=None))
    assert len(samples["c0"]) == 4                  # timed for the minimum rounds, then dropped


def test_the_baseline_times_the_original_in_fewer_rounds_than_the_search(monkeypatch):
    """The baseline's plan is the search's cut to a few rounds (its times only order the cases
    and size the estimates), and the optimizer's baseline request carries it."""
    from types import SimpleNamespace

    from tritonforge.config import Settings
    from tritonforge.model import Candidate, Case, CaseRole, SpecCall, Task, VariantResult, Status
    from tritonforge.runtime.timing_plan import BASELINE_ROUNDS, baseline_plan, timing_plan
    from tritonforge.search.loop import Optimizer
    from tritonforge.search.phases import PhaseClock

    settings = Settings(device="cpu", timing_pace=False)    # the stub times unpaced calls
    search, base = timing_plan(settings), baseline_plan(settings)
    assert search.rounds > BASELINE_ROUNDS == base.rounds and base.min_rounds <= base.rounds
    assert base == timing_plan(settings).__class__(**{**search.__dict__, "rounds": base.rounds,
                                                      "min_rounds": base.min_rounds})
    fns, calls = _stub(monkeypatch, {"original": 1.0})
    time_interleaved_cuda(fns, base)
    assert calls["original"] == base.rounds * int(base.round_ms)   # a round of 1 ms calls

    sent = []

    def evaluate(task, variants, **kwargs):
        sent.append(kwargs)
        return SimpleNamespace(results=(VariantResult("original", variants[0].hash, Status.OK),),
                               notes=("autotune pick original: k (8,) -> num_warps=4",))
    opt = object.__new__(Optimizer)
    opt.known_baseline, opt.settings = None, settings
    opt._emit = lambda *a, **k: None
    opt.timer = SimpleNamespace(evaluate=evaluate)
    original = Candidate("x = 1\n", "original")
    task = Task("t", original.source, ("f",), (Case("p", CaseRole.PERFORMANCE, SpecCall("f")),), "")
    result, notes = opt._baseline(task, original, PhaseClock(), [])
    assert sent and sent[0]["purpose"] == "baseline" and sent[0]["plan"] == base
    assert result.variant == "original" and notes == ("autotune pick original: k (8,) -> num_warps=4",)


def test_rounds_past_the_minimum_stop_once_the_cases_share_of_the_time_left_is_spent(monkeypatch):
    """``stop_after_s``: a request that should end soon (``EvaluateRequest.end_by``) times each
    case on its minimum rounds rather than being killed at the record's cap; a case past twice
    its share stops after its first round."""
    fns, calls = _stub(monkeypatch, {"inc": 1.0, "a": 1.0})
    clock = iter(float(s) for s in range(1000))          # one second passes per reading
    monkeypatch.setattr(timing.time, "monotonic", lambda: next(clock))
    plan = TimingPlan(rounds=10, round_ms=0.5, case_budget_ms=None, min_rounds=3, stop_after_s=2.5)
    samples, _ = time_interleaved_cuda(fns, plan)
    assert {len(v) for v in samples.values()} == {3}           # the minimum, within twice the share
    plan = TimingPlan(rounds=10, round_ms=0.5, case_budget_ms=None, min_rounds=3, stop_after_s=0.2)
    samples, _ = time_interleaved_cuda(fns, plan)
    assert {len(v) for v in samples.values()} == {1}           # far past it: one round
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=10, round_ms=0.5, min_rounds=3,
                                                       case_budget_ms=None, stop_after_s=1e6))
    assert {len(v) for v in samples.values()} == {10}


def test_each_case_gets_an_even_share_of_the_time_left_before_the_requests_end(monkeypatch):
    from tritonforge.runtime import worker_evaluate
    monkeypatch.setattr(worker_evaluate.time, "monotonic", lambda: 100.0)
    plan = TimingPlan()
    assert worker_evaluate.case_plan(plan, None, 4) is plan
    assert worker_evaluate.case_plan(plan, 120.0, 4).stop_after_s == 5.0
    assert worker_evaluate.case_plan(plan, 90.0, 4).stop_after_s == 0.0    # late: the minimum
    assert worker_evaluate.case_plan(plan, 120.0, 4).rounds == plan.rounds


def test_rounds_past_the_minimum_stop_once_the_case_took_its_budget_in_wall_time(monkeypatch):
    """A 5 us call barely counts against the GPU budget (``case_budget_ms``) while its flushes and
    launches take the wall clock: past the minimum rounds, the case stops at 1.5x its budget in
    wall time as well."""
    fns, calls = _stub(monkeypatch, {"inc": 0.5, "a": 0.5})  # 1 ms of GPU time a round
    clock = iter(float(s) for s in range(1000))          # one second passes per reading
    monkeypatch.setattr(timing.time, "monotonic", lambda: next(clock))
    plan = TimingPlan(rounds=10, round_ms=0.5, min_rounds=3, case_budget_ms=500.0)
    samples, _ = time_interleaved_cuda(fns, plan)
    assert {len(v) for v in samples.values()} == {3}           # 1 s past 1.5 x 0.5 s: the minimum
    samples, _ = time_interleaved_cuda(fns, TimingPlan(rounds=10, round_ms=0.5, min_rounds=3,
                                                       case_budget_ms=1e6))
    assert {len(v) for v in samples.values()} == {10}
