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


def test_the_search_times_the_longest_cases_and_small_ones_too():
    from tritonforge.search.loop import representative_cases

    times = {f"perf-{i:02d}": ms for i, ms in enumerate(
        [0.005, 0.0048, 0.0043, 0.0119, 0.0204, 0.0362, 0.068, 0.1298, 0.2549, 0.5037])}
    ids = representative_cases(None, _base(times))
    # the two longest (they dominate the sum), the middle of the range on a log scale, the quickest
    assert ids == ("perf-09", "perf-08", "perf-05", "perf-02")
    assert representative_cases(None, _base({"a": 1.0, "b": 2.0})) == ("b", "a")
    assert representative_cases(None, _base({"a": 1.0, "b": 2.0, "c": 0.1})) == ("b", "a", "c")
