"""A search whose profiled case spends most of its time outside the Triton kernels gets one round
without gain, as near the roofline does (search.loop._kernels_a_sliver)."""

from tritonforge.model import KernelProfile, Metric
from tritonforge.profile.diagnose import diagnose
from tritonforge.search.loop import _kernels_a_sliver


def _diagnosis(kernel_us: float, case_us: float):
    kp = KernelProfile("k", (Metric("duration_us", kernel_us), Metric("dram_throughput_pct", 5.0),
                             Metric("sm_throughput_pct", 5.0)), duration_us=kernel_us)
    return diagnose([kp], [], None, 1, case_us)


def test_a_sliver_of_kernel_time_shortens_the_search():
    assert _kernels_a_sliver(_diagnosis(2.8, 581.0))        # matrix_reduction, H100
    assert _kernels_a_sliver(_diagnosis(49.0, 239.0))       # max_reduction


def test_kernels_that_are_most_of_the_case_keep_the_full_search():
    assert not _kernels_a_sliver(_diagnosis(300.0, 714.0))  # rope_embedding (1.14x, a success)
    assert not _kernels_a_sliver(_diagnosis(95.0, 100.0))
    assert not _kernels_a_sliver(None)


def _stored_profile(kernel_us: float, stored_case_us: float, case_id: str = "perf-06"):
    from tritonforge.model import Bound, Profile, Roofline

    kp = KernelProfile("k", (Metric("duration_us", kernel_us),), duration_us=kernel_us)
    rl = Roofline(1e6, 0.0, stored_case_us, 1.0, 0.0, 3000.0, 60.0, 0.01, Bound.LATENCY)
    return Profile("apply_penalty", case_id, "ncu", kernels=(kp,), roofline=rl)


def _incumbent(case_id: str, samples_ms: tuple[float, ...]):
    from tritonforge.model import Status, Timing, TimingMethod, VariantResult

    return VariantResult("incumbent", "h", Status.OK,
                         timings=(Timing(case_id, "incumbent", TimingMethod.CUDA_EVENTS, samples_ms),))


def test_an_outlier_stored_time_is_corrected_by_the_rounds_own_timing():
    from tritonforge.search.loop import SLIVER_RETIMED, _sliver_retimed

    # apply_penalty, H100, 2026-11-25: a 4.1 us kernel against a stored 46.7 us (an outlier)
    profile = _stored_profile(4.1, 46.7)
    note = _sliver_retimed(profile, _incumbent("perf-06", (0.0051, 0.0052, 0.0050)))
    assert note is not None and note.startswith(SLIVER_RETIMED)
    assert "5.1 us" in note and "46.7 us" in note and "80%" in note


def test_a_true_sliver_stays_cut_and_other_cases_do_not_count():
    from tritonforge.search.loop import _sliver_retimed

    profile = _stored_profile(2.8, 581.0, "perf-03")          # matrix_reduction: a real sliver
    assert _sliver_retimed(profile, _incumbent("perf-03", (0.57, 0.58, 0.59))) is None
    # a fast time on another case says nothing about the profiled one
    assert _sliver_retimed(profile, _incumbent("perf-00", (0.003,))) is None
    assert _sliver_retimed(None, _incumbent("perf-03", (0.003,))) is None


def test_held_back_does_not_blame_the_wrapper_once_the_share_was_retimed():
    from dataclasses import replace

    from tritonforge.bench.optimize import held_back
    from tritonforge.model import HistoryEntry, Status
    from tritonforge.search.loop import SLIVER_RETIMED, OptimizeResult

    history = (HistoryEntry("c1", "rules:x", "num_warps 8 -> 4", Status.OK, 0.97,
                            "0.970x, but the 95% lower bound 0.96x is within noise"),)
    notes = ("diagnosis (ncu): latency-bound, time outside the Triton kernels; hints: x",)
    base = OptimizeResult("t", None, None, None, 1, "no gain for 1 rounds", 1.0, 1, history,
                          (), notes)
    assert "outside" in held_back(base)
    assert "outside" not in held_back(replace(base, notes=notes + (SLIVER_RETIMED + "...",)))
