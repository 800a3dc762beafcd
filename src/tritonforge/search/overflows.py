"""Launch configs the GPU compiler refused for shared memory, learned within a record (search side).

The static estimate (``search.prune``) cannot size a tile the wrapper computes at run time. On
four H200s (engine b5d2db76c1e1, 2026-11-28) context_attn_bloom's config search proposed
num_stages 3, 4 and 5 for its one launch in round 1, alone and with other num_warps, and every
one failed to compile (out of resource: shared memory, Required 320-450 KiB of the 227 KiB an
H200 block has); round 2 proposed ten more of them: 20 of the record's 42 candidates were such
compile errors, each a verification slot.

A candidate whose compile ran out of shared memory by ``MARGIN`` or more, and which differs from
the round's base at one launch alone, teaches that the launch's shape fails at its num_stages:
the shape is the kernel's code (decorators included) and the code of the function that launches
it, every launch's ``num_warps=`` and ``num_stages=`` values left out, so the tiles a wrapper
computes are the same computation. A later candidate whose launch has that shape and as many
stages or more is pruned before compiling (``learned_overflow``); its num_warps may differ (a
block's shared memory is its tiles times its stages; the margin covers the rest). A tile written
differently, a kernel changed, a launch whose num_stages is not a literal, an autotuned kernel:
nothing learned, nothing pruned.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import re
from dataclasses import dataclass

from ..analyze import analyze_source
from ..analyze.model import LaunchSite, SourceAnalysis

MARGIN = 1.1       # learned only where the compile asked this much of the limit or more
_REQUIRED = re.compile(r"Required: (\d+), Hardware limit: (\d+)")


@dataclass(frozen=True)
class Overflow:
    """A launch shape (``_shape``) whose compile ran out of shared memory at ``stages``."""
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


def _function(tree: ast.Module, qualified: str) -> ast.AST | None:
    """The function ``qualified`` names ("f", "Class.method") in ``tree``, None if not found."""
    scope: list[ast.stmt] = list(tree.body)
    node: ast.AST | None = None
    for part in qualified.split("."):
        node = next((n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                        ast.ClassDef)) and n.name == part), None)
        if node is None:
            return None
        scope = list(node.body)
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _shape(tree: ast.Module, site: LaunchSite) -> str | None:
    """The code that sets a launch's tiles, its launch options left out; None where it cannot be
    told (an autotuned kernel, a launch outside a function, a kernel not found)."""
    if site.knobs is None or site.knobs.autotuned or not site.function:
        return None
    kernel = _function(tree, site.kernel)
    wrapper = _function(tree, site.function)
    if kernel is None or wrapper is None:
        return None
    text = ast.dump(kernel) + "\n" + ast.dump(_NoLaunchKnobs().visit(copy.deepcopy(wrapper)))
    return hashlib.sha256(f"{site.kernel}:{site.index}:{text}".encode()).hexdigest()[:24]


def _launches(source: str) -> dict[tuple[str, int], tuple[str | None, int | None, int | None]]:
    """(kernel, site) -> (shape, num_stages, num_warps) of every launch of ``source``."""
    try:
        analysis: SourceAnalysis = analyze_source(source)
        tree = ast.parse(source)
    except Exception:  # noqa: BLE001 - a source that does not parse teaches nothing
        return {}
    out = {}
    for site in analysis.launch_sites:
        k = site.knobs
        out[(site.kernel, site.index)] = (_shape(tree, site), k.num_stages if k else None,
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
    if shape is None or stages is None:
        return None
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
            if (o.kernel, o.site) == key and o.covers(shape, stages) \
                    and not o.covers(b_shape or "", b_stages):
                return (f"{o.kernel} launch {o.site}: num_stages={stages} with the tiles of a "
                        f"config whose compile ran out of shared memory at num_stages={o.stages} "
                        f"in this record (required {o.required // 1024} KiB, "
                        f"{o.limit // 1024} KiB allowed)")
    return None
