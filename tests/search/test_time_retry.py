"""The search's timing request: a candidate that kills the worker does not leave the others
unjudged (search.stages.RoundStages._time)."""

from __future__ import annotations

from types import SimpleNamespace

from tritonforge.config import Settings
from tritonforge.model import Candidate, DeviceInfo, Evaluation, Failure, Status, VariantResult
from tritonforge.search.stages import RoundStages

DEVICE = DeviceInfo("fake GPU", False)


class _Timer:
    """Kills the worker whenever a variant in ``killers`` is in the request (the request's
    other variants come back skipped, as runtime.worker_client reports a dead worker)."""

    device = "cuda"

    def __init__(self, killers):
        self.killers, self.requests = set(killers), []

    def evaluate(self, task, variants, **kwargs):
        names = [v.name for v in variants]
        self.requests.append(names)
        culprit = next((n for n in names if n in self.killers), None)
        results = []
        for v in variants:
            if culprit is None:
                results.append(VariantResult(v.name, v.hash, Status.OK))
            elif v.name == culprit:
                results.append(VariantResult(v.name, v.hash, Status.OOM,
                                             Failure(Status.OOM, "host memory over 16.0 GiB")))
            else:
                results.append(VariantResult(v.name, v.hash, Status.SKIPPED,
                                             Failure(Status.SKIPPED, f"not evaluated: {culprit} oom first")))
        return Evaluation(task.name, tuple(results), DEVICE, ("killed",) if culprit else ())


def _optimizer(timer, said):
    opt = RoundStages.__new__(RoundStages)
    opt.timer, opt.progress = timer, said.append
    return opt


def _cands(n):
    return [Candidate(f"source {i}", "rules:test", description=f"move {i}") for i in range(n)]


def test_the_others_are_timed_again_without_the_candidate_that_killed_the_worker():
    timer, said = _Timer({"c1"}), []
    task = SimpleNamespace(name="t")
    got = _optimizer(timer, said)._time(task, Candidate("orig", "original"), _cands(3), ("perf-00",))
    assert timer.requests == [["incumbent", "c0", "c1", "c2"], ["incumbent", "c0", "c2"]]
    assert [r.status for r in got.results] == [Status.OK, Status.OK, Status.OOM, Status.OK]
    assert [r.variant for r in got.results] == ["incumbent", "c0", "c1", "c2"]
    assert any("without c1" in s for s in said)


def test_retries_are_bounded_and_stop_when_the_incumbent_is_the_one_that_kills():
    timer = _Timer({"c0", "c1", "c2"})
    got = _optimizer(timer, [])._time(SimpleNamespace(name="t"), Candidate("o", "original"),
                                      _cands(4), ("perf-00",))
    assert len(timer.requests) == 3                      # the first request and two retries
    assert got.result("c3").status is Status.SKIPPED     # still unjudged: never a false OK
    timer = _Timer({"incumbent"})
    got = _optimizer(timer, [])._time(SimpleNamespace(name="t"), Candidate("o", "original"),
                                      _cands(2), ("perf-00",))
    assert len(timer.requests) == 1 and got.result("c0").status is Status.SKIPPED


def test_a_request_nobody_killed_is_returned_as_it_came():
    timer = _Timer(set())
    got = _optimizer(timer, [])._time(SimpleNamespace(name="t"), Candidate("o", "original"),
                                      _cands(2), ("perf-00",))
    assert len(timer.requests) == 1 and all(r.status is Status.OK for r in got.results)
