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


def widen(existing: Iterable[ConfigSpec], limit: int) -> list[ConfigSpec]:
    """New launch-option variants (num_warps x2 and /2, num_stages +1 and -1) of existing configs,
    none equal to an existing one, at most ``limit``."""
    have = list(existing)
    new: list[ConfigSpec] = []
    steps = (lambda w, s: (w * 2, s), lambda w, s: (w, s + 1),
             lambda w, s: (max(w // 2, 1), s), lambda w, s: (w, s - 1))
    for step in steps:              # one kind of step over every config, then the next kind,
        for c in have:              # so that a small limit still spreads over the configs
            w, s = step(c.num_warps, c.num_stages)
            spec = ConfigSpec(c.kwargs, w, s)
            if 1 <= w <= 16 and 1 <= s <= 6 and spec not in have and spec not in new:
                new.append(spec)
    return new[:limit]
