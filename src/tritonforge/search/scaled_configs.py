"""Configs that scale what the user's code computes (driver side), for the config search: tile
sizes and num_warps set by ``@triton.heuristics``, and a num_warps the wrapper computes and
passes at the launch.

The launch-site space (``search.config_space``) varies literals written at a launch. Two common
kinds of kernel choose their config in code instead:

- ``@triton.heuristics({"BLOCK": heur_block, "num_warps": heur_num_warps})`` (FlagGems style):
  nothing at the launch can change the values, the heuristics overwrite what the call passes.
  The config is a factor per scalable key (``transforms.heuristic_scale``): tiles x2, /2, x4,
  /4, num_warps x2, /2, each applied to what the user's rule returns. 5 of the 142 dev modules.
- ``kernel[grid](..., num_warps=nw)`` with ``nw`` computed from the sizes (a softmax's 4, 8 or
  16 by row length): the space writes literals over it, one value for every size, where a rule
  that tracks the size was the point. The config scales the expression in place
  (``transforms.launch_fast.scale_launch_option``: ``min(32, nw * 2)``). 34 of the 142 dev
  modules compute a num_warps at some launch.
- ``BLOCK = triton.next_power_of_2(n)`` passed at the launch: the same, for the tile size,
  scaled where it is computed so that the grid follows (``transforms.tile_scale``). 37 of the
  142 dev modules pass a computed tile size at some launch.

Nothing of the values is known before a run, so there is no resource estimate or model score:
configs come nearest first (one key one step, up before down, then further), and a config of
two keys after every single change. Each config says how to write itself (``apply``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from ..analyze import analyze_source
from ..errors import TransformError

# ``..transforms`` is imported inside the ``apply`` methods: it needs libcst, which the GPU image
# lacks, and this module must import there.

TILE_FACTORS = (2, -2, 4, -4)
WARP_FACTORS = (2, -2)
COMPUTED_WARP_FACTORS = (2, -2, 4, -4)
MAX_KEYS = 3            # keys varied together at most (three tiles and warps: 5*5*5*3 configs)
DOT_MIN_WARPS = 4       # a Hopper warpgroup MMA needs 4 warps: a tl.dot kernel is not halved


def _log2(factors: tuple[int, ...]) -> float:
    return sum(math.log2(abs(f)) for f in factors)


def _how(factor: int) -> str:
    """``x2`` or ``/2``."""
    return f"x{factor}" if factor > 1 else f"/{-factor}"


@dataclass(frozen=True)
class HeuristicConfig:
    """Scale factors for some of one kernel's heuristics keys."""

    kernel: str
    scales: tuple[tuple[str, int], ...]

    @property
    def key(self) -> tuple:
        return ("heuristics", self.scales)

    @property
    def order(self) -> tuple:
        return (len(self.scales), _log2(tuple(f for _, f in self.scales)),
                sum(1 for _, f in self.scales if f < 0))

    def description(self) -> str:
        return f"heuristics {', '.join(f'{k} {_how(f)}' for k, f in self.scales)} ({self.kernel})"

    def apply(self, source: str) -> str:
        """``source`` with the scaling written (TransformError when it cannot be)."""
        from ..transforms import get
        return get("heuristic_scale").apply(source, None, kernel=self.kernel, scales=self.scales)


@dataclass(frozen=True)
class ComputedWarpsConfig:
    """A factor on the num_warps a wrapper computes for one launch (``site``: its index in the
    analysis; ``ordinal``: its place among the kernel's launches, as ``launch_fast`` counts)."""

    kernel: str
    site: int
    ordinal: int
    factor: int

    @property
    def key(self) -> tuple:
        return ("computed num_warps", self.site, self.factor)

    @property
    def order(self) -> tuple:
        return (1, _log2((self.factor,)), int(self.factor < 0))

    def description(self) -> str:
        return f"num_warps (computed) {_how(self.factor)} at launch {self.site} ({self.kernel})"

    def apply(self, source: str) -> str:
        from ..transforms._scale import WARPS_MAX
        from ..transforms.launch_fast import scale_launch_option

        out = scale_launch_option(source, self.kernel, self.ordinal, "num_warps", self.factor,
                                  WARPS_MAX)
        if out is None:
            raise TransformError(f"{self.description()}: the launch writes no computed num_warps")
        return out


@dataclass(frozen=True)
class ComputedTileConfig:
    """A factor on a tile size the wrapper computes for one launch
    (``transforms.tile_scale``: scaled where it is computed, so the grid follows)."""

    kernel: str
    site: int
    name: str
    factor: int

    @property
    def key(self) -> tuple:
        return ("computed tile", self.site, self.name, self.factor)

    @property
    def order(self) -> tuple:
        return (1, _log2((self.factor,)), int(self.factor < 0))

    def description(self) -> str:
        return f"{self.name} (computed) {_how(self.factor)} at launch {self.site} ({self.kernel})"

    def apply(self, source: str) -> str:
        from ..transforms.tile_scale import scale_computed_tile

        out = scale_computed_tile(source, analyze_source(source), self.site, self.name,
                                  self.factor)
        if out is None:
            raise TransformError(f"{self.description()}: not written where it is computed, or "
                                 "the grid would not follow")
        return out


ScaledConfig = HeuristicConfig | ComputedWarpsConfig | ComputedTileConfig


def heuristic_configs(analysis: Any, kernel: str) -> list[HeuristicConfig]:
    """Every config of ``kernel``'s heuristics space, nearest first; empty when its heuristics
    set no tile size and no num_warps."""
    from ..transforms.heuristic_scale import scalable_keys

    keys = scalable_keys(analysis, kernel)[:MAX_KEYS]
    if not keys:
        return []
    dot = analysis.kernel(kernel).uses_dot
    choices = [[None] + [(k, f) for f in (WARP_FACTORS if k == "num_warps" else TILE_FACTORS)
                         if not (k == "num_warps" and dot and f < 0)]
               for k in keys]
    out = [HeuristicConfig(kernel, tuple(c for c in combo if c is not None))
           for combo in itertools.product(*choices)]
    return sorted((c for c in out if c.scales), key=lambda c: c.order)


def computed_warps_configs(analysis: Any, knobs: Any) -> list[ComputedWarpsConfig]:
    """The factors on a launch's computed num_warps, nearest first; empty where the launch
    writes a literal (or none), or the kernel is autotuned or takes num_warps from heuristics."""
    if knobs.autotuned or not knobs.num_warps_given or knobs.num_warps \
            or not analysis.has_kernel(knobs.kernel):
        return []
    kernel = analysis.kernel(knobs.kernel)
    if "num_warps" in kernel.heuristics or analysis.site(knobs.site).alias_partners:
        return []
    ordinal = [s.index for s in analysis.sites_of(knobs.kernel)].index(knobs.site)
    out = [ComputedWarpsConfig(knobs.kernel, knobs.site, ordinal, f)
           for f in COMPUTED_WARP_FACTORS if not (kernel.uses_dot and f < 0)]
    return sorted(out, key=lambda c: c.order)


def computed_tile_configs(analysis: Any, knobs: Any) -> list[ComputedTileConfig]:
    """The factors on each tile size a launch passes computed, one tile at a time, nearest first
    (whether one can be written is for ``apply``: it needs the source)."""
    if knobs.autotuned or not analysis.has_kernel(knobs.kernel) \
            or analysis.site(knobs.site).alias_partners:
        return []
    heuristics = set(analysis.kernel(knobs.kernel).heuristics)
    out = [ComputedTileConfig(knobs.kernel, knobs.site, c.name, f)
           for c in knobs.constexprs
           if c.block_like and c.origin.value == "computed" and c.name not in heuristics
           and (c.grid_follows or not c.tiles_grid)
           for f in TILE_FACTORS]
    return sorted(out, key=lambda c: c.order)


def scaled_lists(analysis: Any) -> list[tuple[str, list[ScaledConfig]]]:
    """``(kernel, its configs nearest first)`` per heuristics-sized kernel that is launched and
    per launch with a computed num_warps or computed tile sizes, in the file's order."""
    lists: list[tuple[str, list[ScaledConfig]]] = []
    for k in analysis.kernels:
        if k.heuristics and analysis.sites_of(k.name):
            configs = heuristic_configs(analysis, k.name)
            if configs:
                lists.append((k.name, list(configs)))
    for knobs in analysis.knobs:
        for configs in (computed_warps_configs(analysis, knobs),
                        computed_tile_configs(analysis, knobs)):
            if configs:
                lists.append((knobs.kernel, list(configs)))
    return lists


__all__ = ["ComputedTileConfig", "ComputedWarpsConfig", "HeuristicConfig", "ScaledConfig",
           "computed_tile_configs", "computed_warps_configs", "heuristic_configs", "scaled_lists"]
