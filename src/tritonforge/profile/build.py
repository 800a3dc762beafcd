"""Assemble a Profile from whatever was measured, saying what it rests on.

``build_profile`` takes the ncu outcome (or none), the static stats, the timing and the roofline,
runs the diagnosis and records in ``Profile.source`` and ``Profile.notes`` where the numbers came
from: "ncu" when Nsight Compute measured the kernels; "timing-only" or "static-only" when it could
not (missing, no permission, timeout, ...), with the reason and the fix in the notes.
"""

from __future__ import annotations

from typing import Sequence

from ..model import CompileStats, KernelProfile, Profile, Roofline
from .diagnose import Thresholds, diagnose
from .ncu import NcuResult, NcuStatus


def build_profile(
    task: str,
    case_id: str | None,
    *,
    ncu: NcuResult | None = None,
    kernels: Sequence[KernelProfile] | None = None,
    stats: Sequence[CompileStats] = (),
    roofline: Roofline | None = None,
    time_us: float | None = None,
    launches_per_call: int | None = None,
    recorded: bool = False,
    thresholds: Thresholds | None = None,
) -> Profile:
    """Diagnose and wrap. ``kernels`` overrides ``ncu.kernels`` (e.g. from a saved report)."""
    notes: list[str] = []
    measured = tuple(kernels) if kernels is not None else (ncu.kernels if ncu is not None and ncu.ok else ())
    if measured:
        source = "recorded" if recorded else "ncu"
    else:
        source = "timing-only" if time_us is not None else "static-only"
        if ncu is None:
            notes.append("Nsight Compute was not run: diagnosis from static stats and timing")
        elif ncu.status is not NcuStatus.OK:
            notes.append(f"Nsight Compute unavailable ({ncu.status.value}): {ncu.message}")
            notes.append("fell back to timing plus static stats")
    for s in stats:
        if s.error:
            notes.append(f"{s.kernel}: compile failed for {s.target}: {s.error.splitlines()[0][:200]}")
        for w in s.warnings:
            notes.append(f"{s.kernel}: {w}")
    diagnosis = diagnose(measured, list(stats), roofline, launches_per_call, time_us,
                         thresholds=thresholds)
    return Profile(task=task, case_id=case_id, source=source, kernels=measured,
                   compile_stats=tuple(stats), roofline=roofline, diagnosis=diagnosis,
                   notes=tuple(notes))
