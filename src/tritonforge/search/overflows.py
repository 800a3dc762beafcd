"""Launch configs the GPU compiler refused for shared memory, learned within a record (search side).

The static estimate (``search.prune``) cannot size a tile the wrapper computes at run time. On
four H200s (engine b5d2db76c1e1, 2026-11-28) context_attn_bloom's config search proposed
num_stages 3, 4 and 5 for its one launch in round 1, alone and with other num_warps, and every
one failed to compile (out of resource: shared memory, Required 256-450 KiB of the 227 KiB an
H200 block has); round 2 proposed more of them: 19 of the record's candidates failed to compile
so, each a verification slot.

A candidate whose compile ran out of shared memory by ``MARGIN`` or more, and which differs from
the round's base at one launch alone, teaches that the launch's shape fails at its num_stages:
the shape is the whole module's code with every launch's ``num_warps=`` and ``num_stages=``
values left out (so the tiles a wrapper computes are the same computation), and the launch's
place. A later candidate whose launch has that shape and as many stages or more is pruned before
compiling (``learned_overflow``); its num_warps may differ (a block's shared memory is its tiles
times its stages; the margin covers the rest), but a failure at stages the base compiled with is
its num_warps', and teaches nothing. Any other change to the code, a launch whose num_stages is
not a literal, an autotuned kernel: nothing learned, nothing pruned.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

from ..analyze import analyze_source
from ..analyze.model import SourceAnalysis

MARGIN = 1.1       # learned only where the compile asked this much of the limit or more
_REQUIRED = re.compile(r"Required: (\d+), Hardware limit: (\d+)")


@dataclass(frozen=True)
class Overflow:
    """A launch shape (``_launches``) whose compile ran out of shared memory at ``stages``."""
    kernel: str
    site: int
    shape: str
    stages: int
    required: int
    limit: int

    def covers(self, shape: str, stages: int | None) -> bool:
        return shape == self.shape and stages is not None and stages >= self.stages


def shared_overflow(message: str) -> tuple[int, int] | None:
    """(bytes required, the limit) of a compile error out of shared memory by ``MARGIN`` or
    more; None for any other message."""
    m = _REQUIRED.search(message or "")
    if m is None or "shared memory" not in message:
        return None
    required, limit = int(m.group(1)), int(m.group(2))
    return (required, limit) if limit > 0 and required >= MARGIN * limit else None


class _NoLaunchKnobs(ast.NodeTransformer):
    """Every call's ``num_warps=`` / ``num_stages=`` value replaced by 0."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        for kw in node.keywords:
            if kw.arg in ("num_warps", "num_stages"):
                kw.value = ast.Constant(0)
        return node


@lru_cache(maxsize=64)       # a round asks it of its base once per candidate
def _launches(source: str) -> dict[tuple[str, int], tuple[str | None, int | None, int | None]]:
    """(kernel, site) -> (shape, num_stages, num_warps) of every launch of ``source``: the shape
    is the whole module's code with every launch's options left out, and the launch's place
    (two launches never share a shape); None for an autotuned kernel's launch (its configs
    choose its stages). Read-only: the result is cached."""
    try:
        analysis: SourceAnalysis = analyze_source(source)
        tree = ast.parse(source)
    except Exception:  # noqa: BLE001 - a source that does not parse teaches nothing
        return {}
    code = ast.dump(_NoLaunchKnobs().visit(tree))
    out = {}
    for site in analysis.launch_sites:
        k = site.knobs
        shape = None if k is None or k.autotuned else hashlib.sha256(
            f"{site.kernel}:{site.index}:{code}".encode()).hexdigest()[:24]
        out[(site.kernel, site.index)] = (shape, k.num_stages if k else None,
                                          k.num_warps if k else None)
    return out


def learn_overflow(source: str, base_source: str, message: str) -> Overflow | None:
    """What a candidate (``source``) that failed to compile with ``message`` teaches, against the
    round's base it was proposed from; None where nothing is learned (module docstring)."""
    needed = shared_overflow(message)
    if needed is None:
        return None
    mine, base = _launches(source), _launches(base_source)
    changed = [key for key, launch in mine.items() if base.get(key) != launch]
    if len(changed) != 1 or set(mine) != set(base):
        return None
    (kernel, site), = changed
    shape, stages, _ = mine[(kernel, site)]
    b_shape, b_stages, _ = base[(kernel, site)]
    if shape is None or stages is None:
        return None
    if shape == b_shape and b_stages is not None and b_stages >= stages:
        return None      # the base compiled with as many stages: its num_warps overflowed
    return Overflow(kernel, site, shape, stages, *needed)


def learned_overflow(source: str, base_source: str, learned: list[Overflow]) -> str | None:
    """Why ``source`` would run out of shared memory as a learned config did (a reason for its
    pruning), or None. A launch the base has in the same shape with as many stages is never
    pruned on it: the base compiled."""
    if not learned:
        return None
    base = _launches(base_source)
    for key, (shape, stages, _) in _launches(source).items():
        if shape is None:
            continue
        b_shape, b_stages, _ = base.get(key, (None, None, None))
        for o in learned:
            if o.covers(shape, stages) and not o.covers(b_shape or "", b_stages):
                return (f"{o.kernel} launch {o.site}: num_stages={stages} with the tiles of a "
                        f"config whose compile ran out of shared memory at num_stages={o.stages} "
                        f"in this record (required {o.required // 1024} KiB, "
                        f"{o.limit // 1024} KiB allowed)")
    return None
