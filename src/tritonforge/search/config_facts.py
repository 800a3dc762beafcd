"""Static facts about a kernel and its task that the config search's model reads (driver side):
which tile sizes run along a 2-D tile's contiguous axis, and how big the timed problem is."""

from __future__ import annotations

import ast
import math
from typing import Any

from ..model import SpecCall, Task, TensorSpec


def problem_elements(task: Task | None) -> int | None:
    """The largest tensor (in elements) of the task's performance cases (None without any: the
    correctness cases are small on purpose and say nothing of the grid the GPU will see)."""
    if task is None:
        return None
    cases = task.performance_cases
    best = 0

    def visit(v: Any) -> None:
        nonlocal best
        if isinstance(v, TensorSpec):
            best = max(best, math.prod(v.shape) if v.shape else 1)
        elif isinstance(v, tuple):
            for x in v:
                visit(x)

    for case in cases:
        if isinstance(case.recipe, SpecCall):
            visit(case.recipe.args)
            visit(tuple(v for _, v in case.recipe.kwargs))
    return best or None


def _arange_bound(node: ast.AST) -> str | None:
    """``X`` of ``tl.arange(0, X)`` (a name), else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "arange" and len(node.args) == 2 \
            and isinstance(node.args[1], ast.Name):
        return node.args[1].id
    return None


def contiguous_blocks(tree: ast.Module, kernel: str) -> frozenset[str]:
    """Tile constexprs that size the last (contiguous) axis of a 2-D tile in ``kernel``: ``X`` of
    ``tl.arange(0, X)[None, :]``, directly or through a name assigned an expression holding that
    arange (``cols = start + tl.arange(0, X)`` then ``cols[None, :]``)."""
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == kernel),
              None)
    if fn is None:
        return frozenset()
    through: dict[str, str] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            for sub in ast.walk(node.value):
                bound = _arange_bound(sub)
                if bound:
                    through[node.targets[0].id] = bound
    found = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) \
                and len(node.slice.elts) == 2 and isinstance(node.slice.elts[0], ast.Constant) \
                and node.slice.elts[0].value is None and isinstance(node.slice.elts[1], ast.Slice):
            bound = _arange_bound(node.value) or (
                through.get(node.value.id) if isinstance(node.value, ast.Name) else None)
            if bound:
                found.add(bound)
    return frozenset(found)


__all__ = ["contiguous_blocks", "problem_elements"]
