"""A case where the original itself crashes when run after itself cannot judge candidates."""

from types import SimpleNamespace

from tritonforge.model import Candidate, Failure, Status, VariantResult
from tritonforge.search.loop import Optimizer

ORIGINAL = Candidate("x = 1\n", "original")


def _result(status, case_id=None):
    failure = Failure(status, "illegal memory access", case_id=case_id) if status is not Status.OK else None
    return VariantResult("candidate", "h", status, failure=failure)


def _optimizer(original_crashes_on: set[str]):
    asked = []

    def evaluate(task, variants, *, purpose, case_ids, **kw):
        asked.append((purpose, case_ids, variants[1].source == ORIGINAL.source))
        status = Status.CRASH if case_ids[0] in original_crashes_on else Status.OK
        return SimpleNamespace(result=lambda name: _result(status, case_ids[0]))

    opt = Optimizer.__new__(Optimizer)
    opt.timer = SimpleNamespace(evaluate=evaluate)
    return opt, asked


def test_only_cases_the_original_also_crashes_on_are_found_unsafe():
    cands = [Candidate(f"x = {i}\n", "rules:t") for i in range(3)]
    verified = {cands[0].hash: _result(Status.CRASH, "perf-01"),
                cands[1].hash: _result(Status.CRASH, "perf-02"),
                cands[2].hash: _result(Status.MISMATCH)}
    opt, asked = _optimizer({"perf-01"})
    unsafe = opt._cases_the_original_crashes(None, ORIGINAL, cands, verified, ("t0", "perf-01", "perf-02"))
    assert unsafe == {"perf-01"}                       # perf-02's crash stays the candidate's
    assert sorted(a[1] for a in asked) == [("perf-01",), ("perf-02",)]
    assert all(purpose == "original-twice" and twin for purpose, _, twin in asked)


def test_nothing_is_checked_when_no_candidate_crashed():
    cands = [Candidate("x = 2\n", "rules:t")]
    opt, asked = _optimizer({"perf-01"})
    assert opt._cases_the_original_crashes(None, ORIGINAL, cands, {cands[0].hash: _result(Status.OK)},
                                           ("perf-01",)) == set()
    assert asked == []


def test_a_case_where_the_reference_broke_the_context_is_unsafe_without_another_run():
    """SKIPPED naming a case: the original crashed there as the reference, before the candidate
    was compared (fused_rotary_embedding, H100 session 5). A twin whose reference crashes counts
    as the original crashing too."""
    cands = [Candidate(f"x = {i}\n", "rules:t") for i in range(3)]
    verified = {cands[0].hash: _result(Status.SKIPPED, "perf-01"),
                cands[1].hash: _result(Status.SKIPPED, "perf-01"),
                cands[2].hash: _result(Status.CRASH, "perf-03")}
    opt, asked = _optimizer(set())
    twin_status = {"perf-03": Status.SKIPPED}

    def evaluate(task, variants, *, purpose, case_ids, **kw):
        asked.append((purpose, case_ids, True))
        return SimpleNamespace(result=lambda name: _result(twin_status.get(case_ids[0], Status.OK),
                                                           case_ids[0]))

    opt.timer = SimpleNamespace(evaluate=evaluate)
    unsafe = opt._cases_the_original_crashes(None, ORIGINAL, cands, verified, ("perf-01", "perf-03"))
    assert unsafe == {"perf-01", "perf-03"}
    assert [a[1] for a in asked] == [("perf-03",)]     # perf-01 needed no second run
