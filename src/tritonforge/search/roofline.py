"""The "near the roofline" stop, judged on the cases that carry the original's time (search side).

Nsight Compute profiles one case, the one nearest a millisecond (``search.cases.profile_case``);
the speedup is the sum over the performance cases, dominated by the longest. A roofline fraction
measured on a small case says little about a case 30 times longer, so the stop takes the
time-weighted roofline fraction of the timed search cases: the profiled case's measured fraction
for itself, and for each other case whose inputs are declared (``SpecCall``), the same bytes and
flops scaled by its input bytes over the profiled case's, divided by its own baseline time. Cases
of unknown size (perf scripts) are not guessed: when the cases with a fraction carry under half the
time, the roofline does not stop the search.

Near the roofline the search still runs one round of configuration search (``num_warps``,
``num_stages``, block sizes; ``ProposalContext.config_search_only``): on the H100 a cross-entropy
kernel diagnosed near the roofline ended with "no new candidates", and a num_warps/num_stages
change alone gave it 1.095x.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Profile, SpecCall, Task, TensorSpec, VariantResult

NEAR_FRACTION = 0.8        # profile.diagnose.Thresholds.near_roofline
MIN_COVERED = 0.5          # of the timed cases' time, measured or scaled

_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
             "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


@dataclass(frozen=True)
class RooflineCall:
    """``near``: the cases that carry the time run near the device's roofline. ``fraction``: their
    time-weighted fraction of peak (None when too little of the time has one); ``covered``: the
    share of the timed cases' time that the fraction rests on."""
    near: bool
    fraction: float | None
    covered: float
    note: str


def input_bytes(task: Task, case_id: str) -> int | None:
    """Bytes of a case's declared tensor inputs; None for a case without declared inputs."""
    case = next((c for c in task.cases if c.id == case_id), None)
    if case is None or not isinstance(case.recipe, SpecCall):
        return None

    def size(value: object) -> int:
        if isinstance(value, TensorSpec):
            n = 1
            for d in value.shape:
                n *= d
            return n * _ITEMSIZE.get(value.dtype, 4)
        if isinstance(value, tuple):
            return sum(size(v) for v in value)
        return 0

    total = size(case.recipe.args) + size(tuple(v for _, v in case.recipe.kwargs))
    return total or None


def roofline_call(profile: Profile | None, task: Task, baseline: VariantResult,
                  case_ids: tuple[str, ...]) -> RooflineCall:
    """Whether ``case_ids`` (the search's timed cases) run near the roofline, time-weighted."""
    roof = profile.roofline if profile is not None else None
    if roof is None or profile.case_id is None or not roof.fraction_of_peak:
        return RooflineCall(False, None, 0.0, "no measured roofline")
    times = {t.case_id: t.median_ms for t in baseline.timings if t.median_ms}
    total = sum(times.get(cid, 0.0) for cid in case_ids)
    if total <= 0:
        return RooflineCall(False, None, 0.0, "no timed case")
    fractions: dict[str, float] = {}
    base_bytes = input_bytes(task, profile.case_id)
    for cid in case_ids:
        if cid == profile.case_id:
            fractions[cid] = roof.fraction_of_peak
        elif cid in times and base_bytes and roof.time_us > 0:
            other = input_bytes(task, cid)
            if other:
                # the same work per input byte, at this case's own time
                scaled = roof.fraction_of_peak * (other / base_bytes) * (roof.time_us / (times[cid] * 1e3))
                fractions[cid] = min(scaled, 1.0)
    covered = sum(times.get(cid, 0.0) for cid in fractions) / total
    if covered < MIN_COVERED:
        return RooflineCall(False, None, covered,
                            f"the roofline was measured on case {profile.case_id}, "
                            f"{covered:.0%} of the timed cases' time: not judged on the rest")
    weight = sum(times.get(cid, 0.0) for cid in fractions)
    fraction = sum(f * times.get(cid, 0.0) for cid, f in fractions.items()) / weight
    near = fraction >= NEAR_FRACTION
    return RooflineCall(near, fraction, covered,
                        f"{fraction:.0%} of peak, time-weighted over {len(fractions)} case(s) "
                        f"carrying {covered:.0%} of the timed cases' time")
