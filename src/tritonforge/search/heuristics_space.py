"""The config space of a kernel whose tile sizes or num_warps come from ``@triton.heuristics``
(driver side): scale factors on what the user's heuristics return, for the config search.

A launch site can only vary what is written at the launch (``search.config_space``); a kernel
sized by its heuristics dict has nothing there, and the heuristics overwrite what the call
passes. Its space is instead a factor per scalable key (``transforms.heuristic_scale``): tiles
x4, x2, /2, /4, num_warps x2, /2, each applied to the value the user's rule computes for the
sizes at hand, so the config keeps following the sizes. Nothing of the values is known before a
run, so there is no resource estimate or model score here: configs come nearest first (one key
one step, then further), larger tiles before smaller ones (a heuristic written for small inputs
tends to under-size the large ones the timing weighs most), and a config pair of two keys after
every single change.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

TILE_FACTORS = (2, -2, 4, -4)
WARP_FACTORS = (2, -2)
MAX_KEYS = 3            # keys varied together at most (three tiles and warps: 5*5*5*3 configs)


@dataclass(frozen=True)
class HeuristicConfig:
    """Scale factors for some of one kernel's heuristics keys (see module doc)."""

    kernel: str
    scales: tuple[tuple[str, int], ...]

    @property
    def key(self) -> tuple:
        return ("heuristics", self.scales)

    @property
    def distance(self) -> float:
        """Powers of two away from the heuristics as written."""
        return sum(math.log2(abs(f)) for _, f in self.scales)

    def description(self) -> str:
        from ..transforms.heuristic_scale import describe
        return f"heuristics {describe(self.scales)} ({self.kernel})"


def _order(cfg: HeuristicConfig) -> tuple:
    downs = sum(1 for _, f in cfg.scales if f < 0)
    return (len(cfg.scales), cfg.distance, downs)


def heuristic_configs(analysis: Any, kernel: str) -> list[HeuristicConfig]:
    """Every config of ``kernel``'s heuristics space, nearest first; empty when its heuristics
    set no tile size and no num_warps."""
    from ..transforms.heuristic_scale import scalable_keys

    keys = scalable_keys(analysis, kernel)[:MAX_KEYS]
    if not keys:
        return []
    choices = [[None] + [(k, f) for f in (WARP_FACTORS if k == "num_warps" else TILE_FACTORS)]
               for k in keys]
    out = [HeuristicConfig(kernel, tuple(c for c in combo if c is not None))
           for combo in itertools.product(*choices)]
    return sorted((c for c in out if c.scales), key=_order)


__all__ = ["HeuristicConfig", "heuristic_configs"]
