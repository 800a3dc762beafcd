"""Which cases the loop searches, verifies and profiles on, from the original's timings."""

from tritonforge.model import Status, Timing, TimingMethod, VariantResult
from tritonforge.search.loop import profile_case


def _base(times):
    return VariantResult("original", "h", Status.OK, timings=tuple(
        Timing(cid, "original", TimingMethod.CUDA_EVENTS, (ms,)) for cid, ms in times.items()))


def test_the_profiled_case_is_the_one_nearest_a_millisecond():
    base = _base({"big": 350.0, "mid": 1.4, "small": 0.02})
    assert profile_case(("big", "mid", "small"), base) == "mid"
    assert profile_case(("big", "small"), base) == "small"      # 0.02 ms is nearer (log scale)
    assert profile_case(("big",), base) == "big"


def test_without_timings_the_first_search_case_is_profiled():
    assert profile_case(("a", "b"), _base({})) == "a"
    assert profile_case((), _base({})) is None
