"""Device limits per compute capability, the launchability check and a theoretical occupancy.

``check_limits`` answers "will this compiled config launch at all?" (shared memory and registers
per block, threads per block); ``estimate_occupancy`` says how many warps of it fit on one SM and
which resource stops more from fitting, the static stand-in for ncu's occupancy section.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..model import CompileStats


@dataclass(frozen=True)
class DeviceLimits:
    """What one block and one SM may use on a compute capability (CUDA programming guide)."""

    arch: int
    shared_per_block: int              # opt-in maximum, bytes
    shared_per_sm: int
    registers_per_thread: int = 255
    registers_per_block: int = 65536
    registers_per_sm: int = 65536
    max_threads_per_block: int = 1024
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    reserved_shared_per_block: int = 1024

    @property
    def name(self) -> str:
        return f"sm_{self.arch}"


DEVICE_LIMITS: dict[int, DeviceLimits] = {
    70: DeviceLimits(70, 98304, 98304, max_warps_per_sm=64, max_blocks_per_sm=32, reserved_shared_per_block=0),
    75: DeviceLimits(75, 65536, 65536, max_warps_per_sm=32, max_blocks_per_sm=16, reserved_shared_per_block=0),
    80: DeviceLimits(80, 166912, 167936),
    86: DeviceLimits(86, 101376, 102400, max_warps_per_sm=48, max_blocks_per_sm=16),
    89: DeviceLimits(89, 101376, 102400, max_warps_per_sm=48, max_blocks_per_sm=24),
    90: DeviceLimits(90, 232448, 233472),
    100: DeviceLimits(100, 232448, 233472),
    120: DeviceLimits(120, 101376, 102400, max_warps_per_sm=48, max_blocks_per_sm=24),
}


def limits_for(arch: int) -> DeviceLimits:
    """The limits of ``arch``, or of the nearest older architecture in the table."""
    known = [a for a in sorted(DEVICE_LIMITS) if a <= arch]
    return DEVICE_LIMITS[known[-1] if known else min(DEVICE_LIMITS)]


def check_limits(stats: CompileStats, limits: DeviceLimits) -> list[str]:
    """Why this compiled config cannot launch on a device with ``limits`` (empty: it can)."""
    problems: list[str] = []
    threads = stats.num_warps * 32
    if threads > limits.max_threads_per_block:
        problems.append(f"num_warps={stats.num_warps} is {threads} threads per block, over the "
                        f"{limits.max_threads_per_block} {limits.name} allows: use fewer warps")
    if stats.shared_bytes is not None and stats.shared_bytes > limits.shared_per_block:
        problems.append(
            f"needs {stats.shared_bytes} B of shared memory per block, over the "
            f"{limits.shared_per_block} B ({limits.shared_per_block // 1024} KiB) {limits.name} "
            f"allows: lower num_stages (now {stats.num_stages}) or the tile sizes")
    if stats.registers is not None:
        if stats.registers > limits.registers_per_thread:
            problems.append(f"{stats.registers} registers per thread, over the "
                            f"{limits.registers_per_thread} {limits.name} allows")
        per_block = _round_up(stats.registers, 8) * threads
        if per_block > limits.registers_per_block:
            problems.append(
                f"{stats.registers} registers x {threads} threads = {per_block} registers per "
                f"block, over the {limits.registers_per_block} {limits.name} allows (the launch "
                f"fails with 'too many resources requested'): use fewer warps or smaller tiles")
    return problems


@dataclass(frozen=True)
class Occupancy:
    """How many blocks and warps of a kernel fit on one SM, and what stops more from fitting."""

    blocks_per_sm: int
    warps_per_sm: int
    pct: float                      # of the SM's maximum warps
    limiter: str                    # "registers", "shared", "warps" or "blocks"


def estimate_occupancy(stats: CompileStats, limits: DeviceLimits) -> Occupancy | None:
    """Theoretical occupancy from registers, shared memory and num_warps (None if unknown)."""
    if stats.registers is None or stats.num_warps <= 0:
        return None
    caps = {
        "warps": limits.max_warps_per_sm // stats.num_warps,
        "blocks": limits.max_blocks_per_sm,
        "registers": limits.registers_per_sm // max(1, _round_up(stats.registers, 8) * 32 * stats.num_warps),
        "shared": (limits.shared_per_sm // (stats.shared_bytes + limits.reserved_shared_per_block)
                   if stats.shared_bytes else limits.max_blocks_per_sm),
    }
    blocks = min(caps.values())
    # on a tie, name the limit that is natural for the config (warps, blocks) rather than a resource
    limiter = next(name for name in ("warps", "blocks", "registers", "shared") if caps[name] == blocks)
    warps = blocks * stats.num_warps
    return Occupancy(blocks, warps, 100.0 * warps / limits.max_warps_per_sm, limiter)


def _round_up(x: int, m: int) -> int:
    return int(math.ceil(x / m) * m)
