"""What report.html plots beyond ``OptimizeResult``, read from the run store: per-case confidence
bounds of the final check, the search's decisions round by round, and the roofline positions.

Runs in the main process after the search (nothing is timed here).
"""

from __future__ import annotations

import logging
import math
import random
import statistics
from dataclasses import dataclass

from ..model import Decision, Roofline, TimingMethod

log = logging.getLogger(__name__)

BOOTSTRAP_RESAMPLES = 400
CONFIDENCE = 0.95


@dataclass(frozen=True)
class CaseBound:
    """The final check's speedup on one case (original median / accepted median) and its
    bootstrap confidence interval over the timing samples."""

    case_id: str
    speedup: float
    low: float
    high: float


@dataclass(frozen=True)
class ReportExtras:
    case_bounds: tuple[CaseBound, ...] = ()
    decisions: tuple[tuple[int, Decision], ...] = ()     # (round, decision), in the order made
    rooflines: tuple[tuple[str, Roofline], ...] = ()     # (label, position), original first
    roofline_case: str | None = None


def median_ratio_bounds(original: tuple[float, ...], best: tuple[float, ...],
                        seed: int = 0) -> tuple[float, float, float]:
    """(ratio, low, high) of median(original) / median(best), percentile bootstrap."""
    ratio = statistics.median(original) / statistics.median(best)
    rng = random.Random(seed)
    draws = sorted(statistics.median(rng.choices(original, k=len(original)))
                   / statistics.median(rng.choices(best, k=len(best)))
                   for _ in range(BOOTSTRAP_RESAMPLES))
    tail = (1 - CONFIDENCE) / 2
    return ratio, draws[int(tail * len(draws))], draws[min(int((1 - tail) * len(draws)),
                                                            len(draws) - 1)]


def _case_bounds(store, task: str) -> tuple[CaseBound, ...]:
    finals = list(store.evaluations(task, purpose="final"))
    if not finals:
        return ()
    evaluation = finals[-1][1]
    by_variant = {r.variant: r for r in evaluation.results}
    orig, best = by_variant.get("original"), by_variant.get("best")
    if orig is None or best is None:
        return ()
    out = []
    for t in best.timings:
        o = orig.timing(t.case_id)
        if t.method is TimingMethod.INTERPRETER:
            continue      # interpreter times say nothing about speed
        if o is None or not o.samples_ms or not t.samples_ms or min(t.samples_ms) <= 0:
            continue
        ratio, low, high = median_ratio_bounds(o.samples_ms, t.samples_ms)
        out.append(CaseBound(t.case_id, ratio, low, high))
    return tuple(out)


def _rooflines(store, result) -> tuple[tuple[tuple[str, Roofline], ...], str | None]:
    """The original's measured position; the accepted kernel's at the same case: the same bytes
    and FLOPs (it computes the same thing; the verifier says so) over its final-check time."""
    profile = store.latest_profile(result.task, result.original.hash)
    if profile is None or profile.roofline is None:
        return (), None
    roof = profile.roofline
    points: list[tuple[str, Roofline]] = [("original", roof)]
    final = result.final
    if final is not None and final.accepted and result.best.hash != result.original.hash:
        ratio = dict(final.per_case).get(profile.case_id)
        if ratio and math.isfinite(ratio) and ratio > 0 and roof.time_us > 0:
            t = roof.time_us / ratio
            bw = roof.bytes_moved / (t * 1e-6) / 1e9
            tflops = roof.flops / (t * 1e-6) / 1e12
            frac = max(bw / roof.peak_bw_gbs if roof.peak_bw_gbs else 0.0,
                       tflops / roof.peak_tflops if roof.peak_tflops else 0.0)
            points.append(("accepted", Roofline(roof.bytes_moved, roof.flops, t, bw, tflops,
                                                roof.peak_bw_gbs, roof.peak_tflops, frac,
                                                roof.bound)))
    return tuple(points), profile.case_id


def gather_extras(store, result) -> ReportExtras:
    """Everything report.html needs from ``store`` about ``result``'s run; empty parts where the
    store holds nothing (CPU interpreter: no timing bounds, no roofline)."""
    try:
        known = {h.candidate for h in result.history}
        decisions = tuple((r, d) for r, d in store.decisions(result.task) if d.candidate in known)
        rooflines, case = _rooflines(store, result)
        bounds = () if result.best.hash == result.original.hash else _case_bounds(store, result.task)
        return ReportExtras(bounds, decisions, rooflines, case)
    except Exception as exc:      # a report must never cost the run its result
        log.warning("report extras not gathered: %s", exc)
        return ReportExtras()
