"""A search case where the incumbent itself failed while timed judges no candidate; a case a
candidate alone misses still blocks it (search.blame.incumbent_timed_cases)."""

from tritonforge.model import Failure, Status, Timing, TimingMethod, VariantResult
from tritonforge.search.arbiter import judge
from tritonforge.search.blame import incumbent_timed_cases

IDS = ("perf-02", "perf-13", "perf-16", "perf-17")


def _timed(name, ids, ms, status=Status.OK, failures=()):
    timings = tuple(Timing(cid, name, TimingMethod.CUDA_EVENTS, (ms,) * 20) for cid in ids)
    return VariantResult(name, name, status, timings=timings, case_failures=tuple(failures))


def _crash(cid):
    return Failure(Status.CRASH, "illegal memory access", case_id=cid)


def test_a_case_the_incumbent_crashed_on_and_the_untimed_ones_after_it_are_left_out():
    """attention_kernel_aligned (H100, 2026-11-25): the original crashed on perf-16 while timed,
    so no variant was timed on perf-16 or perf-17; every candidate was "not judged on a part"."""
    inc = _timed("incumbent", IDS[:2], 2.0, Status.CRASH, [_crash("perf-16")])
    judged, lost = incumbent_timed_cases(inc, IDS)
    assert judged == ("perf-02", "perf-13")
    assert lost == {"perf-16"}          # perf-17 was not reached: it stays for later rounds
    cand = _timed("c0", IDS[:2], 1.0)
    assert judge(inc, cand, judged, interpreted=False).accepted
    assert not judge(inc, cand, IDS, interpreted=False).accepted      # the old verdict


def test_a_candidate_missing_a_case_the_incumbent_was_timed_on_is_still_rejected():
    inc = _timed("incumbent", IDS, 2.0)
    judged, lost = incumbent_timed_cases(inc, IDS)
    assert judged == IDS and lost == set()
    broke_off = _timed("c0", IDS[:3], 1.0, Status.CRASH, [_crash("perf-17")])
    decision = judge(inc, broke_off, judged, interpreted=False)
    assert not decision.accepted
    assert "not correct" in decision.reason or "not judged on a part" in decision.reason


def test_an_incumbent_with_no_timing_judges_nothing():
    inc = VariantResult("incumbent", "i", Status.CRASH, Failure(Status.CRASH, "boom", case_id="perf-02"))
    judged, lost = incumbent_timed_cases(inc, IDS)
    assert judged == () and lost == {"perf-02"}
    assert not judge(inc, _timed("c0", IDS, 1.0), judged, interpreted=False).accepted
