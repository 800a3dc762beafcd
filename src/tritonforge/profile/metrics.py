"""The one table of metric short names, and a pure-Python reader of ``ncu --csv --page raw``.

Every other part of TritonForge speaks of metrics by their short names (``dram_throughput_pct``,
``stall_long_scoreboard``): the table below is the only place that knows which Nsight Compute metric
each name reads and in which unit it is stored. Values are converted to the table's unit whatever
unit ncu printed (``ns`` vs ``usecond``, ``Kbyte`` vs ``byte``), and ncu's thousands separators
("1,980,000") are removed, so the same reader serves CSVs recorded with or without
``--print-units base``.

Stall metrics are ``smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio``: cycles a
warp spent stalled on that reason per issued instruction (the WarpStateStats section's numbers);
``stall_shares`` turns them into fractions of all stalls.
"""

from __future__ import annotations

import csv
import io
import logging
import re
from dataclasses import dataclass
from typing import Mapping

from ..model import KernelProfile, Metric

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetricSpec:
    """One row of the table: a short name, the ncu metric it reads, the unit it is stored in."""

    short: str
    ncu: str
    unit: str                 # canonical unit: us, %, B, GB/s, inst, warps, blocks, regs, ratio, ...
    description: str
    min_arch: int = 70        # first compute capability (x10) that has the metric


# Reasons a warp can be stalled (names as ncu spells them); gmma exists from sm_90 on.
STALL_REASONS: tuple[str, ...] = (
    "long_scoreboard", "short_scoreboard", "barrier", "membar", "mio_throttle", "lg_throttle",
    "math_pipe_throttle", "tex_throttle", "wait", "not_selected", "selected", "no_instruction",
    "branch_resolving", "dispatch_stall", "drain", "imc_miss", "misc", "sleeping", "gmma",
)


def _stall(reason: str) -> MetricSpec:
    return MetricSpec(
        f"stall_{reason}",
        f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio",
        "cycles/inst",
        f"cycles stalled on {reason.replace('_', ' ')} per issued instruction",
        90 if reason == "gmma" else 70,
    )


_PCT = "%"
METRICS: tuple[MetricSpec, ...] = (
    # time and speed of light
    MetricSpec("duration_us", "gpu__time_duration.sum", "us", "kernel duration"),
    MetricSpec("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed", _PCT,
               "compute speed of light (busiest SM unit, % of peak)"),
    MetricSpec("mem_throughput_pct",
               "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", _PCT,
               "memory speed of light (busiest memory unit, % of peak)"),
    MetricSpec("dram_throughput_pct", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
               _PCT, "DRAM throughput, % of peak"),
    MetricSpec("l1_throughput_pct", "l1tex__throughput.avg.pct_of_peak_sustained_active", _PCT,
               "L1/TEX throughput, % of peak"),
    MetricSpec("l2_throughput_pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed", _PCT,
               "L2 throughput, % of peak"),
    # bytes and caches
    MetricSpec("dram_bytes_read", "dram__bytes_read.sum", "B", "bytes read from DRAM"),
    MetricSpec("dram_bytes_write", "dram__bytes_write.sum", "B", "bytes written to DRAM"),
    MetricSpec("dram_bw_gbs", "dram__bytes.sum.per_second", "GB/s", "DRAM bandwidth achieved"),
    MetricSpec("l1_hit_rate_pct", "l1tex__t_sector_hit_rate.pct", _PCT, "L1 sector hit rate"),
    MetricSpec("l2_hit_rate_pct", "lts__t_sector_hit_rate.pct", _PCT, "L2 sector hit rate"),
    MetricSpec("global_ld_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "req",
               "global load requests"),
    MetricSpec("global_ld_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "sectors",
               "global load sectors (32 B)"),
    MetricSpec("global_st_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "req",
               "global store requests"),
    MetricSpec("global_st_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "sectors",
               "global store sectors (32 B)"),
    MetricSpec("local_ld_sectors", "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "sectors",
               "local-memory load sectors (register spills, local arrays)"),
    MetricSpec("local_st_sectors", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum", "sectors",
               "local-memory store sectors (register spills, local arrays)"),
    MetricSpec("shared_bank_conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
               "conflicts", "shared-memory bank conflicts"),
    # occupancy and launch
    MetricSpec("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active",
               _PCT, "achieved occupancy (active warps, % of the SM's maximum)"),
    MetricSpec("theoretical_occupancy_pct", "sm__maximum_warps_per_active_cycle_pct", _PCT,
               "theoretical occupancy"),
    MetricSpec("occ_limit_registers", "launch__occupancy_limit_registers", "blocks",
               "blocks per SM allowed by registers"),
    MetricSpec("occ_limit_shared", "launch__occupancy_limit_shared_mem", "blocks",
               "blocks per SM allowed by shared memory"),
    MetricSpec("occ_limit_warps", "launch__occupancy_limit_warps", "blocks",
               "blocks per SM allowed by the warp limit"),
    MetricSpec("occ_limit_blocks", "launch__occupancy_limit_blocks", "blocks",
               "blocks per SM allowed by the block limit"),
    MetricSpec("registers_per_thread", "launch__registers_per_thread", "regs",
               "registers per thread"),
    MetricSpec("shared_static_bytes", "launch__shared_mem_per_block_static", "B",
               "static shared memory per block"),
    MetricSpec("shared_dynamic_bytes", "launch__shared_mem_per_block_dynamic", "B",
               "dynamic shared memory per block"),
    MetricSpec("block_size", "launch__block_size", "threads", "threads per block"),
    MetricSpec("grid_size", "launch__grid_size", "blocks", "blocks in the grid"),
    MetricSpec("waves_per_sm", "launch__waves_per_multiprocessor", "waves",
               "grid size over what the GPU holds at once"),
    MetricSpec("sm_count", "launch__sm_count", "SMs", "multiprocessors"),
    # instructions and pipes
    MetricSpec("inst_executed", "smsp__inst_executed.sum", "inst", "warp instructions executed"),
    MetricSpec("issue_active_pct", "sm__issue_active.avg.pct_of_peak_sustained_elapsed", _PCT,
               "cycles with an instruction issued, % of peak"),
    MetricSpec("tensor_pipe_pct", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
               _PCT, "tensor pipe utilization"),
    MetricSpec("fma_pipe_pct", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
               _PCT, "FMA pipe utilization"),
    MetricSpec("alu_pipe_pct", "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed",
               _PCT, "ALU pipe utilization"),
    MetricSpec("xu_pipe_pct", "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_elapsed", _PCT,
               "special-function (XU) pipe utilization"),
    MetricSpec("lsu_pipe_pct", "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_elapsed",
               _PCT, "load/store pipe utilization"),
    MetricSpec("ffma_thread_inst", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst",
               "fp32 FMA thread instructions"),
    MetricSpec("fadd_thread_inst", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "inst",
               "fp32 add thread instructions"),
    MetricSpec("fmul_thread_inst", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", "inst",
               "fp32 multiply thread instructions"),
    MetricSpec("warps_eligible_per_cycle", "smsp__warps_eligible.avg.per_cycle_active", "warps",
               "warps ready to issue per cycle per scheduler"),
    *(_stall(r) for r in STALL_REASONS),
)

BY_SHORT: dict[str, MetricSpec] = {m.short: m for m in METRICS}
BY_NCU: dict[str, MetricSpec] = {m.ncu: m for m in METRICS}
STALL_NAMES: tuple[str, ...] = tuple(f"stall_{r}" for r in STALL_REASONS)


def ncu_metric_names(shorts: list[str] | tuple[str, ...] | None = None, arch: int = 90) -> list[str]:
    """The ncu metric names for ``shorts`` (default: the whole table) that exist on ``arch``."""
    specs = METRICS if shorts is None else [BY_SHORT[s] for s in shorts]
    return [m.ncu for m in specs if m.min_arch <= arch]


# ---- units ------------------------------------------------------------------------------------

_TIME_TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3,
               "msecond": 1e3, "s": 1e6, "second": 1e6}
_BYTE_SCALE = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
               "b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
               "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3}


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a value ncu printed in ``from_unit`` to the table's ``to_unit`` (unknown: as is)."""
    fu = from_unit.strip()
    if to_unit == "us" and fu in _TIME_TO_US:
        return value * _TIME_TO_US[fu]
    if to_unit == "B" and fu.lower() in _BYTE_SCALE:
        return value * _BYTE_SCALE[fu.lower()]
    if to_unit == "GB/s":
        num, _, den = fu.partition("/")
        if num.lower() in _BYTE_SCALE and den in ("second", "s", "sec"):
            return value * _BYTE_SCALE[num.lower()] / 1e9
    return value


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def parse_number(text: str) -> float | None:
    """ncu's printed number ("1,980,000", "339,574.50", "n/a") as a float, or None."""
    t = text.strip().replace(",", "")
    if not t or not _NUMBER.match(t):
        return None
    return float(t)


# ---- the raw CSV page ------------------------------------------------------------------------

def _find_header(lines: list[str]) -> int | None:
    for i, line in enumerate(lines):
        if line.startswith('"ID"') and '"Kernel Name"' in line:
            return i
    return None


def parse_raw_csv(text: str) -> list[KernelProfile]:
    """Parse the output of ``ncu --csv --page raw`` into one KernelProfile per profiled launch.

    The text may carry the profiled program's own output and ncu's ``==PROF==`` lines before and
    after the table (that is what ncu prints when no ``--log-file`` is given): everything before
    the header row (first cell "ID") and every row of the wrong width are skipped. Only metrics in
    the table are kept, under their short names, in the table's units.
    """
    lines = text.splitlines()
    start = _find_header(lines)
    if start is None:
        return []
    rows = [r for r in csv.reader(io.StringIO("\n".join(lines[start:]))) if r]
    header = rows[0]
    width = len(header)
    units: list[str] = [""] * width
    body = rows[1:]
    if body and len(body[0]) == width and body[0][0] == "":
        units = body[0]
        body = body[1:]
    col = {name: i for i, name in enumerate(header)}
    name_col = col.get("Kernel Name")
    wanted = [(m, col[m.ncu]) for m in METRICS if m.ncu in col]     # in table order
    profiles: list[KernelProfile] = []
    for row in body:
        if len(row) != width or parse_number(row[0]) is None:
            continue
        metrics: list[Metric] = []
        for spec, i in wanted:
            value = parse_number(row[i])
            if value is None:
                continue
            metrics.append(Metric(spec.short, convert(value, units[i], spec.unit), spec.unit))
        duration = next((m.value for m in metrics if m.name == "duration_us"), None)
        kernel = row[name_col] if name_col is not None else "?"
        profiles.append(KernelProfile(kernel=kernel, metrics=tuple(metrics), duration_us=duration,
                                      launch_id=int(parse_number(row[0]) or 0)))
    log.debug("parsed %d profiled launches from ncu CSV", len(profiles))
    return profiles


def stall_shares(metrics: KernelProfile | Mapping[str, float]) -> dict[str, float]:
    """Each stall reason's share of all stall cycles (0..1), for the reasons the metrics have."""
    get = metrics.get
    values = {n: get(n) for n in STALL_NAMES}
    present = {n: v for n, v in values.items() if v is not None and v > 0}
    total = sum(present.values())
    if total <= 0:
        return {}
    return {n: v / total for n, v in present.items()}
