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
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..model import Bound, CompileStats, Diagnosis, Hint, KernelProfile, Profile, Roofline
from .limits import DeviceLimits, limits_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Thresholds:
    """The numbers the rules compare against (percentages are 0..100, shares 0..1)."""

    near_roofline: float = 0.8          # fraction of the achievable peak (roofline or DRAM)
    near_pipe_pct: float = 75.0         # tensor/FMA pipe utilization that counts as near the roof
    sol_bound_pct: float = 60.0         # SOL % above which a kernel is memory/compute-bound
    low_dram_pct: float = 40.0          # DRAM throughput under this is "low"
    long_scoreboard_share: float = 0.35 # of all stall cycles
    barrier_share: float = 0.3
    low_occupancy_pct: float = 50.0
    tiny_launch_us: float = 8.0         # per-launch time under which launch overhead dominates
    many_launches: int = 8              # launches per call that make fusion worth suggesting
    many_waves: float = 64.0
    short_wave_us: float = 3.0          # duration per wave under which programs are "tiny"
    tensor_idle_pct: float = 10.0
    fma_busy_pct: float = 40.0
    low_l2_hit_pct: float = 50.0
    coalescing_excess: float = 2.0      # sectors per request over the ideal for the access width
    wave_efficiency: float = 0.8        # waves / ceil(waves) under which the tail costs
    kernel_share: float = 0.5           # of the case's time in its Triton kernels, under which
    # the rest of the call (the wrapper's torch work, copies, host code) is named
    kernel_share_dominant: float = 0.25  # under which that is the bottleneck, ahead of the rest


@dataclass(frozen=True)
class Facts:
    """What the rules see: the dominant kernel's metrics, its static stats, timing and roofline."""

    kernel: str | None
    metrics: Mapping[str, float]                 # averaged over the dominant kernel's launches
    launches_profiled: int
    share: float | None                          # dominant kernel's fraction of profiled time
    stats: CompileStats | None
    all_stats: tuple[CompileStats, ...]
    roofline: Roofline | None
    launches_per_call: int | None
    time_us: float | None
    limits: DeviceLimits
    t: Thresholds = field(default_factory=Thresholds)
    kernels_us: float | None = None              # every profiled launch's duration, summed
    launches_seen: int = 0                       # profiled launches of every kernel

    def kernel_us_per_call(self) -> float | None:
        """The Triton kernels' time in one call: the profiled launches' durations, scaled to the
        launches one call makes where ncu saw more or fewer (its launch cap). None when unknown."""
        if not self.kernels_us or self.launches_seen <= 0:
            return None
        per_call = self.launches_per_call or self.launches_seen
        return self.kernels_us * per_call / self.launches_seen

    def m(self, name: str) -> float | None:
        return self.metrics.get(name)

    @property
    def has_metrics(self) -> bool:
        return bool(self.metrics)

    @property
    def spill_traffic(self) -> float:
        """Local-memory sectors moved (spills, local arrays); 0 when unknown."""
        return (self.m("local_ld_sectors") or 0.0) + (self.m("local_st_sectors") or 0.0)

    def effective_dram(self) -> "DramTraffic | None":
        """DRAM traffic with the stores that L2 still holds at kernel end counted as written.

        The L2 is write-back (60 MB on an H200): a kernel that writes less than that ends before
        most of its stores reach DRAM, so dram__bytes_write undercounts and the DRAM throughput
        of a streaming kernel looks low. Global store sectors give the bytes the kernel wrote.
        """
        read, write = self.m("dram_bytes_read"), self.m("dram_bytes_write")
        bw, pct, duration = self.m("dram_bw_gbs"), self.m("dram_throughput_pct"), self.m("duration_us")
        if None in (read, write, bw, pct, duration) or pct <= 0 or duration <= 0:
            return None
        stored = (self.m("global_st_sectors") or 0.0) * 32.0
        pending = max(0.0, stored - write)
        peak = bw / (pct / 100.0)
        eff_bw = (read + write + pending) / (duration * 1e-6) / 1e9
        return DramTraffic(read, write, pending, eff_bw, peak, 100.0 * eff_bw / peak)


@dataclass(frozen=True)
class DramTraffic:
    read_bytes: float
    write_bytes: float
    pending_write_bytes: float          # stored by the kernel, still in L2 when it ended
    bw_gbs: float
    peak_gbs: float                     # the hardware peak implied by ncu's own percentage
    pct: float

    def describe(self) -> str:
        pending = (f" ({self.pending_write_bytes / 1e6:,.1f} MB of the stores still in L2 at the "
                   "end)" if self.pending_write_bytes > 0.05 * (self.write_bytes + 1) else "")
        return (f"DRAM: {self.read_bytes / 1e6:,.1f} MB read + "
                f"{(self.write_bytes + self.pending_write_bytes) / 1e6:,.1f} MB written{pending} "
                f"= {self.bw_gbs:,.0f} GB/s, {self.pct:.0f}% of the {self.peak_gbs:,.0f} GB/s peak")


@dataclass(frozen=True)
class Finding:
    """What one rule concluded: a named bottleneck, the evidence with numbers, the hints."""

    bottleneck: str
    evidence: tuple[str, ...]
    hints: tuple[Hint, ...]
    bound: Bound | None = None
    near_roofline: bool = False

    @property
    def priority(self) -> float:
        return max((h.priority for h in self.hints), default=0.0)


Rule = Callable[[Facts], "Finding | None"]


def _average(profiles: Sequence[KernelProfile]) -> dict[str, float]:
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for kp in profiles:
        for m in kp.metrics:
            sums[m.name] = sums.get(m.name, 0.0) + m.value
            counts[m.name] = counts.get(m.name, 0) + 1
    return {k: sums[k] / counts[k] for k in sums}


def gather_facts(kernels: Sequence[KernelProfile], stats: Sequence[CompileStats],
                 roofline: Roofline | None, launches_per_call: int | None, time_us: float | None,
                 *, thresholds: Thresholds | None = None, limits: DeviceLimits | None = None) -> Facts:
    """Pick the dominant kernel (most profiled time) and collect what the rules need."""
    by_name: dict[str, list[KernelProfile]] = {}
    for kp in kernels:
        by_name.setdefault(kp.kernel, []).append(kp)
    total = {n: sum(k.duration_us or 0.0 for k in ks) for n, ks in by_name.items()}
    dominant = max(total, key=lambda n: (total[n], len(by_name[n]))) if by_name else None
    all_time = sum(total.values())
    share = (total[dominant] / all_time) if dominant is not None and all_time > 0 else None
    chosen = None
    if stats:
        named = [s for s in stats if s.kernel == dominant]
        chosen = named[0] if named else (stats[0] if dominant is None or len(stats) == 1 else None)
    if limits is None:
        arch = 90
        if chosen is not None and ":" in chosen.target:
            try:
                arch = int(chosen.target.split(":")[1])
            except ValueError:
                pass
        limits = limits_for(arch)
    return Facts(
        kernel=dominant if dominant is not None else (chosen.kernel if chosen else None),
        metrics=_average(by_name[dominant]) if dominant is not None else {},
        launches_profiled=len(by_name[dominant]) if dominant is not None else 0,
        share=share, stats=chosen, all_stats=tuple(stats), roofline=roofline,
        launches_per_call=launches_per_call, time_us=time_us, limits=limits,
        t=thresholds or Thresholds(),
        kernels_us=all_time if all(k.duration_us for k in kernels) else None,
        launches_seen=len(kernels),
    )


def kernel_share(profile: Profile, time_us: float | None = None) -> float | None:
    """The Triton kernels' share of a stored profile's case: their ncu durations over the case's
    timed time, the roofline's unless ``time_us`` gives another measurement of the same case
    (the search's own timing of it). None without both. A stored profile keeps no launch count,
    so the profiled launches count as one call's (``Facts.kernel_us_per_call``)."""
    if time_us is None:
        time_us = profile.roofline.time_us if profile.roofline is not None else None
    if not time_us or not profile.kernels:
        return None
    per_call = gather_facts(profile.kernels, profile.compile_stats, profile.roofline, None,
                            time_us).kernel_us_per_call()
    return None if per_call is None else per_call / time_us


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
    from .rules import RULES

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
