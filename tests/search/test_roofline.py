"""The near-the-roofline stop judged on the cases that carry the time (search.roofline), and
what the loop does with it (one round of configuration search, then patience 1)."""

from tritonforge.model import (
    Bound, Case, CaseRole, PerfScriptCall, Profile, Roofline, SpecCall, Status, Task, TensorSpec,
    Timing, TimingMethod, VariantResult,
)
from tritonforge.search.roofline import NEAR_FRACTION, input_bytes, roofline_call


def _case(cid, n):
    return Case(cid, CaseRole.PERFORMANCE, SpecCall("f", (TensorSpec((n,), "float32"),)))


def _base(times):
    return VariantResult("original", "h", Status.OK, timings=tuple(
        Timing(cid, "original", TimingMethod.CUDA_EVENTS, (ms,)) for cid, ms in times.items()))


def _profile(case_id, fraction, time_us):
    roof = Roofline(1e6, 0.0, time_us, 0.0, 0.0, 3000.0, 60.0, fraction, Bound.MEMORY)
    return Profile("t", case_id, "ncu", roofline=roof)


def test_input_bytes_of_declared_cases_only():
    task = Task("t", "", ("f",), (_case("a", 1000), Case("s", CaseRole.PERFORMANCE,
                                                             PerfScriptCall("f", "perf", 0))), "test")
    assert input_bytes(task, "a") == 4000
    assert input_bytes(task, "s") is None and input_bytes(task, "nope") is None


def test_near_on_the_small_case_but_far_on_the_case_that_carries_the_time():
    # profiled: 1 ms, 90% of peak. The big case has 100x the bytes but takes 1000x the time:
    # 9% of peak there, and it carries nearly all of the time
    task = Task("t", "", ("f",), (_case("small", 10_000), _case("big", 1_000_000)), "test")
    call = roofline_call(_profile("small", 0.9, 1000.0), task, _base({"small": 1.0, "big": 1000.0}),
                         ("big", "small"))
    assert not call.near and call.fraction < 0.2 and call.covered == 1.0


def test_near_where_the_time_is():
    task = Task("t", "", ("f",), (_case("small", 10_000), _case("big", 1_000_000)), "test")
    call = roofline_call(_profile("small", 0.85, 1000.0), task, _base({"small": 1.0, "big": 100.0}),
                         ("big", "small"))
    assert call.near and call.fraction >= NEAR_FRACTION


def test_cases_of_unknown_size_carrying_the_time_are_not_judged_by_one_small_case():
    task = Task("t", "", ("f",), (_case("small", 10_000),
                                  Case("script", CaseRole.PERFORMANCE, PerfScriptCall("f", "perf", 3))), "test")
    call = roofline_call(_profile("small", 0.95, 1000.0), task,
                         _base({"small": 1.0, "script": 50.0}), ("script", "small"))
    assert not call.near and call.fraction is None and 0 < call.covered < 0.5
    # the profiled case carrying most of the time decides alone
    call = roofline_call(_profile("small", 0.95, 1000.0), task,
                         _base({"small": 10.0, "script": 1.0}), ("script", "small"))
    assert call.near and call.covered > 0.5


def test_no_roofline_measured():
    task = Task("t", "", ("f",), (_case("a", 10),), "test")
    assert not roofline_call(None, task, _base({"a": 1.0}), ("a",)).near
    assert roofline_call(Profile("t", "a", "static-only"), task, _base({"a": 1.0}), ("a",)).covered == 0


def _stop_rules(profile, task, base, ids, near=True):
    from types import SimpleNamespace

    from tritonforge.model import Diagnosis
    from tritonforge.search.loop import Optimizer
    from tritonforge.search.state import SearchState
    from tritonforge.model import Candidate

    opt = Optimizer.__new__(Optimizer)
    opt.interpreted = False
    opt.stages = SimpleNamespace(profile=profile)
    original = Candidate("x = 0\n", "original")
    state = SearchState(task, original, original, ids, (ids,),
                        Diagnosis(Bound.MEMORY, "near the roofline", near_roofline=near),
                        patience=2)
    return opt._stop_rules(state, base)


def test_the_loop_stops_early_only_where_the_time_is_near_the_roofline_and_tries_configs_first():
    task = Task("t", "", ("f",), (_case("small", 10_000), _case("big", 1_000_000)), "test")
    near = _stop_rules(_profile("small", 0.85, 1000.0), task, _base({"small": 1.0, "big": 100.0}),
                       ("big", "small"))
    assert near.patience == 1 and near.config_search
    assert "configuration search" in near.notes[-1]
    far = _stop_rules(_profile("small", 0.9, 1000.0), task, _base({"small": 1.0, "big": 1000.0}),
                      ("big", "small"))
    assert far.patience == 2 and not far.config_search and "goes on" in far.notes[-1]
    plain = _stop_rules(_profile("small", 0.9, 1000.0), task, _base({"small": 1.0, "big": 1.0}),
                        ("big", "small"), near=False)
    assert plain.patience == 2 and not plain.config_search and plain.notes == ()
