"""Whole GEMM tiles for ``tl.dot`` kernels: which constexprs are M, N and K, and Hopper-sized
configs over them.

A hand-written autotune list for a GEMM often fixes the K tile and the warps (bmm_optimized:
twelve configs, every one TILE_K=32 and num_warps=4). The range extension of
``transforms.configs.extend_block_range`` moves one tile size at a time; a Hopper GEMM wants
several at once: a K tile of 64 with 128-wide M/N tiles, 8 warps and 3-4 stages. Appended to
bmm_optimized's list, eight such configs measured ~1.05-1.1x on an H100 in an earlier run whose
exact list was lost; ``HOPPER_TILES``, a reconstruction of it, made bmm_optimized 1.094x faster
in the fresh-process final check (H100, 2026-11-25).

``gemm_tiles`` tells the tiles apart by a shape inference (``search.resources.estimate``) with a
distinct sentinel value per tile constexpr: the operands of every ``tl.dot`` are then
``(sentinel_M, sentinel_K) @ (sentinel_K, sentinel_N)``, so M is the accumulator's rows, N its
columns, K the shared dimension. K must also step the loop around the ``tl.dot`` (its range, a
pointer advance). Where any of this is not clear (dots of different tiles as in attention, a
dimension that is a literal or a problem size such as HEAD_DIM, a shape not followed) the
answer is no tiles, with the reason, and no move is made.
"""

from __future__ import annotations

import ast
import logging
from dataclasses import dataclass
from typing import Any

from .prune import prune_specs
from .resources import estimate

# ``..transforms`` is imported inside functions: it needs libcst, which the GPU image lacks, and
# this module must import there.

log = logging.getLogger(__name__)

# Distinct primes: a product of shapes can never be mistaken for one of them.
_SENTINELS = (7919, 7927, 7933, 7937, 7949, 7951, 7963, 7993, 8009, 8011, 8017, 8039)

# (M, N, K, num_warps, num_stages): K tile 64 with 128-wide M/N tiles, 8 warps, 3-4 stages, and
# neighbours (wider M or N, 4 warps, 64x64 for small problems), best guess first. Static sm_90
# compiles of bmm_optimized (fp16; its loads are not pipelined: no alignment hints, triton 3.6):
# 128x128x64 at 8 warps spills 32 B per thread where its own 128x128x32 at 4 warps spills 448 B;
# 64x64x64 none; the 4-warp 128-wide ones and 256x128 spill 1-2 KB (kept: they compile, and on
# a kernel that pipelines its loads they need no registers for them). A K tile of 128 at
# 128x128 spilled 2.5 KB and is left out.
HOPPER_TILES: tuple[tuple[int, int, int, int, int], ...] = (
    (128, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 256, 64, 8, 3),
    (256, 128, 64, 8, 3),
    (128, 128, 64, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (64, 64, 64, 4, 3),
)

# A config is already "large" (the kernel needs no Hopper configs) with a K tile of 64 or more
# and 8 warps or more.
LARGE_K = 64
LARGE_WARPS = 8


@dataclass(frozen=True)
class GemmTiles:
    """The constexprs of ``kernel`` that size its ``tl.dot``: rows (``m``) and columns (``n``)
    of the accumulator and the reduction tile (``k``); all None, with ``reason``, when they
    cannot be told apart with confidence."""

    kernel: str
    m: str | None = None
    n: str | None = None
    k: str | None = None
    reason: str = ""

    @property
    def found(self) -> bool:
        return self.m is not None and self.n is not None and self.k is not None


def _no(kernel: str, reason: str) -> GemmTiles:
    return GemmTiles(kernel, reason=reason)


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name),
                None)


def _is_dot(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr == "dot"


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _jit_calls(tree: ast.Module, fn: ast.FunctionDef) -> list[str]:
    """Names of the module's other ``@triton.jit`` functions with a ``tl.dot`` that ``fn``
    calls (an activation helper, without one, is no concern)."""
    jit = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n is not fn
           and any("jit" in ast.unparse(d) for d in n.decorator_list)
           and any(_is_dot(c) for c in ast.walk(n))}
    called = {c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call)
              and isinstance(c.func, ast.Name)}
    return sorted(jit & called)


def _k_steps_loop(fn: ast.FunctionDef, k: str) -> str | None:
    """None when ``k`` steps every loop that holds a ``tl.dot`` (the loop's range reads it,
    directly or through a name assigned from it, or the body advances something by it), else
    why not."""
    assigned: dict[str, set[str]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, set()).update(_names(node.value))
    loops = [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While))
             and any(_is_dot(c) for s in n.body for c in ast.walk(s))]
    if not loops:
        return "its tl.dot is in no loop: there is no reduction loop for a K tile to step"
    for loop in loops:
        header = loop.iter if isinstance(loop, ast.For) else loop.test
        read = _names(header)
        read |= {x for r in read for x in assigned.get(r, ())}
        if k in read:
            continue
        stepped = False
        for s in (c for b in loop.body for c in ast.walk(b)):
            if isinstance(s, ast.AugAssign) and k in _names(s.value):
                stepped = True
            elif isinstance(s, ast.Assign) and k in _names(s.value) and any(
                    isinstance(t, ast.Name) and t.id in _names(s.value) for t in s.targets):
                stepped = True          # x = tl.advance(x, (0, BLOCK_K)), x = x + BLOCK_K
        if not stepped:
            return f"{k} neither bounds nor steps the loop at line {loop.lineno}, which holds " \
                   "the tl.dot"
    return None


def gemm_tiles(source: str | ast.Module, kernel: Any, tuned: tuple[str, ...]) -> GemmTiles:
    """M, N and K of ``kernel`` (a ``KernelInfo``) among ``tuned``, the constexprs a config may
    set (an autotune's names, or the literal tile sizes at the launches)."""
    name = kernel.name
    if not kernel.uses_dot:
        return _no(name, f"{name} does not use tl.dot")
    tiles = [n for n in tuned if n in kernel.arange_constexprs or n in kernel.block_constexprs]
    if len(tiles) < 3:
        return _no(name, f"{name} has {len(tiles)} tuned tile size(s) ({', '.join(tiles)}), "
                         "a GEMM tile needs three")
    if len(tiles) > len(_SENTINELS):
        return _no(name, f"{name} has too many tile sizes")
    tree = ast.parse(source) if isinstance(source, str) else source
    fn = _function(tree, name)
    if fn is None:
        return _no(name, f"{name} was not found in the source")
    by_value = dict(zip(_SENTINELS, tiles))
    try:
        e = estimate(tree, name, {n: v for v, n in by_value.items()})
    except Exception as exc:  # noqa: BLE001 - odd code is a reason, not a crash
        return _no(name, f"the shape inference stopped: {type(exc).__name__}: {exc}")
    if e is None or not e.dots:
        return _no(name, f"no tl.dot of {name} has operand shapes the inference follows")
    written = sum(_is_dot(c) for c in ast.walk(fn))
    if written != len(e.dots):
        return _no(name, f"{len(e.dots)} of the {written} tl.dot calls of {name} have operand "
                         "shapes the inference follows")
    helpers = _jit_calls(tree, fn)
    if helpers:
        return _no(name, f"{name} calls the jit function(s) {', '.join(helpers)}, whose tl.dot "
                         "tiles are not read")
    found = {(by_value.get(d.m), by_value.get(d.n), by_value.get(d.k)) for d in e.dots}
    if len(found) > 1:
        return _no(name, f"{name}'s tl.dots are sized by different tiles "
                         f"({sorted(str(f) for f in found)}): not one GEMM")
    m, n, k = found.pop()
    if m is None or n is None or k is None:
        d = e.dots[0]
        shown = [by_value.get(v, str(v)) for v in (d.m, d.k, d.n)]
        return _no(name, f"{name}'s tl.dot is ({shown[0]} x {shown[1]}) @ ({shown[1]} x "
                         f"{shown[2]}): a dimension is not a tuned tile size")
    if len({m, n, k}) < 3:
        return _no(name, f"{name}'s tl.dot uses {m}, {n}, {k}: one tile sizes two dimensions")
    why = _k_steps_loop(fn, k)
    if why:
        return _no(name, why)
    return GemmTiles(name, m, n, k)


def is_large(spec: Any, tiles: GemmTiles) -> bool:
    """Whether a ``ConfigSpec`` is already Hopper-sized: K tile >= 64 and num_warps >= 8."""
    kv = spec.value(tiles.k)
    return isinstance(kv, int) and kv >= LARGE_K and spec.num_warps >= LARGE_WARPS


def hopper_configs(tiles: GemmTiles, existing: list[Any]) -> list[Any]:
    """``HOPPER_TILES`` as ``ConfigSpec``s over ``existing``'s names (their other values taken
    from the existing config with the widest M x N tile), none already there; [] when
    ``tiles`` were not found or a config there is already large."""
    from ..transforms.configs import ConfigSpec

    if not tiles.found or not existing or any(is_large(c, tiles) for c in existing):
        return []
    full = [c for c in existing if all(isinstance(c.value(t), int)
                                       for t in (tiles.m, tiles.n, tiles.k))]
    if not full:
        return []
    base = max(full, key=lambda c: (c.value(tiles.m) * c.value(tiles.n), c.num_warps))
    out: list[Any] = []
    for m, n, k, w, s in HOPPER_TILES:
        new = {tiles.m: m, tiles.n: n, tiles.k: k}
        spec = ConfigSpec(tuple((name, new.get(name, v)) for name, v in base.kwargs), w, s)
        if spec not in existing and spec not in out:
            out.append(spec)
    return out


# Ahead of the autotune range extension (0.62) and the pin (0.55): a kernel whose configs are
# all small gets whole Hopper tiles before one tile size is moved at a time.
GEMM_SCORE = 0.7


@dataclass(frozen=True)
class GemmMove:
    """Hopper-sized configs for one kernel: appended to its ``@triton.autotune``
    (``transform`` "autotune_blocks") or, for a kernel launched with literal tiles, an autotune
    injected over the launch's own config and them (``transform`` "autotune", the launch's
    config first in ``configs``)."""

    transform: str
    kernel: str
    tiles: GemmTiles
    configs: tuple[Any, ...]
    description: str

    @property
    def params(self) -> tuple[tuple[str, Any], ...]:
        if self.transform == "autotune":
            return (("kernel", self.kernel), ("names", (self.tiles.m, self.tiles.n, self.tiles.k)),
                    ("configs", self.configs))
        return (("kernel", self.kernel), ("configs", self.configs), ("key", False))


def fitting_configs(transform: str, kernel: str, configs: tuple[Any, ...], source: str,
                    limits: Any, nbytes: Any) -> tuple[Any, ...] | None:
    """A move's ``configs`` less those over the device's shared memory or registers
    (``search.prune.prune_specs``); an injected autotune's first config, the launch's own, is
    always kept. None when no new config is left."""
    own = tuple(configs[:1]) if transform == "autotune" else ()
    kept, dropped = prune_specs(source, kernel, list(configs[len(own):]), limits, nbytes)
    for d in dropped:
        log.info("GEMM config of %s left out: %s", kernel, d)
    return (*own, *kept) if kept else None


def _launch_config(analysis: Any, kernel: Any) -> tuple[tuple[str, ...], Any] | str:
    """The literal tile sizes every launch of ``kernel`` passes, and the first launch's config
    over them, or why there is none."""
    from ..transforms.configs import ConfigSpec

    sites = analysis.sites_of(kernel.name)
    if not sites or any(s.knobs is None for s in sites):
        return f"{kernel.name} is not launched in this file"
    first = sites[0].knobs
    names = tuple(c.name for c in first.constexprs if c.tunable and c.block_like
                  and isinstance(c.value, int) and not isinstance(c.value, bool)
                  and all(s.knobs.constexpr(c.name) is not None
                          and s.knobs.constexpr(c.name).tunable for s in sites))
    base = ConfigSpec(tuple((n, first.constexpr(n).value) for n in names),
                      first.num_warps or 4, first.num_stages or 3)
    return names, base


def gemm_move(source: str, analysis: Any, kernel_name: str) -> GemmMove | str:
    """The Hopper-config move for ``kernel_name``, or why there is none."""
    from ..transforms.autotune_widen import existing_specs
    from ..transforms.configs import ConfigSpec

    if not analysis.has_kernel(kernel_name):
        return f"{kernel_name} is not a kernel of this file"
    kernel = analysis.kernel(kernel_name)
    if not kernel.uses_dot:
        return f"{kernel_name} does not use tl.dot"
    if kernel.autotune is not None:
        specs = existing_specs(kernel)
        if isinstance(specs, str):
            return specs
        tiles = gemm_tiles(source, kernel, tuple(kernel.autotune.tuned_names))
        transform, own = "autotune_blocks", []
    else:
        launch = _launch_config(analysis, kernel)
        if isinstance(launch, str):
            return launch
        names, base = launch
        tiles = gemm_tiles(source, kernel, names)
        if tiles.found:         # the injected autotune tunes M, N and K alone
            base = ConfigSpec(tuple((n, base.value(n)) for n in (tiles.m, tiles.n, tiles.k)),
                              base.num_warps, base.num_stages)
        transform, specs, own = "autotune", [base], [base]
    if not tiles.found:
        return tiles.reason
    if any(is_large(c, tiles) for c in specs):
        return f"{kernel_name} already has a config with {tiles.k} >= {LARGE_K} and " \
               f"num_warps >= {LARGE_WARPS}"
    new = hopper_configs(tiles, specs)
    if not new:
        return f"{kernel_name}'s configs already hold every Hopper-sized tile"
    where = f"@triton.autotune of {kernel_name}" if transform == "autotune_blocks" else \
        f"{kernel_name}, autotuned over them and its launch config"
    return GemmMove(transform, kernel_name, tiles, (*own, *new),
                    f"Hopper-sized GEMM tiles ({tiles.m}/{tiles.n} 128, {tiles.k} 64, 8 warps) "
                    f"for {where}")


__all__ = ["GEMM_SCORE", "GemmMove", "GemmTiles", "HOPPER_TILES", "fitting_configs", "gemm_move",
           "gemm_tiles", "hopper_configs", "is_large"]
