"""Diagnosis: from metrics, static stats, roofline and timing to a bound, a bottleneck and hints.

The rules live in ``profile.rules``: each is a small function ``rule(facts) -> Finding | None`` that
looks at one pattern (tiny programs, register-limited occupancy, an idle tensor pipe, ...) and
returns the evidence with numbers and the hints it implies. ``diagnose`` gathers the facts, runs
every rule, and orders what fired: the bottleneck is the finding with the highest-priority hint.
Hints are data (``model.Hint``) so that the rule engine and an LLM prompt consume the same thing.

It works from whatever is known: Nsight Compute metrics when there are some, else static stats and
timing alone, and the first line of the evidence says which.
"""

from __future__ import annotations

import logging
from typing import Sequence

from ..model import Bound, CompileStats, Diagnosis, Hint, KernelProfile, Roofline
from .facts import DramTraffic, Facts, Finding, Rule, Thresholds, gather_facts, kernel_share
from .limits import DeviceLimits
from .rules import RULES

__all__ = ["DramTraffic", "Facts", "Finding", "Rule", "Thresholds", "classify_bound", "diagnose",
           "gather_facts", "kernel_share"]

log = logging.getLogger(__name__)


def classify_bound(f: Facts) -> tuple[Bound, str]:
    """The bound, with the sentence that justifies it."""
    if f.roofline is not None and f.roofline.bound is not Bound.UNKNOWN:
        r = f.roofline
        return r.bound, (f"roofline: {r.achieved_bw_gbs:.0f} GB/s of {r.peak_bw_gbs:.0f}, "
                         f"{r.achieved_tflops:.2f} TFLOP/s of {r.peak_tflops:.1f}: "
                         f"{r.fraction_of_peak:.0%} of the achievable peak")
    mem = f.m("mem_throughput_pct")
    dram = f.m("dram_throughput_pct")
    sm = f.m("sm_throughput_pct")
    if mem is not None or sm is not None or dram is not None:
        eff = f.effective_dram()
        mem_sol = max(v for v in (mem, dram, f.m("l2_throughput_pct"),
                                  eff.pct if eff else None, 0.0) if v is not None)
        sm_sol = sm or 0.0
        line = f"speed of light: memory {mem_sol:.1f}%, compute {sm_sol:.1f}% of peak"
        if max(mem_sol, sm_sol) >= f.t.sol_bound_pct:
            return (Bound.MEMORY if mem_sol >= sm_sol else Bound.COMPUTE), line
        duration = f.m("duration_us")
        if duration is not None and duration < f.t.tiny_launch_us:
            return Bound.LAUNCH, line + f"; {duration:.1f} us per launch"
        return Bound.LATENCY, line + ": neither near its peak"
    if f.time_us is not None:
        per_launch = f.time_us / max(1, f.launches_per_call or 1)
        if per_launch < f.t.tiny_launch_us:
            return Bound.LAUNCH, f"{per_launch:.1f} us per launch"
    return Bound.UNKNOWN, "no metrics, roofline or timing to tell the bound"


def _basis(f: Facts) -> str:
    if f.has_metrics:
        share = f" ({f.share:.0%} of profiled time)" if f.share is not None else ""
        return (f"Nsight Compute metrics of {f.kernel}, {f.launches_profiled} launch(es){share}")
    parts = [p for p, ok in (("static stats", f.stats is not None),
                             ("timing", f.time_us is not None),
                             ("roofline", f.roofline is not None)) if ok]
    return "no Nsight Compute metrics: diagnosis from " + (" + ".join(parts) or "nothing")


def diagnose(kernels: Sequence[KernelProfile], stats: Sequence[CompileStats],
             roofline: Roofline | None, launches_per_call: int | None, time_us: float | None,
             *, thresholds: Thresholds | None = None, limits: DeviceLimits | None = None,
             rules: Sequence[Rule] | None = None) -> Diagnosis:
    """Run every rule on the facts and order what fired into a Diagnosis."""

    f = gather_facts(kernels, stats, roofline, launches_per_call, time_us,
                     thresholds=thresholds, limits=limits)
    findings: list[Finding] = []
    for rule in (RULES if rules is None else rules):
        try:
            found = rule(f)
        except Exception:  # noqa: BLE001 - one broken rule must not hide the others
            log.exception("diagnosis rule %s failed", getattr(rule, "__name__", rule))
            continue
        if found is not None:
            findings.append(found)
    findings.sort(key=lambda x: -x.priority)
    bound, bound_line = classify_bound(f)
    if bound is Bound.UNKNOWN:
        bound = next((x.bound for x in findings if x.bound is not None), Bound.UNKNOWN)
    evidence = [_basis(f), bound_line]
    for x in findings:
        evidence.extend(x.evidence)
    best: dict[str, Hint] = {}
    for x in findings:
        for h in x.hints:
            if h.kind not in best or h.priority > best[h.kind].priority:
                best[h.kind] = h
    hints = tuple(sorted(best.values(), key=lambda h: -h.priority))
    if findings:
        bottleneck = findings[0].bottleneck
    else:
        bottleneck = {Bound.MEMORY: "memory bandwidth", Bound.COMPUTE: "compute throughput",
                      Bound.LAUNCH: "launch overhead", Bound.LATENCY: "latency (no rule matched)"
                      }.get(bound, "unknown")
    return Diagnosis(bound=bound, bottleneck=bottleneck, evidence=tuple(evidence), hints=hints,
                     near_roofline=any(x.near_roofline for x in findings))
