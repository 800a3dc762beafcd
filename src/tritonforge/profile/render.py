"""Plain-text rendering of a Profile (no rich: the library stays dependency-free; the CLI may
style it). Also ``hints_for_prompt``: the diagnosis as compact text for an LLM prompt, built from
the same Hint data the rule engine uses.
"""

from __future__ import annotations

from ..model import CompileStats, Diagnosis, KernelProfile, Profile, Roofline
from .metrics import BY_SHORT

# The metrics shown per kernel, in this order (the rest are in the JSON report).
SUMMARY_METRICS = (
    "duration_us", "sm_throughput_pct", "mem_throughput_pct", "dram_throughput_pct", "dram_bw_gbs",
    "l1_hit_rate_pct", "l2_hit_rate_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct",
    "registers_per_thread", "block_size", "grid_size", "waves_per_sm", "tensor_pipe_pct",
    "fma_pipe_pct", "issue_active_pct",
)


def _fmt(value: float) -> str:
    if value == int(value) and abs(value) < 1e12:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def render_kernel(kp: KernelProfile, top_stalls: int = 3) -> list[str]:
    lines = [f"  kernel {kp.kernel}" + (f" (launch {kp.launch_id})" if kp.launch_id is not None else "")]
    for name in SUMMARY_METRICS:
        v = kp.get(name)
        if v is not None:
            spec = BY_SHORT[name]
            lines.append(f"    {name:<28} {_fmt(v):>14} {spec.unit}")
    stalls = sorted(((m.name, m.value) for m in kp.metrics if m.name.startswith("stall_")),
                    key=lambda x: -x[1])[:top_stalls]
    if stalls:
        lines.append("    top stalls: " + ", ".join(f"{n[6:]} {v:.2f}" for n, v in stalls))
    return lines


def render_stats(s: CompileStats) -> list[str]:
    if s.error:
        return [f"  {s.kernel} [{s.target}]: compile failed: {s.error.splitlines()[0][:160]}"]
    consts = ", ".join(f"{k}={v}" for k, v in s.constexprs)
    mma = s.mma_kind or ("none (dot without tensor cores)" if s.has_dot else "none")
    lines = [f"  {s.kernel} [{s.target}] {consts} num_warps={s.num_warps} num_stages={s.num_stages}",
             f"    registers {s.registers}, spills {s.spills} B, shared {s.shared_bytes} B, "
             f"widest global access {s.vector_width_bytes} B, tensor cores: {mma}"]
    lines += [f"    ! {w}" for w in s.warnings]
    return lines


def render_roofline(r: Roofline) -> list[str]:
    ai = r.flops / r.bytes_moved if r.bytes_moved else float("inf")
    return [f"  {r.bytes_moved / 1e6:,.1f} MB, {r.flops / 1e9:,.2f} GFLOP in {r.time_us:,.1f} us "
            f"(intensity {ai:.2f} FLOP/B)",
            f"  {r.achieved_bw_gbs:,.0f} of {r.peak_bw_gbs:,.0f} GB/s, {r.achieved_tflops:,.2f} of "
            f"{r.peak_tflops:,.1f} TFLOP/s: {r.fraction_of_peak:.0%} of peak, {r.bound.value}-bound"]


def render_diagnosis(d: Diagnosis) -> list[str]:
    lines = [f"  bound: {d.bound.value}; bottleneck: {d.bottleneck}"
             + (" (near the roofline: stop)" if d.near_roofline else "")]
    lines += [f"  - {e}" for e in d.evidence]
    for h in d.hints:
        knobs = f" [{', '.join(h.knobs)}]" if h.knobs else ""
        lines.append(f"  > {h.kind} (priority {h.priority:.2f}){knobs}")
    return lines


def render_profile(p: Profile) -> str:
    """A Profile as plain text, sections in the order a reader needs them."""
    case = f", case {p.case_id}" if p.case_id else ""
    lines = [f"profile of {p.task}{case} (source: {p.source})"]
    if p.diagnosis is not None:
        lines.append("diagnosis:")
        lines += render_diagnosis(p.diagnosis)
    if p.roofline is not None:
        lines.append("roofline:")
        lines += render_roofline(p.roofline)
    if p.kernels:
        lines.append("kernels (Nsight Compute):")
        for kp in p.kernels:
            lines += render_kernel(kp)
    if p.compile_stats:
        lines.append("static stats:")
        for s in p.compile_stats:
            lines += render_stats(s)
    if p.notes:
        lines.append("notes:")
        lines += [f"  * {n}" for n in p.notes]
    return "\n".join(lines)


def hints_for_prompt(d: Diagnosis, max_hints: int = 5) -> str:
    """The diagnosis as a few lines for an LLM prompt: bound, bottleneck, evidence, hints."""
    lines = [f"Bound: {d.bound.value}. Bottleneck: {d.bottleneck}."]
    if d.near_roofline:
        lines.append("The kernel is already near the roofline; large gains are unlikely.")
    lines += [f"Evidence: {e}" for e in d.evidence]
    for h in d.hints[:max_hints]:
        knobs = f" (knobs: {', '.join(h.knobs)})" if h.knobs else ""
        lines.append(f"Hint [{h.kind}]{knobs}: {h.evidence}")
    return "\n".join(lines)
