"""The record's time budget covers its final check (search.budget): the estimate's model, what it
learns from the search's timing, and the loop declining a round the final check would not fit."""

import dataclasses

import pytest

from tritonforge.config import Settings
from tritonforge.model import Candidate
from tritonforge.runtime.evaluator import Evaluator
from tritonforge.runtime.timing_plan import final_check_plan, timing_plan
from tritonforge.runtime.timing import TimingPlan
from tritonforge.search import budget as budget_mod
from tritonforge.search import loop as loop_mod
from tritonforge.search.budget import (
    CALL_OVERHEAD_MS, DEFAULT_RATIO, FINAL_FIXED_S, MAX_RATIO, FinalCheckEstimate, case_timing_ms,
)
from tritonforge.search.loop import Optimizer
from tritonforge.store import RunStore

PLAN = TimingPlan(rounds=10, round_ms=25.0, warmup_ms=25.0, max_calls_per_round=200,
                  min_rounds=4, case_budget_ms=6000.0)


def test_a_microsecond_call_costs_its_capped_calls_per_round():
    # 200 calls of 5 us a round: 1 ms a round, not the 25 ms target
    assert case_timing_ms(0.005, 2, PLAN) == pytest.approx(2 * 25 + 2 * 10 * 1.0)


def test_every_call_of_a_round_pays_its_overhead_beyond_the_round_target():
    """The loop sizes a round by the call's GPU time alone; the flush and the pacing sleep come
    on top of each call, so 200 calls of 5 us with 0.3 ms each take 61 ms a round, not 25."""
    assert case_timing_ms(0.005, 2, PLAN, 0.3) == pytest.approx(2 * 25 + 2 * 10 * 200 * 0.305)
    capped = dataclasses.replace(PLAN, max_calls_per_round=67)
    assert case_timing_ms(0.005, 2, capped, 0.3) == pytest.approx(2 * 25 + 2 * 10 * 67 * 0.305)
    # a slow call: one a round, its overhead a sliver of it
    assert case_timing_ms(100.0, 2, PLAN, 0.3) == pytest.approx(50 + 2 * 10 * 100.3)


def test_the_plans_take_the_configured_calls_per_round():
    settings = Settings()
    assert timing_plan(settings).max_calls_per_round == settings.timing.max_calls_per_round
    assert final_check_plan(settings).max_calls_per_round == settings.timing.max_calls_per_round
    fewer = dataclasses.replace(settings, timing_max_calls_per_round=20)
    assert timing_plan(fewer).max_calls_per_round == 20


def test_a_call_longer_than_the_round_target_is_one_call_a_round():
    assert case_timing_ms(100.0, 2, PLAN) == pytest.approx(50 + 2 * 10 * 100)


def test_the_case_budget_cuts_rounds_past_the_minimum():
    # 20 s of rounds asked; the case budget stops at 6 s, but never under 4 rounds each (8 s)
    assert case_timing_ms(1000.0, 2, PLAN) == pytest.approx(50 + 8000)
    assert case_timing_ms(400.0, 2, PLAN) == pytest.approx(50 + 6000)   # 8 s asked, 3.2 s minimum


def test_an_unknown_call_time_counts_as_a_full_round():
    assert case_timing_ms(float("nan"), 1, PLAN) == pytest.approx(25 + 10 * 25)


def test_the_estimate_scales_the_model_by_what_the_search_measured():
    est = FinalCheckEstimate({"a": 0.01, "b": 2.0, "p1": 0.01, "p2": 5.0}, PLAN, PLAN)
    perf = ("p1", "p2")
    c = CALL_OVERHEAD_MS        # the flush, the input variation and the launch of every call
    model = (case_timing_ms(0.01, 2, PLAN, c) + case_timing_ms(5.0, 2, PLAN, c)) / 1000
    assert est.ratio == DEFAULT_RATIO
    assert est.seconds(perf) == pytest.approx(FINAL_FIXED_S + DEFAULT_RATIO * model)
    searched = (case_timing_ms(0.01, 7, PLAN, c) + case_timing_ms(2.0, 7, PLAN, c)) / 1000
    est.observe(3 * searched, 7, ("a", "b"))
    assert est.ratio == pytest.approx(3.0)
    assert est.seconds(perf) == pytest.approx(FINAL_FIXED_S + 3 * model)


def test_the_ratio_is_bounded_both_ways():
    est = FinalCheckEstimate({"a": 1.0}, PLAN, PLAN)
    est.observe(0.001, 2, ("a",))          # slow variants dropped early: never below the model
    assert est.ratio == 1.0
    est.observe(10_000.0, 2, ("a",))       # a hung request: bounded
    assert est.ratio == MAX_RATIO


def test_the_search_estimates_its_own_timing_below_the_model_and_the_final_check_never():
    """The search's plan screens ties off a case after the minimum rounds, so its requests cost
    less than the model (every variant on every round): its own estimate follows them down, to
    a fifth of the model at the least; the final check's, and a sweep's (another plan), never
    below the model."""
    from tritonforge.search.budget import MIN_SEARCH_RATIO

    sweep = dataclasses.replace(PLAN, rounds=4)
    est = FinalCheckEstimate({"a": 1.0}, PLAN, PLAN)
    model = est._model_s(("a",), 5, PLAN)
    est.observe(0.4 * est._model_s(("a",), 5, PLAN), 5, ("a",))
    assert est.search_ratio == pytest.approx(0.4) and est.ratio == 1.0
    assert est.timing_s(("a",), 5) == pytest.approx(0.4 * model)
    assert est.timing_s(("a",), 5, sweep) == pytest.approx(est._model_s(("a",), 5, sweep))
    low = FinalCheckEstimate({"a": 1.0}, PLAN, PLAN)
    low.observe(0.001, 5, ("a",))
    assert low.search_ratio == MIN_SEARCH_RATIO


def test_the_final_plan_times_longer_than_the_search_plan():
    settings = Settings()
    # the final check does not abandon slower variants: the estimate uses its own plan
    assert final_check_plan(settings).abandon_slower is None
    assert timing_plan(settings).abandon_slower is not None


class EveryRound:
    """Proposes a new candidate each round (the original with a marker comment)."""

    name = "every-round"

    def propose(self, context):
        src = context.incumbent.source + f"\n# round {context.round}\n"
        return [Candidate(src, "fixed", context.incumbent.hash, f"comment {context.round}")]

    def repair(self, request):
        return None


def _run(task, tmp_path, budget_s, fresh=None):
    settings = Settings(device="cpu", max_rounds=2, patience=2, case_timeout_s=120)
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            return Optimizer(task, settings, [ev], [EveryRound()], store, candidates_per_round=1,
                             make_final_evaluator=fresh).run(budget_s)
        finally:
            ev.close()


def test_a_round_the_final_check_would_not_fit_is_not_started(sin_task, tmp_path, monkeypatch):
    # even on its shortest plan (a quarter of its timing) the check would not fit the budget
    monkeypatch.setattr(budget_mod.FinalCheckEstimate, "seconds", lambda self, ids: 30_000.0)
    # the fixed part as without a baseline note (the record's own depends on the machine)
    monkeypatch.setattr(loop_mod, "final_fixed_s", lambda first_runs: budget_mod.FINAL_FIXED_S)
    result = _run(sin_task, tmp_path, 5_000.0)
    assert result.rounds == 1 and result.stop_reason == "time budget spent"
    shortest = budget_mod.shortest_check_s(30_000.0, budget_mod.FINAL_FIXED_S)
    assert any(f"final check about {shortest:.0f} s" in n for n in result.notes), result.notes
    assert result.final is not None          # the final check itself still ran


def test_the_same_budget_runs_the_round_when_the_final_check_fits(sin_task, tmp_path, monkeypatch):
    monkeypatch.setattr(budget_mod.FinalCheckEstimate, "seconds", lambda self, ids: 1.0)
    result = _run(sin_task, tmp_path, 5_000.0)
    assert result.rounds == 2 and result.stop_reason != "time budget spent"


def test_the_final_check_gets_a_worker_started_as_the_record_began(sin_task, tmp_path):
    from tritonforge.runtime.evaluator import PrestartedEvaluators

    made = []

    def make():
        made.append(Evaluator(Settings(device="cpu"), tmp_path / f"final{len(made)}", None,
                              device="cpu"))
        return made[-1]
    fresh = PrestartedEvaluators(make)
    try:
        result = _run(sin_task, tmp_path, None, fresh)
    finally:
        fresh.close()
    assert result.final is not None and result.final.accepted
    assert fresh.prestarted == 1 and not any(e.worker.alive() for e in made)


def test_the_final_checks_fixed_part_is_the_records_own(sin_task, tmp_path, monkeypatch):
    """The loop sizes the final check's fixed part from the baseline run's first runs
    (``search.budget.final_fixed_s``), for the estimate and the check alike."""
    seen = []
    real = loop_mod.final_fixed_s
    monkeypatch.setattr(loop_mod, "final_fixed_s", lambda first: seen.append(first) or real(first))
    settings = Settings(device="cpu", max_rounds=1, patience=1, case_timeout_s=120)
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            opt = Optimizer(sin_task, settings, [ev], [EveryRound()], store,
                            candidates_per_round=1)
            opt.run(5_000.0)
        finally:
            ev.close()
    assert len(seen) == 1 and seen[0] is not None and seen[0] >= 0.0
    assert opt.final_check.fixed_base_s == real(seen[0])
