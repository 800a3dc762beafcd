"""The diagnosis rules: one small function per pattern, ``rule(facts) -> Finding | None``.

Each rule reads ``Facts`` (the dominant kernel's metrics by short name, its static stats, timing,
roofline) and, when its pattern holds, returns the evidence with the numbers that made it fire and
the hints it implies. A rule that lacks the data it needs returns None. Rules work from Nsight
Compute metrics where present and fall back to static stats where a static signal exists (spills,
register-limited occupancy, narrow accesses, a dot without tensor cores, tiny blocks).

Order in ``RULES`` does not matter: ``diagnose`` sorts findings by hint priority.
"""

from __future__ import annotations

import math
import re

from ..model import Bound, CompileStats, Hint
from .facts import Facts, Finding
from .limits import estimate_occupancy
from .metrics import stall_shares

_BLOCK_NAME = re.compile(r"^(BLOCK|TILE|[XYZR]BLOCK|BS|BM|BN|BK)", re.IGNORECASE)


def block_knobs(stats: CompileStats | None) -> tuple[str, ...]:
    """The constexpr names that size a program's tile (BLOCK_SIZE, BLOCK_M, XBLOCK, ...)."""
    if stats is None:
        return ()
    return tuple(name for name, value in stats.constexprs
                 if _BLOCK_NAME.match(name) and isinstance(value, int) and not isinstance(value, bool))


def _block_elements(stats: CompileStats) -> int | None:
    sizes = [int(v) for n, v in stats.constexprs if n in block_knobs(stats)]
    return math.prod(sizes) if sizes else None


def _describe(stats: CompileStats | None) -> str:
    if stats is None:
        return ""
    knobs = ", ".join(f"{n}={v}" for n, v in stats.constexprs if n in block_knobs(stats))
    return f" ({knobs + ', ' if knobs else ''}num_warps={stats.num_warps}, num_stages={stats.num_stages})"


def _launch_scale(f: Facts) -> bool:
    """A kernel of a few microseconds: what happens inside it matters less than launching it."""
    duration = f.m("duration_us")
    return duration is not None and duration < f.t.tiny_launch_us


def near_roofline(f: Facts) -> Finding | None:
    """Already near an achievable peak: stop optimizing this kernel.

    From ncu metrics alone: DRAM traffic (with pending stores, see Facts.effective_dram) near its
    peak, or the tensor/FMA pipe near full. Not claimed when the kernel spills (the traffic is
    partly its own overhead) or when a dot misses the tensor cores (the roof that matters is
    higher); ``tensor_cores`` and ``spills`` speak then.
    """
    s = f.stats
    if s is not None and s.has_dot and not s.uses_tensor_cores:
        return None
    # Spills make the kernel's own traffic: with the measured roofline too (int8_quantization,
    # H100, 2026-11-23: "87% of the roofline" while spilling 38 KB per thread, 283M local-memory
    # sectors, and its search was cut to one round of nothing)
    if f.spill_traffic > 0 or (s is not None and s.spills):
        return None
    if f.roofline is not None:
        frac, ev = f.roofline.fraction_of_peak, "of the measured roofline"
    else:
        eff = f.effective_dram()
        options: list[tuple[float, str]] = []
        if eff is not None:
            options.append((eff.pct / 100.0, eff.describe()))
        elif f.m("dram_throughput_pct") is not None:
            options.append((f.m("dram_throughput_pct") / 100.0, "of peak DRAM bandwidth"))
        scale = f.t.near_roofline / (f.t.near_pipe_pct / 100.0)     # pipes count from near_pipe_pct
        for name, label in (("tensor_pipe_pct", "tensor pipe"), ("fma_pipe_pct", "FMA pipe")):
            if f.m(name) is not None:
                options.append((f.m(name) / 100.0 * scale, f"{label} busy {f.m(name):.0f}% of cycles"))
        if not options:
            return None
        frac, ev = max(options, key=lambda o: o[0])
    if frac < f.t.near_roofline:
        return None
    text = (f"reaches {frac:.0%} {ev}" if f.roofline is not None else ev) + ": near the roof, little left to gain"
    return Finding("near the roofline", (text,), (Hint("near_roofline", text, (), 1.0),),
                   near_roofline=True)


def resource_limits(f: Facts) -> Finding | None:
    """A config that cannot launch (shared memory or registers over the device's limits)."""
    bad = [(s, w) for s in f.all_stats for w in s.warnings if "over the" in w]
    if not bad:
        return None
    ev = tuple(f"{s.kernel}{_describe(s)}: {w}" for s, w in bad)
    return Finding("config exceeds device limits", ev,
                   (Hint("fit_device_limits", ev[0], ("num_stages", "num_warps", *block_knobs(bad[0][0])), 1.0),))


def launch_overhead(f: Facts) -> Finding | None:
    """Each launch is so short that launching costs as much as the work."""
    launches = f.launches_per_call or 1
    if f.time_us is not None:
        per_launch, source = f.time_us / launches, "timed"
    elif f.m("duration_us") is not None:
        per_launch, source = f.m("duration_us"), "profiled"
    else:
        return None
    many = launches >= f.t.many_launches and per_launch < 2 * f.t.tiny_launch_us
    if per_launch >= f.t.tiny_launch_us and not many:
        return None
    ev = f"{launches} launch(es) per call, {per_launch:.1f} us each ({source}): launch overhead dominates"
    hints = [Hint("more_work_per_launch", ev, block_knobs(f.stats), 0.6)]
    if launches > 1:
        hints.append(Hint("fuse_launches", ev + "; fuse the kernels or capture them in a CUDA graph",
                          (), 0.7))
    return Finding("launch overhead", (ev,), tuple(hints), bound=Bound.LAUNCH)


OUTSIDE_DOMINANT = 0.9     # an outside_kernels hint's priority where the kernels are a sliver


def outside_kernels(f: Facts) -> Finding | None:
    """Most of the case's time goes outside its Triton kernels: the wrapper's torch operations,
    copies and host code. A kernel move can win back only the kernels' share (Amdahl's law).

    The kernels' time is Nsight Compute's: clocks not locked (``ncu.build_ncu_command``'s
    ``--clock-control none``, as in the timed run), caches flushed before each replayed pass, as
    the timing flushes the L2 before each call. The case's time is the caller's measurement. Only
    the profiled case is known: others may differ.
    Seen on the H100 (2026-11-25): matrix_reduction's kernel ran 2.8 us of a 581 us case (its
    timed call draws its inputs with torch.randn), max_reduction's 49 of 239 us, and
    dequantize_matmul's 20 of 210 us (the rest is torch.mm)."""
    kernel_us, time_us = f.kernel_us_per_call(), f.time_us
    if kernel_us is None or not time_us or time_us <= 0:
        return None
    share = kernel_us / time_us
    if share >= f.t.kernel_share:
        return None
    ev = (f"the Triton kernels run {kernel_us:,.1f} us of the case's {time_us:,.1f} us "
          f"({share:.0%}): the rest is the wrapper's other work (torch operations, copies, host "
          f"code); infinitely fast kernels would make this case at most {1 / (1 - share):.2f}x "
          "faster")
    priority = OUTSIDE_DOMINANT if share < f.t.kernel_share_dominant else 0.35
    return Finding("time outside the Triton kernels", (ev,),
                   (Hint("outside_kernels", ev + "; move the wrapper's work into the kernels "
                         "(fuse its torch operations, drop copies) or cut its host work", (),
                         priority),))


def small_grid(f: Facts) -> Finding | None:
    """Fewer programs than SMs: part of the GPU idles."""
    grid, sms = f.m("grid_size"), f.m("sm_count")
    if grid is None or sms is None or grid >= sms or _launch_scale(f):
        return None
    ev = f"grid of {grid:.0f} programs on {sms:.0f} SMs: {1 - grid / sms:.0%} of the SMs idle"
    return Finding("grid smaller than the GPU", (ev,),
                   (Hint("more_programs", ev + "; use smaller tiles or split the reduction (split-K)",
                         block_knobs(f.stats), 0.75),))


def tiny_programs(f: Facts) -> Finding | None:
    """Each program (block) does too little work: scheduling blocks costs more than running them."""
    ev: list[str] = []
    waves, duration = f.m("waves_per_sm"), f.m("duration_us")
    dram = f.m("dram_throughput_pct")
    if (waves is not None and duration is not None and waves >= f.t.many_waves
            and duration / waves < f.t.short_wave_us and (dram is None or dram < f.t.low_dram_pct)):
        grid, block = f.m("grid_size"), f.m("block_size")
        shape = f"{grid:,.0f} programs of {block:.0f} threads = " if grid and block else ""
        ev.append(f"{shape}{waves:,.0f} waves of {duration / waves:.2f} us each"
                  + (f", DRAM at {dram:.1f}% of peak" if dram is not None else ""))
    s = f.stats
    elements = _block_elements(s) if s is not None else None
    if s is not None and elements is not None and elements < 32 * s.num_warps:
        ev.append(f"a program covers {elements} element(s){_describe(s)} but runs "
                  f"{32 * s.num_warps} threads: most threads duplicate or mask out work")
    if not ev:
        return None
    knobs = block_knobs(s) or ("BLOCK_SIZE",)
    return Finding("too little work per program", tuple(ev),
                   (Hint("larger_blocks", "; ".join(ev) + ": raise the block size so that each "
                         "program handles more elements (or loop inside a persistent program)",
                         (*knobs, "num_warps"), 0.9),),
                   bound=Bound.LATENCY)


def memory_parallelism(f: Facts) -> Finding | None:
    """DRAM far from busy while warps wait on memory: too few loads in flight."""
    dram = f.m("dram_throughput_pct")
    shares = stall_shares(f.metrics)
    ls = shares.get("stall_long_scoreboard")
    if dram is None or ls is None or dram >= f.t.low_dram_pct or ls < f.t.long_scoreboard_share:
        return None
    if _launch_scale(f):
        return None
    occ = f.m("achieved_occupancy_pct")
    ev = (f"DRAM at {dram:.1f}% of peak while {ls:.0%} of stall cycles wait on memory (long "
          f"scoreboard)" + (f", achieved occupancy {occ:.0f}%" if occ is not None else "")
          + _describe(f.stats))
    return Finding("too little memory parallelism", (ev,),
                   (Hint("more_parallelism", ev + ": larger blocks, more warps or more pipeline "
                         "stages put more loads in flight", (*block_knobs(f.stats), "num_warps",
                                                             "num_stages"), 0.8),))


def register_limited(f: Facts) -> Finding | None:
    """Occupancy capped by registers per thread."""
    regs_cap = f.m("occ_limit_registers")
    others = [v for v in (f.m("occ_limit_warps"), f.m("occ_limit_blocks"), f.m("occ_limit_shared"))
              if v is not None]
    theo = f.m("theoretical_occupancy_pct")
    if regs_cap is not None and others and theo is not None:
        if regs_cap >= min(others) or theo > f.t.low_occupancy_pct:
            return None
        regs = f.m("registers_per_thread")
        ev = (f"occupancy limited by registers: {regs or 0:.0f} registers per thread allow "
              f"{regs_cap:.0f} block(s) per SM, {theo:.0f}% theoretical occupancy")
    elif f.stats is not None and (occ := estimate_occupancy(f.stats, f.limits)) is not None:
        if occ.limiter != "registers" or occ.pct > f.t.low_occupancy_pct:
            return None
        ev = (f"occupancy limited by registers (static): {f.stats.registers} registers per thread "
              f"x {f.stats.num_warps} warps allow {occ.blocks_per_sm} block(s) per SM, "
              f"{occ.pct:.0f}% theoretical occupancy")
    else:
        return None
    dot = f.stats is not None and f.stats.has_dot
    return Finding("occupancy limited by registers", (ev,),
                   (Hint("reduce_registers", ev + ": fewer warps per program or smaller tiles",
                         ("num_warps", *block_knobs(f.stats), "num_stages"), 0.45 if dot else 0.65),))


def spills(f: Facts) -> Finding | None:
    """Registers spilled to local memory."""
    ev: list[str] = []
    if f.stats is not None and f.stats.spills:
        ev.append(f"ptxas spills {f.stats.spills} bytes per thread (stores + loads){_describe(f.stats)}")
    local = (f.m("local_ld_sectors") or 0.0) + (f.m("local_st_sectors") or 0.0)
    if local > 0:
        ev.append(f"{local:,.0f} local-memory sectors moved (spills or local arrays)")
    if not ev:
        return None
    return Finding("register spills", tuple(ev),
                   (Hint("avoid_spills", "; ".join(ev) + ": smaller tiles or fewer pipeline stages",
                         (*block_knobs(f.stats), "num_stages", "num_warps"), 0.8),))


def narrow_accesses(f: Facts) -> Finding | None:
    """Global accesses narrower than 16 bytes, or more sectors per request than the width needs."""
    ev: list[str] = []
    width = f.stats.vector_width_bytes if f.stats is not None else None
    reqs, sectors = f.m("global_ld_requests"), f.m("global_ld_sectors")
    if reqs and sectors:
        ratio = sectors / reqs
        ideal = max(1.0, float(width or 4))          # 32 threads x width bytes / 32-byte sectors
        if ratio > max(16.0, ideal * f.t.coalescing_excess):
            ev.append(f"{ratio:.1f} sectors per global load request (about {ideal:.0f} expected): "
                      "uncoalesced accesses")
    memory_side = f.roofline is None or f.roofline.bound in (Bound.MEMORY, Bound.LATENCY)
    if width is not None and width < 16 and memory_side and not (f.stats and f.stats.has_dot):
        ev.append(f"widest global access is {width} bytes (16 is possible): accesses are not "
                  "vectorized")
    if not ev:
        return None
    return Finding("narrow or uncoalesced memory accesses", tuple(ev),
                   (Hint("vectorize_accesses", "; ".join(ev) + ": make the fastest-moving index "
                         "contiguous, keep sizes and strides divisible by 16, add tl.multiple_of / "
                         "tl.max_contiguous hints", ("tl.multiple_of", "tl.max_contiguous",
                                                     *block_knobs(f.stats)), 0.6),))


def tensor_cores(f: Facts) -> Finding | None:
    """A matrix product that does not run (well) on the tensor cores."""
    s = f.stats
    tensor, fma = f.m("tensor_pipe_pct"), f.m("fma_pipe_pct")
    if s is not None and s.has_dot and not s.uses_tensor_cores:
        ev = f"tl.dot compiled without tensor-core instructions{_describe(s)}"
        prio = 0.85
    elif s is not None and s.has_dot and tensor is not None and fma is not None \
            and tensor < f.t.tensor_idle_pct and fma >= f.t.fma_busy_pct:
        ev = f"dot kernel with the tensor pipe at {tensor:.1f}% and the FMA pipe at {fma:.1f}%"
        prio = 0.8
    elif s is not None and s.mma_kind == "mma" and s.target.endswith(":90"):
        ev = f"tl.dot uses mma.sync, not Hopper's wgmma{_describe(s)}"
        prio = 0.5
    elif s is None and tensor is not None and fma is not None and tensor < f.t.tensor_idle_pct \
            and fma >= f.t.fma_busy_pct and (f.m("sm_throughput_pct") or 0) >= f.t.sol_bound_pct:
        ev = (f"FMA pipe busy {fma:.0f}% of cycles with the tensor pipe idle ({tensor:.1f}%): if "
              "this is matrix math, tensor cores would raise the roof")
        prio = 0.5
    else:
        return None
    return Finding("tensor cores idle in a dot kernel", (ev,),
                   (Hint("mma_friendly_tiles", ev + ": fp16/bf16 (or tf32) operands, every dot "
                         "dimension a multiple of 16 (BLOCK_M >= 64 and num_warps a multiple of 4 "
                         "for wgmma); input_precision='tf32x3' keeps fp32 accuracy on tensor cores",
                         (*block_knobs(s), "num_warps", "input_precision"), prio),))


def l2_locality(f: Facts) -> Finding | None:
    """A tiled dot kernel whose programs re-read operands from DRAM instead of L2."""
    hit, dram = f.m("l2_hit_rate_pct"), f.m("dram_throughput_pct")
    if f.stats is None or not f.stats.has_dot or hit is None or dram is None:
        return None
    if hit >= f.t.low_l2_hit_pct or dram < f.t.low_dram_pct:
        return None
    ev = f"L2 hit rate {hit:.0f}% with DRAM at {dram:.0f}%: tiles are re-read from DRAM"
    return Finding("poor L2 reuse", (ev,),
                   (Hint("swizzle_program_ids", ev + ": group programs that share operands "
                         "(program-id swizzle, GROUP_SIZE_M)", ("GROUP_SIZE_M",), 0.6),))


def tail_effect(f: Facts) -> Finding | None:
    """A last, partly filled wave of programs."""
    waves = f.m("waves_per_sm")
    if waves is None or waves < 1 or waves > 4 or _launch_scale(f):
        return None
    eff = waves / math.ceil(waves)
    if eff >= f.t.wave_efficiency:
        return None
    ev = f"{waves:.2f} waves of programs: the last wave keeps the GPU {eff:.0%} busy on average"
    return Finding("partial last wave", (ev,),
                   (Hint("balance_waves", ev + ": change the tile size so that the grid fills "
                         "whole waves, or use a persistent grid", block_knobs(f.stats), 0.4),))


def barrier_stalls(f: Facts) -> Finding | None:
    """Warps waiting at barriers (reductions, shared-memory handoffs)."""
    share = stall_shares(f.metrics).get("stall_barrier")
    if share is None or share < f.t.barrier_share:
        return None
    ev = f"{share:.0%} of stall cycles wait at barriers"
    return Finding("barrier stalls", (ev,),
                   (Hint("fewer_barriers", ev + ": fewer warps per program (cheaper reductions) "
                         "or fewer cross-warp reductions", ("num_warps",), 0.4),))


RULES = (near_roofline, resource_limits, launch_overhead, outside_kernels, small_grid, tiny_programs,
         memory_parallelism, register_limited, spills, narrow_accesses, tensor_cores, l2_locality,
         tail_effect, barrier_stalls)
