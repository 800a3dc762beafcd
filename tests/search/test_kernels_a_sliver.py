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
