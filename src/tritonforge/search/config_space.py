"""The launch-config space of one launch site, pruned and ranked without compiling (driver side).

For a launch site of a kernel that is not autotuned, the space is every combination of

- each tile size written as a literal at the launch (``ConstexprKnob.tunable`` and ``block_like``:
  it multiplies a program id or steps a loop, and the grid follows it), over powers of two around
  its value (a 1-D block also over 256..8192, where elementwise kernels usually peak on
  sm_90; a tile beside other tiles over 16..256);
- ``num_warps`` (1..16; a ``tl.dot`` kernel keeps at least 4: a Hopper warpgroup MMA needs 4);
- ``num_stages`` (1..5) where the kernel loops over loads (elsewhere it compiles to the same
  code and only costs a timing slot).

It comes from the static analysis of the launch alone (``analyze.launches``: constexpr values,
the grid, launch options; ``analyze.kernels``: tl.arange bounds, tl.dot, loops): no kernel name or
pattern is recognised, so it reaches kernels that the rules were never written for.

Each config is first scored by a cheap model (``score_config``), the best few hundred are then
estimated (``search.resources``) and checked against the device (``search.prune``): a config
whose estimate is over the device, or whose multi-buffered shared memory is over it (Triton
raises OutOfResources for that at load time; the estimate is exact for fp32 ``tl.dot`` operands
on sm_90), is dropped before anything is compiled. The survivors are ranked by the model with
the estimate's occupancy folded in.

The model is a heuristic, not a simulator: its terms are the usual reasons a Triton config is
slow on a GPU -- idle lanes (fewer tile elements than threads), no 16-byte vectors (fewer than 4
elements per thread), register pressure (many elements per thread), a grid too small to fill the
SMs, too little work per program, low occupancy, a ``tl.dot`` tile with little data reuse, no
pipelining of a dot loop -- weighted by what the profile's diagnosis says (memory-bound: in-flight
parallelism and occupancy; latency-bound: stages and warps; hints such as ``larger_blocks``).
"""

from __future__ import annotations

import ast
import itertools
import logging
import math
from dataclasses import dataclass
from typing import Any, Iterable

from ..model import Diagnosis
from ..profile.limits import DeviceLimits
from .config_facts import contiguous_blocks, problem_elements
from .prune import Fit, check_estimate
from .resources import UNKNOWN_BYTES, Bytes, ResourceEstimate, estimate
from .rules import _may_pipeline

# ``..transforms`` is imported inside functions: it needs libcst, which the GPU image lacks, and
# this module must import there.

log = logging.getLogger(__name__)

WARPS = (1, 2, 4, 8, 16)
STAGES = (1, 2, 3, 4, 5)
BLOCKS_1D = (256, 512, 1024, 2048, 4096, 8192)
BLOCKS_TILED = (16, 32, 64, 128)
MAX_1D_BLOCK = 16384
MAX_TILE = 256
ESTIMATED = 400            # configs estimated per site after the cheap pre-score
DEFAULT_SMS = 132          # H100 SXM, when the device does not say


@dataclass(frozen=True)
class SiteSpace:
    """What may vary at one launch site, with its values now."""

    site: int
    kernel: str
    blocks: tuple[tuple[str, tuple[int, ...]], ...]    # tile constexpr -> values to try
    current_blocks: tuple[tuple[str, int], ...]
    warps: tuple[int, ...]
    current_warps: int
    stages: tuple[int, ...]
    current_stages: int
    stages_given: bool          # num_stages written at the launch (else Triton's default, 3)
    uses_dot: bool
    pipelined: bool
    contiguous: frozenset[str] = frozenset()    # tiles along the contiguous axis of a 2-D tile
    # an autotuned kernel: a config is one more ``triton.Config`` for its list (the other
    # values of the base config, GROUP_SIZE_M and the like, kept), ``site`` its first launch
    autotune_base: tuple[tuple[str, int], ...] | None = None

    @property
    def current(self) -> "LaunchConfig":
        return LaunchConfig(self.site, self.kernel, self.current_blocks, self.current_warps,
                            self.current_stages)

    @property
    def size(self) -> int:
        n = len(self.warps) * len(self.stages)
        for _, values in self.blocks:
            n *= len(values)
        return n


@dataclass(frozen=True)
class LaunchConfig:
    """One point of a site's space: tile sizes, num_warps, num_stages."""

    site: int
    kernel: str
    blocks: tuple[tuple[str, int], ...]
    num_warps: int
    num_stages: int

    @property
    def key(self) -> tuple:
        return (self.site, self.blocks, self.num_warps, self.num_stages)

    @property
    def warps(self) -> int:
        """num_warps in effect: 0 (the wrapper's computed value, unknown) counts as 4."""
        return self.num_warps or 4

    @property
    def stages(self) -> int:
        """num_stages in effect: 0 (computed by the wrapper) counts as Triton's default, 3."""
        return self.num_stages or 3

    def changes(self, base: "LaunchConfig") -> list[str]:
        """What differs from ``base``, as "NAME old -> new" items."""
        old = dict(base.blocks)
        out = [f"{n} {old.get(n)} -> {v}" for n, v in self.blocks if old.get(n) != v]
        if self.num_warps != base.num_warps:
            out.append(f"num_warps {base.num_warps or '(computed)'} -> {self.num_warps}")
        if self.num_stages != base.num_stages:
            out.append(f"num_stages {base.num_stages or '(computed)'} -> {self.num_stages}")
        return out

    def distance(self, other: "LaunchConfig") -> float:
        """Steps between two configs of one site, in powers of two (stages count one each)."""
        theirs = dict(other.blocks)
        d = sum(abs(math.log2(v) - math.log2(theirs.get(n, v))) for n, v in self.blocks)
        d += abs(math.log2(self.warps) - math.log2(other.warps))
        return d + abs(self.stages - other.stages)


@dataclass(frozen=True)
class RankedConfig:
    config: LaunchConfig
    score: float
    why: str = ""


@dataclass(frozen=True)
class DroppedConfig:
    config: LaunchConfig
    reason: str
    resources: tuple[str, ...]


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _block_values(value: int, tiled: bool, dot: bool, in_arange: bool) -> tuple[int, ...]:
    if value <= 0 or (in_arange and not _pow2(value)):
        return (value,)
    near = {value << e for e in range(0, 5)} | {value >> e for e in (1, 2) if value % (1 << e) == 0}
    near = {v for v in near if v >= 1 and (v == value or _pow2(v) or not in_arange)}
    pool = near | set(BLOCKS_TILED if tiled else BLOCKS_1D)
    cap = MAX_TILE if tiled else MAX_1D_BLOCK
    lo = 16 if dot else 1
    values = tuple(sorted(v for v in pool if lo <= v <= max(cap, value) and
                          (v == value or _pow2(v) or not in_arange) and
                          (not tiled or value // 8 <= v <= value * 8)))
    return values or (value,)       # a value below the dot minimum (GROUP_M=8) stays as it is


def site_space(analysis: Any, knobs: Any, tree: ast.Module | None = None) -> SiteSpace | None:
    """The space of one launch site's ``LaunchKnobs``; None for an autotuned kernel, a kernel
    not in the file, or a launch whose options come from elsewhere (@triton.heuristics, or a
    ``**kwargs`` splat with neither option written beside it).

    A ``*args`` splat binds positional parameters only, and num_warps/num_stages are keyword-only
    launch options: they are searched there as anywhere (matrix_transpose passes its strides as
    ``*x.stride()``; its one program per matrix ran at the default 4 warps, out of the search's
    reach). Beside a ``**kwargs`` splat only an option written at the call varies (the same name
    in the splat as well is the original's own TypeError); one not written may hide in it."""
    if knobs.autotuned or not analysis.has_kernel(knobs.kernel):
        return None
    kernel = analysis.kernel(knobs.kernel)
    site = analysis.site(knobs.site)
    if {"num_warps", "num_stages"} & set(kernel.heuristics):
        return None
    if site.star_kwargs and not (knobs.num_warps_given or knobs.num_stages_given):
        return None
    blocks = [c for c in knobs.tunable_constexprs
              if c.block_like and isinstance(c.value, int) and not isinstance(c.value, bool)]
    tiled = len([c for c in knobs.constexprs if c.block_like or "BLOCK" in c.name.upper()]) > 1
    dot = kernel.uses_dot
    values = []
    for c in blocks:
        vals = _block_values(c.value, tiled or dot, dot, c.name in kernel.arange_constexprs)
        values.append((c.name, vals))
    # an option the wrapper computes (num_warps=nw) is "0": its value is unknown here, every
    # config of the search writes a literal over it (cross_entropy1's computed num_warps: a
    # warps/stages change alone gave 1.095x on its three largest cases, H100)
    warps = knobs.num_warps or (0 if knobs.num_warps_given else 4)
    pipelined = _may_pipeline(analysis, knobs.kernel)
    stages = knobs.num_stages or (0 if knobs.num_stages_given else 3)
    # beside a **kwargs splat, an option not written at the call stays as it is
    vary_warps = (warps in WARPS + (0,) or dot) and not (site.star_kwargs
                                                         and not knobs.num_warps_given)
    vary_stages = pipelined and not (site.star_kwargs and not knobs.num_stages_given)
    return SiteSpace(
        site=knobs.site, kernel=knobs.kernel, blocks=tuple(values),
        current_blocks=tuple((c.name, c.value) for c in blocks),
        warps=tuple(w for w in WARPS if not dot or w >= 4) if vary_warps else (warps,),
        current_warps=warps,
        stages=STAGES if vary_stages else (stages,), current_stages=stages,
        stages_given=knobs.num_stages_given, uses_dot=dot, pipelined=pipelined,
        contiguous=contiguous_blocks(tree, knobs.kernel) if tree is not None else frozenset())


def autotune_space(analysis: Any, kernel_name: str, pick: Any = None,
                   tree: ast.Module | None = None) -> SiteSpace | None:
    """The space around an autotuned kernel's config (``pick``: the ``ConfigSpec`` its autotuner
    chose on the profiled case; else its first config): its tile sizes, num_warps, num_stages.
    None when its configs are not a list of literal ``triton.Config`` calls."""
    from ..transforms.autotune_widen import existing_specs

    kernel = analysis.kernel(kernel_name)
    specs = existing_specs(kernel)
    if isinstance(specs, str) or not specs or not analysis.sites_of(kernel_name):
        return None
    base = pick if pick is not None else specs[0]
    tiles = set(kernel.block_constexprs) | set(kernel.arange_constexprs)
    dot = kernel.uses_dot
    blocks = [(n, _block_values(v, len(tiles) > 1 or dot, dot, n in kernel.arange_constexprs))
              for n, v in base.kwargs if n in tiles and v > 0]
    pipelined = _may_pipeline(analysis, kernel_name)
    return SiteSpace(
        site=analysis.sites_of(kernel_name)[0].index, kernel=kernel_name, blocks=tuple(blocks),
        current_blocks=tuple((n, v) for n, v in base.kwargs if n in tiles and v > 0),
        warps=tuple(w for w in WARPS if not dot or w >= 4), current_warps=base.num_warps,
        stages=STAGES if pipelined else (base.num_stages,), current_stages=base.num_stages,
        stages_given=True, uses_dot=dot, pipelined=pipelined,
        contiguous=contiguous_blocks(tree, kernel_name) if tree is not None else frozenset(),
        autotune_base=tuple(base.kwargs))


def enumerate_configs(space: SiteSpace) -> Iterable[LaunchConfig]:
    names = [n for n, _ in space.blocks]
    for combo in itertools.product(*(v for _, v in space.blocks)):
        for w in space.warps:
            for s in space.stages:
                yield LaunchConfig(space.site, space.kernel, tuple(zip(names, combo)), w, s)


def _weights(diagnosis: Diagnosis | None) -> dict[str, float]:
    w: dict[str, float] = {}
    if diagnosis is None:
        return w
    w[f"bound:{diagnosis.bound.value}"] = 1.0
    for h in diagnosis.hints:
        w[h.kind] = max(w.get(h.kind, 0.0), h.priority)
    return w


def score_config(cfg: LaunchConfig, space: SiteSpace, weights: dict[str, float],
                 problem: int | None, sms: int, est: ResourceEstimate | None = None,
                 limits: DeviceLimits | None = None) -> tuple[float, str]:
    """(score, the terms that moved it most): higher is likelier faster. See the module doc."""
    terms: dict[str, float] = {}
    tile = math.prod(v for _, v in cfg.blocks) if cfg.blocks else None
    threads = 32 * cfg.warps
    memory = weights.get("bound:memory", 0) or weights.get("bound:unknown", 0) or not weights
    latency = weights.get("bound:latency", 0)
    if tile is not None and not space.uses_dot:
        ept = tile / threads
        if ept < 1:
            terms["idle lanes"] = 0.6 * math.log2(ept)
        elif ept < 4:
            terms["narrow accesses"] = -0.15 * (2 - math.log2(ept))
        if ept > 32:
            spill = 1 + weights.get("avoid_spills", 0) + weights.get("reduce_registers", 0)
            terms["registers"] = -0.2 * spill * math.log2(ept / 32)
        for name, v in cfg.blocks:
            if name in space.contiguous and len(cfg.blocks) > 1 and v < 32:
                # rows of fewer than 32 elements: 128-byte segments only partly used
                terms["short rows"] = terms.get("short rows", 0.0) - 0.2 * math.log2(32 / v)
        if tile < 512:
            terms["small programs"] = -0.15 * (1 + weights.get("larger_blocks", 0)
                                               + weights.get("more_work_per_launch", 0)) \
                * math.log2(512 / tile)
    if space.uses_dot and est is not None and est.dots:
        d = est.dots[0]
        reuse = d.m * d.n / (d.m + d.n)
        terms["dot reuse"] = 0.25 * math.log2(max(reuse, 1) / 16)
        # accumulators per thread: 64 (fp32) is where Hopper GEMMs sit (128x128 over 8 warps);
        # far fewer wastes the warps, far more spills
        per_thread = d.m * d.n / threads
        terms["accumulator"] = -0.15 * abs(math.log2(max(per_thread, 1) / 64))
        if per_thread > 128:
            terms["accumulator"] -= 0.3 * math.log2(per_thread / 128)
        # a K step of at least 64 bytes per operand row: fewer loop trips per tile of output
        k_bytes = d.k * max(d.a_bytes[0], 1)
        terms["k step"] = 0.1 * math.log2(min(k_bytes, 128) / 64) if k_bytes < 64 else 0.0
        if d.pipelined:
            terms["pipelining"] = {1: -0.35, 2: -0.1}.get(cfg.stages, 0.0)
        tile = d.m * d.n
    if tile and problem:
        programs = max(1.0, problem / tile)
        if programs < sms:
            terms["grid below the SMs"] = -(0.5 + 0.3 * weights.get("more_parallelism", 0)) \
                * math.log2(sms / programs)
    if est is not None and limits is not None:
        occ = occupancy(est, limits)
        floor = 0.125 if space.uses_dot else 0.5     # a GEMM lives on few, fat warps
        if occ < floor:
            terms["occupancy"] = -(0.3 + 0.3 * memory) * math.log2(floor / max(occ, 1 / 64))
    if space.pipelined and not space.uses_dot:
        # a loop over loads: a second stage hides latency; many stages cost shared memory
        terms["stages"] = (0.05 + 0.1 * latency) * min(cfg.stages, 3) - 0.03 * cfg.stages
    if latency and cfg.warps >= 4:
        terms["warps in flight"] = 0.05 * math.log2(cfg.warps)
    # a mild prior for the current config's neighbourhood: equal scores go to the nearer one
    terms["distance"] = -0.02 * cfg.distance(space.current)
    score = sum(terms.values())
    top = sorted(terms.items(), key=lambda kv: -abs(kv[1]))[:2]
    return score, ", ".join(f"{k} {v:+.2f}" for k, v in top if abs(v) >= 0.01)


def occupancy(est: ResourceEstimate, limits: DeviceLimits) -> float:
    """Warps resident per SM over the maximum, from the estimate's registers (the tiles plus
    ~24 for addresses and indices) and its multi-buffered shared memory."""
    regs = min(limits.registers_per_thread, max(32, est.registers[1] + 24))
    regs = int(math.ceil(regs / 8) * 8)
    w = est.num_warps
    blocks = min(limits.max_warps_per_sm // w, limits.max_blocks_per_sm,
                 limits.registers_per_sm // max(1, regs * 32 * w))
    shared = est.shared_bytes[1]
    if shared:
        blocks = min(blocks, limits.shared_per_sm // (shared + limits.reserved_shared_per_block))
    return blocks * w / limits.max_warps_per_sm


def rank_site(tree: ast.Module, space: SiteSpace, limits: DeviceLimits,
              nbytes: Bytes = UNKNOWN_BYTES, diagnosis: Diagnosis | None = None,
              problem: int | None = None, sms: int = 0
              ) -> tuple[list[RankedConfig], list[DroppedConfig]]:
    """Every config of ``space`` but the current one that may fit the device, best first, and
    those dropped with why. Only the ``ESTIMATED`` best by the cheap score are estimated."""
    weights = _weights(diagnosis)
    sms = sms or DEFAULT_SMS
    current = space.current.key

    def estimated(cfg: LaunchConfig) -> ResourceEstimate | None:
        try:
            return estimate(tree, space.kernel, dict(cfg.blocks), cfg.warps, cfg.stages,
                            default_bytes=nbytes)
        except Exception as exc:  # noqa: BLE001 - odd code: rank without the estimate
            log.debug("no estimate for %s at %s: %s", space.kernel, cfg, exc)
            return None

    # the tl.dot shapes of each tile combination (at one warp/stage setting) for the pre-score
    shapes: dict[tuple, ResourceEstimate | None] = {}
    pre = []
    for cfg in enumerate_configs(space):
        if cfg.key == current:
            continue
        if space.uses_dot and cfg.blocks not in shapes:
            shapes[cfg.blocks] = estimated(cfg)
        rough = shapes.get(cfg.blocks)
        pre.append((score_config(cfg, space, weights, problem, sms, rough)[0], cfg))
    pre.sort(key=lambda x: -x[0])
    ranked, dropped = [], []
    for _, cfg in pre[:ESTIMATED]:
        est = estimated(cfg)
        if est is not None:
            fit, over, maybe = check_estimate(est, limits)
            shared_maybe = [r for r in maybe if r[0] == "shared"]
            if fit is Fit.OVER or shared_maybe:
                bad = over or tuple(shared_maybe)
                dropped.append(DroppedConfig(cfg, "; ".join(r for _, r in bad),
                                             tuple(dict.fromkeys(k for k, _ in bad))))
                continue
        score, why = score_config(cfg, space, weights, problem, sms, est, limits)
        ranked.append(RankedConfig(cfg, score, why))
    ranked.sort(key=lambda r: -r.score)
    return ranked, dropped


__all__ = ["DroppedConfig", "LaunchConfig", "RankedConfig", "SiteSpace", "autotune_space",
           "enumerate_configs",
           "occupancy", "problem_elements", "rank_site", "score_config", "site_space"]
