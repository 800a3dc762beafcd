"""A resumed run reuses the stored profile of its incumbent instead of profiling again."""

from types import SimpleNamespace

import tritonforge.search.stages as session   # where the stages look profile_task up
from tritonforge.config import Settings
from tritonforge.model import Bound, Candidate, Diagnosis, Profile, Task
from tritonforge.search.stages import RoundStages
from tritonforge.store import RunStore

ORIGINAL = Candidate("x = 1\n", "original")


def _optimizer(tmp_path, store, interpreted=True):
    opt = RoundStages.__new__(RoundStages)
    opt.task = Task("t", ORIGINAL.source, ("f",), (), "test")
    opt.settings = Settings(profile="auto", run_dir=str(tmp_path))
    opt.store = store
    opt.interpreted = interpreted
    opt.progress = lambda s: None
    return opt


def _profile(source, case_id):
    return Profile("t", case_id, source, diagnosis=Diagnosis(Bound.MEMORY, "stored bottleneck"))


def test_a_stored_profile_of_the_same_kind_and_case_is_reused(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(session, "profile_task", lambda *a, **k: calls.append(a) or None)
    with RunStore(tmp_path / "store.sqlite") as store:
        store.put_profile("t", ORIGINAL.hash, _profile("ncu", "perf-03"))
        opt = _optimizer(tmp_path, store, interpreted=False)
        notes = []
        d = opt._diagnose(ORIGINAL, "perf-03", notes)
        assert d.bottleneck == "stored bottleneck" and calls == []
        assert "(ncu (stored))" in notes[-1]


def test_another_case_or_kind_is_profiled_again(tmp_path, monkeypatch):
    fresh = SimpleNamespace(profile=_profile("ncu", "perf-05"))
    calls = []
    monkeypatch.setattr(session, "profile_task", lambda *a, **k: calls.append(a) or fresh)
    with RunStore(tmp_path / "store.sqlite") as store:
        store.put_profile("t", ORIGINAL.hash, _profile("ncu", "perf-03"))
        store.put_profile("t", "other", _profile("ncu", "perf-05"))
        opt = _optimizer(tmp_path, store, interpreted=False)
        assert opt._diagnose(ORIGINAL, "perf-05", []).bottleneck == "stored bottleneck"
        assert len(calls) == 1                            # another case: profiled again
        store.put_profile("t", ORIGINAL.hash, _profile("timing-only", "perf-05"))
        opt._diagnose(ORIGINAL, "perf-05", [])
        assert len(calls) == 2                            # ncu asked for, only a timing one stored


def test_a_fresh_profile_says_where_its_time_went_in_the_records_notes(tmp_path, monkeypatch):
    steps = (("setup", 0.1), ("ncu", 14.0), ("static compile", 3.2))
    said = "profile seconds: setup 0.1, ncu 14.0, static compile 3.2"
    fresh = SimpleNamespace(profile=Profile("t", "perf-05", "ncu", notes=("case perf-05",),
                                            step_s=steps))
    monkeypatch.setattr(session, "profile_task", lambda *a, **k: fresh)
    with RunStore(tmp_path / "store.sqlite") as store:
        opt = _optimizer(tmp_path, store, interpreted=False)
        notes = []
        opt._diagnose(ORIGINAL, "perf-05", notes)
        assert said in notes                               # a stored one spent nothing: no note


def test_the_time_outside_the_kernels_is_told_with_its_numbers(tmp_path):
    from tritonforge.model import Hint

    ev = "the Triton kernels run 2.8 us of the case's 581.0 us (0%): ..."
    d = Diagnosis(Bound.LATENCY, "time outside the Triton kernels",
                  hints=(Hint("outside_kernels", ev, (), 0.9), Hint("more_programs", "x", (), 0.5)))
    with RunStore(tmp_path / "store.sqlite") as store:
        store.put_profile("t", ORIGINAL.hash, Profile("t", "perf-03", "ncu", diagnosis=d))
        notes = []
        _optimizer(tmp_path, store, interpreted=False)._diagnose(ORIGINAL, "perf-03", notes)
    assert notes[-1] == ev and "hints: outside_kernels, more_programs" in notes[-2]
