"""The default proposer: profiling-guided rules over the transform library, no LLM needed.

Each round it looks at the incumbent's launch sites (``analyze``), lists the moves the transforms
can make (block sizes up and down, tile sizes a wrapper takes as parameters, num_warps,
num_stages, pipelining, hints, swizzle, persistent grid), scores each move by what the diagnosis
says and by what is static common sense (a 1-D block of 4 elements wastes a GPU), and returns the
best few that are new. The loop's rounds make this a greedy coordinate search: round 1 moves the
block size, round 2 tunes warps from there.

Configs over the device's shared memory or registers (``search.prune``) are never returned: such
a candidate is dropped before any compile, its slot goes to the next move, and the drop waits in
``take_pruned()`` for the loop to record; widened autotune config lists leave such configs out.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import Any

from ..analyze import analyze_source
from ..analyze.model import LoopKind, ValueOrigin
from ..errors import TransformError
from ..model import Candidate, Diagnosis, HistoryEntry, ProposalContext, RepairRequest, Status
from .gemm import GEMM_SCORE, fitting_configs, gemm_move
from .prune import (
    check_source, limits_for_hardware, over_keys, prune_candidate, prune_specs, task_element_bytes,
)

# ``..transforms`` is imported inside functions: it needs libcst, which the GPU image lacks, and
# this module must import there.

log = logging.getLogger(__name__)

WARPS = (1, 2, 4, 8, 16)
STAGES = (1, 2, 3, 4, 5)
MAX_1D_BLOCK = 16384
MAX_TILE = 256


# Hints that say a tile should grow (more work, wider accesses per program) or shrink (fewer
# registers, more programs): they choose which way an autotune's tile range is extended.
GROW_HINTS = ("larger_blocks", "more_work_per_launch", "vectorize_accesses")
SHRINK_HINTS = ("reduce_registers", "avoid_spills", "more_programs")


# How far a launch site of a kernel the profiled case never launched falls in the ranking: below
# the body moves (0.2-0.4) of the kernels that ran, unless nothing else is left.
COLD_SITE_PENALTY = 0.4


def autotune_picks_of(profile: Any, analysis: Any) -> dict[str, Any]:
    """Kernel name -> the config (a ``ConfigSpec``) its autotuner picked on the profiled case,
    read from the profile's record of that call's launches (its compile stats), for every
    autotuned kernel whose tuned names all appear there."""
    from ..transforms.configs import ConfigSpec

    picks: dict[str, Any] = {}
    for stats in getattr(profile, "compile_stats", ()) or ():
        if stats.error or stats.kernel in picks or not analysis.has_kernel(stats.kernel):
            continue
        at = analysis.kernel(stats.kernel).autotune
        if at is None:
            continue
        values = dict(stats.constexprs)
        names = at.tuned_names
        if any(not isinstance(values.get(n), int) or isinstance(values.get(n), bool)
               for n in names):
            continue
        picks[stats.kernel] = ConfigSpec(tuple((n, values[n]) for n in names),
                                         stats.num_warps, stats.num_stages)
    return picks


def profiled_kernels(profile: Any) -> frozenset[str]:
    """Names of the kernels Nsight Compute saw launched (empty without an ncu profile)."""
    if profile is None or getattr(profile, "source", "") != "ncu":
        return frozenset()
    return frozenset(k.kernel for k in profile.kernels)


@dataclass(frozen=True)
class Move:
    transform: str
    params: tuple[tuple[str, Any], ...]
    score: float
    description: str


# Moves of the wrapper's host-side work, asked even in a round of configuration search alone (a
# near-roofline stop, ``ProposalContext.config_search_only``): a kernel at its roofline bounds
# none of them. kldiv_ops was 1.12x faster with its zero fill dropped on an H100 pass (engine
# f421d501e87f); diagnosed near the roofline on the next pass (engine 1018ceeea5af), its one
# round was configuration search alone and it ended "no gain" at 61 s.
HOST_SIDE_MOVES = frozenset({"drop_zero_fill", "hoist_namedtuple"})

# A move that made an earlier incumbent this much faster is tried first on the new one.
PAID_OFF = 1.02


def repeat_what_paid(moves: list[Move], history: tuple[HistoryEntry, ...]) -> list[Move]:
    """``moves`` with those that paid off on an earlier incumbent first (best speedup first).

    A round accepts one candidate; another that also made the parent faster (the same change at
    another launch site, pipelining beside num_stages) is a new candidate on the new incumbent,
    under the same description as long as its knob did not move, and without this it waits its
    ordinary turn. max_reduction's round 1 took num_warps 4 -> 8 at launch 1 (1.063x) over the
    same at launch 0 (1.041x), and its budget ran out before the two were ever combined (H100,
    2026-11-24)."""
    paid: dict[str, float] = {}
    for h in history:
        if h.status is Status.OK and h.speedup is not None and h.speedup >= PAID_OFF:
            paid[h.description] = max(paid.get(h.description, 0.0), h.speedup)
    if not paid:
        return moves
    return sorted(moves, key=lambda m: -(m.score + (1.0 + paid[m.description]
                                                     if m.description in paid else 0.0)))


def _hint_weights(diagnosis: Diagnosis | None) -> dict[str, float]:
    weights: dict[str, float] = {}
    if diagnosis is None:
        return weights
    for h in diagnosis.hints:
        weights[h.kind] = max(weights.get(h.kind, 0.0), h.priority)
    return weights


def _block_moves(knobs: Any, hints: dict[str, float]) -> list[Move]:
    moves = []
    for c in knobs.tunable_constexprs:
        if not c.block_like or not isinstance(c.value, int) or c.value <= 0:
            continue
        # A tile has other block dimensions beside this one (block-like, computed at run time,
        # or named like a block size): growing it multiplies the per-program footprint.
        others = [k for k in knobs.constexprs if k.name != c.name and
                  (k.block_like or k.value is None or "BLOCK" in k.name.upper())]
        tiled = bool(others)
        cap = MAX_TILE if tiled else MAX_1D_BLOCK
        if any(k.value is None for k in others):
            cap = min(cap, c.value * 8)    # an unknown companion size: only modest steps
        small = c.value < (32 if tiled else 256)
        grow = 0.6 + 0.3 * small + 0.3 * max(hints.get("larger_blocks", 0), hints.get("more_work_per_launch", 0))
        shrink = 0.3 + 0.3 * max(hints.get("more_programs", 0), hints.get("reduce_registers", 0))
        factors = [f for f in (2, 4, 8, 16, 32, 64, 128, 256) if c.value * f <= cap]
        rank = {f: i for i, f in enumerate(_spread([*reversed(factors)]))}
        for factor in factors:
            new = c.value * factor
            # small blocks: the biggest jump first, then the smallest and the middle, so one
            # round spans the ladder (three jumps of 8 -> 64..256 were all slower on
            # multinomial_sampling, 1 -> 64..128 on index_select_cat, H100, and no smaller step
            # was ever tried); otherwise one step at a time
            score = grow + (0.18 - 0.02 * rank[factor] if small else -0.05 * factor.bit_length())
            moves.append(Move("constexpr_override", (("name", c.name), ("value", new), ("site", knobs.site)),
                              score, f"{c.name} {c.value} -> {new} at launch {knobs.site}"))
        if c.value >= 32:
            moves.append(Move("constexpr_override", (("name", c.name), ("value", c.value // 2),
                                                     ("site", knobs.site)),
                              shrink, f"{c.name} {c.value} -> {c.value // 2} at launch {knobs.site}"))
    return moves


def _spread(values: list) -> list:
    """``values`` reordered to cover their range early: the first, the last, then each time the
    one farthest (by position) from those already taken, ties to the earlier position."""
    if len(values) <= 2:
        return list(values)
    order = [0, len(values) - 1]
    while len(order) < len(values):
        best = max((i for i in range(len(values)) if i not in order),
                   key=lambda i: (min(abs(i - j) for j in order), -i))
        order.append(best)
    return [values[i] for i in order]


# Tile sizes to try where the launching function takes the block size as a parameter: its value
# is the caller's, unknown here, so a few sizes that suit most GPUs, best guess first.
PARAM_TILES_2D = (64, 128, 32)       # beside other tile sizes (capped at MAX_TILE)
PARAM_TILES_1D = (1024, 4096, 256)


def _param_block_moves(knobs: Any, function: str | None, hints: dict[str, float],
                       seen: set[tuple[str, str]]) -> list[Move]:
    """Tile sizes the launching function takes from its caller (``param_block_override`` pins
    them). Scored below the literal block moves (the current size is unknown, so a move may not
    grow it) and above num_stages; ``seen`` keeps one set per function and parameter when
    several launches share it."""
    moves = []
    if function is None:
        return moves
    grow = max(hints.get("larger_blocks", 0), hints.get("more_work_per_launch", 0))
    shrink = max(hints.get("more_programs", 0), hints.get("reduce_registers", 0))
    for c in knobs.constexprs:
        if c.origin is not ValueOrigin.COMPUTED or not c.block_like \
                or not c.source.isidentifier() or (function, c.source) in seen:
            continue
        seen.add((function, c.source))
        tiled = any(k.name != c.name and (k.block_like or "BLOCK" in k.name.upper())
                    for k in knobs.constexprs)
        sizes = [v for v in PARAM_TILES_2D if v <= MAX_TILE] if tiled else list(PARAM_TILES_1D)
        for rank, new in enumerate(sizes):
            # the first (middle) size leads; a hint to grow or shrink lifts the others a little
            nudge = grow if new > sizes[0] else shrink if new < sizes[0] else 0.0
            score = 0.55 - 0.05 * rank + 0.05 * nudge
            moves.append(Move("param_block_override",
                              (("name", c.name), ("value", new), ("site", knobs.site)), score,
                              f"{c.name} (wrapper parameter) -> {new} at launch {knobs.site}"))
    return moves


def _launch_moves(knobs: Any, hints: dict[str, float], uses_dot: bool = False,
                  pipelined: bool = True) -> list[Move]:
    """num_warps and num_stages neighbours (more warps first when the kernel spills). A kernel
    with ``tl.dot`` keeps at least 4 warps: on
    Hopper a warpgroup MMA needs 4, and with fewer the tile's accumulators spill (num_warps 8 -> 1
    on attention_forward_triton ran 100x slower, H100, 2026-11-23). ``num_stages`` only pipelines
    loads inside loops: a kernel with none (``pipelined`` False) gets no num_stages moves, which
    would compile to the same code and spend a timing slot each."""
    moves = []
    warps = knobs.num_warps if knobs.num_warps else 4
    for w in WARPS:
        if w == warps or (uses_dot and w < 4):
            continue
        score = 0.45 + 0.2 * hints.get("more_parallelism", 0) - 0.05 * abs(w.bit_length() - warps.bit_length())
        if w > warps:
            # a tile spread over more threads holds fewer elements per thread: the first move
            # against spills of a whole tile in registers (int8_quantization's 128x512 fp32 tile
            # over 4 warps, 38 KB of spills per thread, H100)
            score += 0.3 * hints.get("avoid_spills", 0)
        moves.append(Move("launch_params", (("num_warps", w), ("site", knobs.site)), score,
                          f"num_warps {warps} -> {w} at launch {knobs.site}"))
    stages = knobs.num_stages if knobs.num_stages else 3
    for s in STAGES if pipelined else ():
        if s == stages:
            continue
        score = 0.35 - 0.05 * abs(s - stages)
        moves.append(Move("launch_params", (("num_stages", s), ("site", knobs.site)), score,
                          f"num_stages {stages} -> {s} at launch {knobs.site}"))
    return moves


def _loops_with_loads(kernel: Any) -> bool:
    return any(loop.loads > 0 and loop.kind is not LoopKind.STATIC_RANGE for loop in kernel.loops)


def _may_pipeline(analysis: Any, kernel_name: str) -> bool:
    """Whether num_stages can change ``kernel_name``'s code: it (or a jit helper it may call,
    conservatively any jit function in the file that no launch site names) loops over loads."""
    launched = {k.kernel for k in analysis.knobs}
    return any(_loops_with_loads(k) for k in analysis.kernels
               if k.name == kernel_name or k.name not in launched)


def _body_moves(hints: dict[str, float]) -> list[Move]:
    # A whole row held in registers spills or starves occupancy (batched_gemv, fp16, N=8192,
    # sm_90 static compile, triton 3.6: 255 registers and 608 B of spills with every argument
    # 16-divisible; streamed in chunks of 256: 32 registers, none): proposed only then.
    spilling = max(hints.get("reduce_registers", 0), hints.get("avoid_spills", 0))
    streaming = [Move("streaming_reduction", (("chunk", 256),), 0.75 + 0.25 * spilling,
                      "streaming reduction over the row (chunks of 256)")] if spilling else []
    # several short rows per program: for row kernels whose block is the row (it cannot grow),
    # launched one program per row; too little work per program is the case it is for
    # (dequantize_rowwise: one 128-byte row per program, five times its DRAM roofline, H100)
    more_work = max(hints.get("larger_blocks", 0), hints.get("more_work_per_launch", 0))
    rows = [Move("rows_per_program", (("elements", e),), score + 0.3 * more_work,
                 f"several rows per program ({e} elements)")
            for e, score in ((2048, 0.38), (8192, 0.3))]
    return streaming + rows + [
        Move("loop_pipelining", (("num_stages", 3),), 0.4, "pipeline loops over loads (3 stages)"),
        Move("offset_hints", (), 0.3 + 0.3 * hints.get("vectorize_accesses", 0),
             "contiguity/divisibility hints on block offsets"),
        Move("cache_hints", (("policy", "evict_first"),), 0.2, "evict_first on streamed loads"),
        # a load that a loop re-issues unchanged (transforms.loops): one fewer memory access per
        # iteration, most worth it where memory is the bound
        Move("hoist_invariant_loads", (), 0.45 + 0.2 * hints.get("vectorize_accesses", 0),
             "loop-invariant loads moved in front of their loop"),
        Move("static_unroll", (("max_trips", 16),), 0.3 + 0.2 * hints.get("fewer_barriers", 0),
             "short constant-bound loops unrolled (tl.static_range)"),
        Move("pid_swizzle", (("group_size", 8),), 0.3 + 0.4 * hints.get("swizzle_program_ids", 0),
             "grouped program ordering (GROUP_SIZE_M=8)"),
        # fewer, longer programs: for a partial last wave, and for programs too small to pay
        # for their scheduling where the block cannot grow (a whole row per program, BLOCK =
        # next_power_of_2(N): destindex_copy and dequantize_rowwise, H100, "too little work per
        # program", had nothing left to try after num_warps and eviction hints)
        Move("persistent_grid", (), 0.2 + 0.3 * max(hints.get("balance_waves", 0),
                                                    hints.get("larger_blocks", 0),
                                                    hints.get("more_work_per_launch", 0)),
             "persistent grid: a few programs per SM"),
    ]


def _gemm_moves(source: str, analysis: Any, kernel: str) -> list[Move]:
    """Whole Hopper-sized GEMM tiles for a tl.dot kernel whose configs are all small
    (``search.gemm``); none when its M/N/K tiles cannot be told apart or it has large ones."""
    move = gemm_move(source, analysis, kernel)
    if isinstance(move, str):
        log.debug("no GEMM tiles for %s: %s", kernel, move)
        return []
    return [Move(move.transform, move.params, GEMM_SCORE, move.description)]


# a launch that no longer fits the kernel's signature (constexprs it must now pass, or passes twice)
_CALL_SIGNATURE = re.compile(r"missing \d+ required (positional|keyword-only) argument|"
                             r"got an unexpected keyword argument|got multiple values for argument|"
                             r"Conflicting meta-parameters")


class RuleProposer:
    """Profiling-guided rule proposer over ``tritonforge.transforms`` (needs libcst)."""

    name = "rules"

    def __init__(self, max_site_moves: int = 64, prune: bool = True):
        self.max_site_moves = max_site_moves
        self.prune = prune
        self._pruned: list = []
        self._pins: dict[str, dict] = {}     # launch-site pins proposed: hash -> their params

    def take_pruned(self) -> list:
        """The ``search.prune.Pruned`` records of the candidates dropped since the last call."""
        out, self._pruned = self._pruned, []
        return out

    def _fitting_configs(self, analysis, kernel: str, source: str, limits, nbytes,
                         candidates) -> list | None:
        """The configs ``candidates(kernel_info, specs)`` makes from ``kernel``'s autotune list
        that may fit the device, at most 8 (None: the list cannot be read, let the transform
        say why; [] : none fits)."""
        from ..transforms.autotune_widen import existing_specs

        info = analysis.kernel(kernel)
        specs = existing_specs(info)
        if isinstance(specs, str):
            return None
        kept, dropped = prune_specs(source, kernel, candidates(info, specs), limits, nbytes)
        for d in dropped:
            log.info("autotune config of %s left out: %s", kernel, d)
        return kept[:8]

    def _widen_configs(self, analysis, kernel: str, source: str, limits, nbytes) -> list | None:
        """Launch-option neighbours of ``kernel``'s autotune configs that may fit the device."""
        from ..transforms.configs import widen

        return self._fitting_configs(analysis, kernel, source, limits, nbytes,
                                     lambda info, specs: widen(specs, 16,
                                                               stages=bool(info.loops)))

    def _block_configs(self, analysis, kernel: str, source: str, limits, nbytes,
                       hints: dict[str, float]) -> list | None:
        """Tile sizes past ``kernel``'s autotune range that may fit the device ([] : none fits,
        and only the key may change). The diagnosis picks the direction: each config costs the
        autotuner a compile and a benchmark per key value (22 configs over 14 values of a
        constexpr key held a final check for minutes, H100), so a kernel told to shrink its
        tiles does not also try growing them, and the reverse."""
        from ..transforms.configs import extend_block_range

        grow = any(hints.get(h, 0) > 0 for h in GROW_HINTS)
        shrink = any(hints.get(h, 0) > 0 for h in SHRINK_HINTS)
        steps = {"down_steps": 0} if grow and not shrink else \
            {"up_steps": 0} if shrink and not grow else {}
        return self._fitting_configs(
            analysis, kernel, source, limits, nbytes,
            lambda info, specs: extend_block_range(info, specs, 16, **steps))

    def moves(self, source: str, diagnosis: Diagnosis | None,
              profiled: frozenset[str] = frozenset(), picks: dict | None = None) -> list[Move]:
        """Every move, best first. ``profiled``: the kernels Nsight Compute saw launched on the
        profiled performance case; a launch site of any other kernel is ranked down
        (``COLD_SITE_PENALTY``), not dropped, since other cases may launch it (max_reduction's
        file has three kernels and its perf script times one: five of six candidates moved the
        other two, H100, 2026-11-23). ``picks``: kernel -> the config its autotuner chose on the
        profiled case (``autotune_picks_of``), which ``autotune_pin`` may pin."""
        from ..transforms import get as get_transform

        analysis = analyze_source(source)
        hints = _hint_weights(diagnosis)
        moves: list[Move] = []
        pinned: set[tuple[str, str]] = set()
        gemm_seen: set[str] = set()
        for knobs in analysis.knobs:
            start = len(moves)
            self._site_moves(analysis, knobs, hints, pinned, moves, picks or {})
            if knobs.kernel not in gemm_seen:
                gemm_seen.add(knobs.kernel)
                moves += _gemm_moves(source, analysis, knobs.kernel)
            if profiled and knobs.kernel not in profiled:
                moves[start:] = [replace(m, score=m.score - COLD_SITE_PENALTY)
                                 for m in moves[start:]]
        moves += _body_moves(hints)
        # a fill kernel whose zeros the kernel overwrites: a sure, small win wherever the
        # kernels are (transforms.zero_fill; kldiv_ops' per-row loss buffer)
        if get_transform("drop_zero_fill").applies(analysis):
            moves.append(Move("drop_zero_fill", (), 0.9,
                              "torch.zeros -> torch.empty for buffers a kernel only writes"))
        # host work after the launches is timed once it outlasts the kernels (transforms.host_hoist)
        if get_transform("hoist_namedtuple").applies(analysis):
            moves.append(Move("hoist_namedtuple", (), 0.85,
                              "build the wrapper's namedtuple class once, at import"))
        if "near_roofline" in hints:
            moves = [m for m in moves if m.score >= 0.6]   # only big, likely moves are worth time
        return sorted(moves, key=lambda m: -m.score)

    def _site_moves(self, analysis, knobs, hints: dict[str, float], pinned: set[tuple[str, str]],
                    moves: list[Move], picks: dict) -> None:
        """The moves of one launch site, appended to ``moves``."""
        if knobs.autotuned:
            if knobs.kernel in picks:
                # the autotuner's own pick on the case that weighs most, passed at the launch:
                # no tuning per process, no host-side lookup per call (a plainer rival of the
                # autotune-list moves, which the final check may find tuned differently)
                pick = picks[knobs.kernel]
                values = ", ".join(f"{n}={v}" for n, v in pick.kwargs)
                moves.append(Move("autotune_pin", (("kernel", knobs.kernel), ("config", pick)),
                                  0.55, f"pin {knobs.kernel}'s autotuned config ({values}"
                                  f"{', ' if values else ''}num_warps={pick.num_warps}, "
                                  f"num_stages={pick.num_stages})"))
            # the sizes the key leaves out, alone: with key=[] the autotuner picks once, on the
            # first size a process calls, for every size (chunk_cumsum_kernel, H100 pass of
            # engine a98c89303aa9: a config the search added to that list was 85.6% slower on one
            # size in the fresh-process final check, which had tuned on another size first)
            from ..transforms.configs import missing_key_names

            tuned = analysis.kernel(knobs.kernel) if analysis.has_kernel(knobs.kernel) else None
            names = missing_key_names(tuned) if tuned is not None else []
            if names:
                moves.append(Move("autotune_blocks", (("kernel", knobs.kernel), ("max_new", 0)),
                                  0.66, f"key @triton.autotune of {knobs.kernel} on "
                                  f"{', '.join(names)} (sizes its key leaves out)"))
            # tile sizes past the listed range first: a hand-written list often covers one
            # size only (max_kernel's BLOCK_M 8-32 on a one-row input; chunk cumsum's BT
            # 16-64 with key=[] on 32768-long rows); then launch options around the list
            moves.append(Move("autotune_blocks", (("kernel", knobs.kernel),), 0.62,
                              f"extend the tile sizes of @triton.autotune of {knobs.kernel}"))
            moves.append(Move("autotune_widen", (("kernel", knobs.kernel),), 0.5,
                              f"widen @triton.autotune of {knobs.kernel}"))
            return
        moves += _block_moves(knobs, hints)
        moves += _param_block_moves(knobs, analysis.site(knobs.site).function, hints, pinned)
        known = analysis.has_kernel(knobs.kernel)
        dot = known and analysis.kernel(knobs.kernel).uses_dot
        moves += _launch_moves(knobs, hints, uses_dot=dot,
                               pipelined=not known or _may_pipeline(analysis, knobs.kernel))

    def propose(self, context: ProposalContext) -> list[Candidate]:
        from ..transforms import get

        source = context.incumbent.source
        analysis = analyze_source(source)
        tried = {h.candidate for h in context.history} | {context.incumbent.hash}
        limits = limits_for_hardware(context.hardware)
        nbytes = task_element_bytes(context.task)
        parent_over = over_keys(check_source(source, limits, nbytes)) if self.prune else set()
        out: list[Candidate] = []
        per_knob: dict[tuple[str, str], int] = {}
        picks = autotune_picks_of(context.profile, analysis) if context.profile else {}
        moves = repeat_what_paid(self.moves(source, context.diagnosis,
                                            profiled_kernels(context.profile), picks),
                                 context.history)
        if context.config_search_only:
            # a near-roofline round belongs to the config search, but for the wrapper's host-side
            # moves, which no roofline of the kernels bounds (HOST_SIDE_MOVES)
            moves = [m for m in moves if m.transform in HOST_SIDE_MOVES]
        for move in moves:
            if len(out) >= context.budget:
                break
            # keep a round diverse: not only one knob's values. The key is the first parameter's
            # value: a block parameter's name, a kernel, but for launch options the warp or stage
            # count itself, so warp counts are not capped together. Left so on purpose: warp
            # counts won cross_entropy1 (1.40x) and cosine_compute (2.80x) in round 1, and a cap
            # of 3 would have moved a fourth one to round 2 in 12 of the 40 records (H100).
            knob = (move.transform, str(move.params[0][1]) if move.params else "")
            if per_knob.get(knob, 0) >= max(2, context.budget // 2):
                continue
            transform = get(move.transform)
            params = dict(move.params)
            if self.prune and move.transform == "autotune_widen":
                configs = self._widen_configs(analysis, params["kernel"], source, limits, nbytes)
                if configs == []:
                    continue
                if configs is not None:
                    params["configs"] = configs
            if self.prune and move.transform in ("autotune_blocks", "autotune") \
                    and "configs" in params:
                # explicit configs (whole GEMM tiles): those over the device are left out
                fit = fitting_configs(move.transform, params["kernel"], params["configs"],
                                      source, limits, nbytes)
                if fit is None:
                    continue
                params["configs"] = fit
            elif self.prune and move.transform == "autotune_blocks" and params.get("max_new") != 0:
                configs = self._block_configs(analysis, params["kernel"], source, limits, nbytes,
                                              _hint_weights(context.diagnosis))
                if configs is not None:
                    params["configs"] = configs
            if not transform.applies(analysis, **params):
                continue
            try:
                new = transform.apply(source, analysis, **params)
            except TransformError as exc:
                log.debug("%s did not apply: %s", move.description, exc)
                continue
            cand = Candidate(new, f"rules:{move.transform}", context.incumbent.hash, move.description)
            if new == source or cand.hash in tried:
                continue
            tried.add(cand.hash)
            pruned = prune_candidate(cand, source, limits, nbytes, parent_over_keys=parent_over) \
                if self.prune else None
            if pruned is not None:
                log.info("pruned %s: %s", move.description, pruned.reason)
                self._pruned.append(pruned)
                continue
            per_knob[knob] = per_knob.get(knob, 0) + 1
            if move.transform == "autotune_pin":
                self._pins[cand.hash] = params
            out.append(cand)
        return out

    def repair(self, request: RepairRequest) -> Candidate | None:
        """A launch-site pin that a caller this source does not show broke (its launches pass
        no tile sizes: dequantize_matmul's test section, H100, 2026-11-24) comes back as the
        same config pinned inside a one-config ``@triton.autotune``, which every caller takes.
        Other repairs are literal edits in ``search.repair``, tried before any proposer's."""
        from ..transforms import get

        params = self._pins.get(request.candidate.hash)
        if params is None or not _CALL_SIGNATURE.search(request.error):
            return None
        source = request.context.incumbent.source
        pin = get("autotune_pin")
        analysis = analyze_source(source)
        keep = {**params, "keep_decorator": True}
        if not pin.applies(analysis, **keep):
            return None
        try:
            new = pin.apply(source, analysis, **keep)
        except TransformError:
            return None
        return Candidate(new, "repair:rules:autotune_pin", request.context.incumbent.hash,
                         f"{request.candidate.description}, kept as a one-config @triton.autotune "
                         "(a launch this source does not show passes no config)")
