"""A final check's measured wall rescales the estimate of later ones (FinalCheck._expected_s):
the model counts every autotune config once per performance case, and an autotuner keyed on
nothing (tuned once) ran its first check in a third of that, so the model refused every
runner-up with time to spare. Only a check timed through on its full plan teaches anything,
and the rescaling is bounded both ways."""

from types import SimpleNamespace

import pytest

import tritonforge.search.final_check as final_check
from final_fakes import bare_final_check
from tritonforge.model import Candidate, Case, CaseRole, Failure, Status, Task, Timing, TimingMethod, VariantResult

ORIGINAL = Candidate("x = 1\n", "original")
BEST = Candidate("x = 2\n", "rules:t", description="faster")
IDS = ("perf-00", "perf-01")
TASK = Task("k", "x = 1\n", ("f",), tuple(Case(c, CaseRole.PERFORMANCE, None) for c in IDS), "t")
MODEL_S = 60.0


def _timed(name, ms):
    return tuple(Timing(cid, name, TimingMethod.CUDA_EVENTS, (ms,) * 20) for cid in IDS)


def _check(monkeypatch, wall_s, outcome="ok", plan="full"):
    clock = [0.0]
    monkeypatch.setattr(final_check.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(final_check, "final_check_plan", lambda settings: "full")

    def evaluate(task, variants, *, purpose, **kw):
        clock[0] += wall_s
        o = VariantResult("original", "o", Status.OK, timings=_timed("o", 2.0))
        if outcome == "ok":
            b = VariantResult("best", "b", Status.OK, timings=_timed("b", 1.0))
        else:
            b = VariantResult("best", "b", Status.MISMATCH,
                              Failure(Status.MISMATCH, "wrong", case_id="perf-01"))
        return SimpleNamespace(result=lambda name: o if name == "original" else b)

    check = bare_final_check(evaluate)
    check.estimate_s = lambda cand: MODEL_S
    check._plan = lambda task, original, cand: plan
    return check


def test_the_model_stands_until_a_check_was_measured(monkeypatch):
    check = _check(monkeypatch, 20.0)
    assert check._expected_s(BEST) == MODEL_S


def test_a_check_timed_through_on_its_full_plan_rescales_the_next(monkeypatch):
    check = _check(monkeypatch, 26.0)
    assert check._final_once(TASK, ORIGINAL, BEST)[2].accepted
    # 26 s measured + a fresh worker's start, against the model's 60 s
    assert check._expected_s(BEST) == pytest.approx(26.0 + final_check.FRESH_START_S)


@pytest.mark.parametrize("wall_s, factor", [(1.0, 0.5), (500.0, 2.0)])
def test_the_rescaling_is_bounded_both_ways(monkeypatch, wall_s, factor):
    check = _check(monkeypatch, wall_s)
    check._final_once(TASK, ORIGINAL, BEST)
    assert check._expected_s(BEST) == pytest.approx(factor * MODEL_S)


def test_a_shortened_plan_or_an_untimed_check_teaches_nothing(monkeypatch):
    shortened = _check(monkeypatch, 5.0, plan="shortened")
    shortened._final_once(TASK, ORIGINAL, BEST)
    assert shortened._expected_s(BEST) == MODEL_S
    wrong = _check(monkeypatch, 5.0, outcome="mismatch")       # stopped before its timing
    wrong._final_once(TASK, ORIGINAL, BEST)
    assert wrong._expected_s(BEST) == MODEL_S
