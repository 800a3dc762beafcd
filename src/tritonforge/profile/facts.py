"""What the diagnosis rules look at and what they return: the facts gathered from a profile
(metrics of the dominant kernel, static stats, roofline, timing), the thresholds they compare
against, and a rule's ``Finding``. ``profile.rules`` (the rules) and ``profile.diagnose`` (which
runs them) both build on this module, so neither imports the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..model import Bound, CompileStats, Hint, KernelProfile, Profile, Roofline
from .limits import DeviceLimits, limits_for


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
