"""Profiling and diagnosis: static compile stats, Nsight Compute runs, roofline, bottleneck hints.

Works without ncu (static stats + timing), saying so in ``Profile.source`` and ``Profile.notes``.
Nothing here imports torch, triton, libcst, openai or pydantic at import time.
"""

from .build import build_profile
from .diagnose import Facts, Finding, Thresholds, diagnose
from .limits import DEVICE_LIMITS, DeviceLimits, check_limits, estimate_occupancy, limits_for
from .metrics import METRICS, MetricSpec, ncu_metric_names, parse_raw_csv, stall_shares
from .ncu import (
    NcuRequest,
    NcuResult,
    NcuStatus,
    build_ncu_command,
    find_ncu,
    kernel_regex,
    profile_with_ncu,
    read_ncu_report,
    run_ncu,
)
from .render import hints_for_prompt, render_profile
from .roofline import Peaks, measure_peaks, place
from .rules import RULES
from .static import (
    CompileRequest,
    KernelSignature,
    TensorArg,
    compile_many,
    compile_stats,
    compile_stats_from_launch,
    signature_from_args,
)

__all__ = [
    "CompileRequest", "DEVICE_LIMITS", "DeviceLimits", "Facts", "Finding", "KernelSignature",
    "METRICS", "MetricSpec", "NcuRequest", "NcuResult", "NcuStatus", "Peaks", "RULES", "TensorArg",
    "Thresholds", "build_ncu_command", "build_profile", "check_limits", "compile_many",
    "compile_stats", "compile_stats_from_launch", "diagnose", "estimate_occupancy", "find_ncu",
    "hints_for_prompt", "kernel_regex", "limits_for", "measure_peaks", "ncu_metric_names",
    "parse_raw_csv", "place", "profile_with_ncu", "read_ncu_report", "render_profile", "run_ncu",
    "signature_from_args", "stall_shares",
]
