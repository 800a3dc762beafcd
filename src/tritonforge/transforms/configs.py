"""Autotune config specs: a typed ``triton.Config`` and the default neighbourhoods we try.

The search engine owns config spaces; these defaults only give ``autotune`` and
``autotune_widen`` something sensible when called without explicit configs: the current launch
configuration first (so tuning can only pick something it measured as faster), then one step
in each direction per knob (block sizes x2 and /2, num_warps x2 and /2, num_stages +1 and -1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..analyze import KernelInfo
from .constexpr import check_block_value


@dataclass(frozen=True)
class ConfigSpec:
    """One ``triton.Config(kwargs, num_warps=, num_stages=)``."""

    kwargs: tuple[tuple[str, int], ...] = ()
    num_warps: int = 4
    num_stages: int = 3

    def render(self) -> str:
        items = ", ".join(f"{k!r}: {v!r}" for k, v in self.kwargs)
        return f"triton.Config({{{items}}}, num_warps={self.num_warps}, " \
               f"num_stages={self.num_stages})"

    def value(self, name: str) -> int | None:
        return dict(self.kwargs).get(name)


def _ok_block(kernel: KernelInfo, name: str, v: int) -> bool:
    return 1 <= v <= 1 << 16 and check_block_value(kernel, name, v) is None


def neighbourhood(kernel: KernelInfo, base: ConfigSpec, extra_values: dict[str, list[int]],
                  limit: int) -> list[ConfigSpec]:
    """``base`` then its one-step neighbours, deduplicated, at most ``limit``."""
    out: list[ConfigSpec] = [base]
    kw = dict(base.kwargs)

    def add(values: dict[str, int], w: int, s: int) -> None:
        if not (1 <= w <= 16 and w & (w - 1) == 0 and 1 <= s <= 6):
            return
        if any(not _ok_block(kernel, n, v) for n, v in values.items() if v != kw.get(n)):
            return
        spec = ConfigSpec(tuple((n, values[n]) for n in kw), w, s)
        if spec not in out:
            out.append(spec)

    w0, s0 = base.num_warps, base.num_stages
    for name, values in extra_values.items():
        for v in values:
            add({**kw, name: v}, w0, s0)
    for name in kw:
        add({**kw, name: kw[name] * 2}, w0, s0)
        add({**kw, name: max(kw[name] // 2, 1)}, w0, s0)
    add(kw, w0 * 2, s0)
    add(kw, max(w0 // 2, 1), s0)
    add(kw, w0, s0 + 1)
    add(kw, w0, s0 - 1)
    if kw:
        add({n: v * 2 for n, v in kw.items()}, w0 * 2, s0)
    return out[:limit]


def widen(existing: Iterable[ConfigSpec], limit: int, stages: bool = True) -> list[ConfigSpec]:
    """New launch-option variants (num_warps x2 and /2, num_stages +1 and -1) of existing configs,
    none equal to an existing one, at most ``limit``. ``stages=False`` (a kernel with no loop:
    num_stages only pipelines loops, so such configs compile to the same code, each once more
    per key) keeps num_stages as it is: max_reduction's widened list had 11 configs, 4 of them
    num_stages twins, and each config compiled anew for every size (H100, 2026-11-25)."""
    have = list(existing)
    new: list[ConfigSpec] = []
    steps = (lambda w, s: (w * 2, s), lambda w, s: (w, s + 1),
             lambda w, s: (max(w // 2, 1), s), lambda w, s: (w, s - 1))
    if not stages:
        steps = (steps[0], steps[2])
    for step in steps:              # one kind of step over every config, then the next kind,
        for c in have:              # so that a small limit still spreads over the configs
            w, s = step(c.num_warps, c.num_stages)
            spec = ConfigSpec(c.kwargs, w, s)
            if 1 <= w <= 16 and 1 <= s <= 6 and spec not in have and spec not in new:
                new.append(spec)
    return new[:limit]


# Block sizes an extended range may reach: a 1-D block (one tuned size) up to 16384 elements, a
# tile dimension beside others up to 256 (512 for a dimension the kernel loops over alone).
MAX_1D_BLOCK = 16384
MAX_TILE_DIM = 256


def range_names(kernel: KernelInfo, specs: Iterable[ConfigSpec]) -> list[str]:
    """The tuned constexprs whose range may be extended: tile sizes (``tl.arange`` bounds or
    constexprs that multiply a program id or step a loop), not group or split counts, which
    change how work is shared rather than how big a tile is."""
    names: list[str] = []
    for spec in specs:
        for name, value in spec.kwargs:
            if name in names or not isinstance(value, int) or isinstance(value, bool):
                continue
            upper = name.upper()
            if "GROUP" in upper or "SPLIT" in upper:
                continue
            if name in kernel.arange_constexprs or name in kernel.block_constexprs:
                names.append(name)
    return names


def extend_block_range(kernel: KernelInfo, existing: Iterable[ConfigSpec], limit: int,
                       down_steps: int = 3, up_steps: int | None = None) -> list[ConfigSpec]:
    """Configs whose tile sizes lie beyond the range the autotune list covers: for each tile
    size, the smallest value /2, /4, /8 (``down_steps``) and the largest x2, x4, x8 (``up_steps``),
    taken from the config that holds that extreme; a smaller tile keeps its num_warps, a bigger
    one gets them scaled up the same way. Each new config costs the autotuner a compile and a
    benchmark per key value, so the caller says which way to go when it knows (``down_steps=0``:
    grow only). A hand-written list often spans a narrow range that suits one size only:
    max_kernel's BLOCK_M in {8, 16, 32} holds 8 rows of 16384 in registers when its input has
    one row; chunk_global_cumsum's BT in {16, 32, 64} walks a 32768-long row 64 elements at a
    time. Only power-of-two values, within the kernel's rules (``check_block_value``: tl.dot
    tiles of at least 16), none already there; nearest steps first, alternating down and up, at
    most ``limit``."""
    have = list(existing)
    names = range_names(kernel, have)
    if not names:
        return []
    # a tile beside other tile sizes (set by configs, heuristics or the launch) multiplies them
    tiled = len(names) > 1 or kernel.uses_dot or \
        any(a not in names for a in kernel.arange_constexprs)
    cap = MAX_TILE_DIM if tiled else MAX_1D_BLOCK
    if up_steps is None:
        up_steps = 3 if tiled else 5
        # a companion tile set by a heuristic has a size unknown here, and may be a whole row
        # (max_kernel's BLOCK_N = next_power_of_2(N)): no step up, every slot goes down. One step
        # up (BLOCK_M 64 beside BLOCK_N 16384) compiled for over 180 s with no progress in the
        # compile pass (H100, 2026-11-25) and never ran
        if any(a not in names and a in kernel.heuristics for a in kernel.arange_constexprs):
            up_steps = 0
    per_name: list[list[ConfigSpec]] = []
    for name in names:
        with_name = [c for c in have if isinstance(c.value(name), int)]
        lo = min(with_name, key=lambda c: c.value(name))
        hi = max(with_name, key=lambda c: c.value(name))
        options: list[ConfigSpec] = []
        for step in range(1, max(down_steps, up_steps) + 1):
            ways = ((lo, 0.5 ** step),) * (step <= down_steps) + \
                ((hi, 2 ** step),) * (step <= up_steps)
            for base, factor in ways:
                v0 = base.value(name)
                new = int(v0 * factor)
                if v0 & (v0 - 1) or new < 1 or new > cap or new == v0:
                    continue
                if not _ok_block(kernel, name, new):
                    continue
                kw = tuple((n, new if n == name else v) for n, v in base.kwargs)
                # a smaller tile keeps its warps (max_kernel's one row of 16384 wants them all);
                # a bigger one gets more, so that each thread's share stays the same
                w = base.num_warps if factor < 1 else min(base.num_warps * 2 ** step, 16)
                spec = ConfigSpec(kw, w, base.num_stages)
                if spec not in have and spec not in options:
                    options.append(spec)
        per_name.append(options)
    out: list[ConfigSpec] = []
    for i in range(max((len(o) for o in per_name), default=0)):   # round-robin over the names
        for options in per_name:
            if i < len(options) and options[i] not in out:
                out.append(options[i])
    return out[:limit]


def missing_key_names(kernel: KernelInfo) -> list[str]:
    """Sizes the autotune ``key`` leaves out, so that a config tuned for one size is reused on
    every other: parameters, constexprs too, that the body compares or uses as loop bounds
    (``offs < N``, ``range(tl.cdiv(T, BT))``), less tile sizes, which no config or heuristic
    sets. ``key=[]`` tunes once per process, on whichever size comes first."""
    at = kernel.autotune
    if at is None:
        return []
    # a tensor in the key would be hashed by identity: a new tuning on every call
    skip = set(at.key) | set(at.tuned_names) | set(kernel.heuristics) | \
        set(kernel.pointer_params)
    names = [p.name for p in kernel.params
             if p.name in kernel.compared_params or p.name in kernel.compared_constexprs]
    return [n for n in names if n not in skip]
