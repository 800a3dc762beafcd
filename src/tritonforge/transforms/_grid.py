"""Grids that follow the block size: turn ``(triton.cdiv(n, BLOCK),)`` into a META lambda.

When autotuning picks the block size, the launch grid must be computed from the chosen config:
``lambda META: (triton.cdiv(n, META['BLOCK_SIZE']),)``. The grid as written may read the block
size through locals (``num_blocks = (n + BLOCK - 1) // BLOCK`` then ``grid = (num_blocks,)``) or
hold the literal itself (``BLOCK_SIZE=1024`` with ``triton.cdiv(n, 1024)``); both are handled by
inlining those locals into the lambda and replacing the block name (or the literal) by META.

Before doing so we check that nothing else in the function reads those names (a buffer of
partial sums sized ``num_blocks`` would no longer match the tuned grid): that is a refusal.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..analyze import LaunchSite
from ..analyze._astutil import SourceText
from ..analyze.launches import Scope, build_scope


@dataclass
class FunctionView:
    """The function that holds a launch, read with ``ast``."""

    node: ast.FunctionDef | None
    scope: Scope
    text: SourceText


def _find_function(tree: ast.Module, qualname: str | None) -> ast.FunctionDef | None:
    if not qualname:
        return None
    body = tree.body
    node = None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                          ast.ClassDef)) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def function_view(source: str, qualname: str | None) -> FunctionView:
    tree = ast.parse(source)
    fn = _find_function(tree, qualname)
    if fn is None:
        return FunctionView(None, build_scope(None, tree.body), SourceText(source))
    a = fn.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    return FunctionView(fn, build_scope(fn.name, fn.body, params), SourceText(source))


@dataclass(frozen=True)
class MetaGrid:
    """A grid rewritten as a META lambda, or the reason it could not be."""

    source: str | None
    reason: str = ""
    inlined: tuple[str, ...] = ()     # locals copied into the lambda


def _single(view: FunctionView, name: str, line: int) -> ast.expr | None:
    if name in view.scope.params:
        return None
    entries = view.scope.assigns.get(name, [])
    if len(entries) == 1 and entries[0][0] <= line and entries[0][1] is not None:
        return entries[0][1]
    return None


def _reads(view: FunctionView, name: str, line: int, seen: frozenset[str] = frozenset()) -> set[str]:
    """Names ``name`` depends on through single assignments of the function."""
    value = _single(view, name, line)
    if value is None or name in seen:
        return set()
    out = set()
    for n in ast.walk(value):
        if isinstance(n, ast.Name):
            out.add(n.id)
            out |= _reads(view, n.id, line, seen | {name})
    return out


def meta_grid(view: FunctionView, site: LaunchSite, variables: dict[str, str],
              literals: dict[int, str]) -> MetaGrid:
    """``lambda META: ...`` for the site's grid, with ``variables`` (local name -> constexpr) and
    ``literals`` (value -> constexpr) replaced by ``META['constexpr']``."""
    line = site.span.line
    grid_expr = ast.parse(site.grid.resolved, mode="eval").body
    inlined: list[str] = []
    used = {n.id for n in ast.walk(grid_expr) if isinstance(n, ast.Name)}
    meta = "META" if "META" not in used else "_META"

    def meta_key(key: str) -> ast.expr:
        return ast.Subscript(ast.Name(meta, ast.Load()), ast.Constant(key), ast.Load())

    class Sub(ast.NodeTransformer):
        def __init__(self, depth: int = 0):
            self.depth = depth

        def visit_Name(self, node: ast.Name) -> ast.expr:
            if node.id in variables:
                return meta_key(variables[node.id])
            value = _single(view, node.id, line)
            if value is not None and self.depth < 8 and (_reads(view, node.id, line) & set(variables)):
                inlined.append(node.id)
                copy = ast.parse(view.text.text(value), mode="eval").body
                return Sub(self.depth + 1).visit(copy)
            return node

        def visit_Constant(self, node: ast.Constant) -> ast.expr:
            if isinstance(node.value, int) and not isinstance(node.value, bool) \
                    and node.value in literals:
                return meta_key(literals[node.value])
            return node

    new = Sub().visit(grid_expr)
    wanted = set(variables.values()) | set(literals.values())
    found = {n.slice.value for n in ast.walk(new) if isinstance(n, ast.Subscript)
             and isinstance(n.value, ast.Name) and n.value.id == meta
             and isinstance(n.slice, ast.Constant)}
    if wanted - found:
        return MetaGrid(None, f"the grid `{site.grid.source}` does not read "
                              f"{', '.join(sorted(wanted - found))}")
    if isinstance(new, ast.Tuple):
        parts = [ast.unparse(e) for e in new.elts]
        body = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    else:
        body = ast.unparse(new)
    return MetaGrid(f"lambda {meta}: {body}", "", tuple(dict.fromkeys(inlined)))


def other_uses(view: FunctionView, site: LaunchSite, names: set[str]) -> list[tuple[str, int]]:
    """Reads of ``names`` in the function outside the launch and outside the assignments that
    feed the grid: ``(name, line)`` for each."""
    if view.node is None or not names:
        return []
    allowed: list[tuple[int, int]] = [(site.span.line, site.span.end_line)]
    for n in names:
        for line, value in view.scope.assigns.get(n, []):
            if value is not None:
                allowed.append((value.lineno, value.end_lineno or value.lineno))
    out = []
    for node in ast.walk(view.node):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
            if not any(a <= node.lineno <= b for a, b in allowed):
                out.append((node.id, node.lineno))
    return sorted(set(out), key=lambda x: x[1])
