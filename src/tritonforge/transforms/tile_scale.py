"""Scale a tile size the wrapper computes (``BLOCK = triton.next_power_of_2(n)``), where it is
computed, so the grid and everything else written in terms of it follow.

``constexpr_override`` changes a tile written as a literal; a tile the wrapper computes from the
sizes is out of its reach, and a literal written over it would pin one value for every size. 37
of the 142 dev modules pass a computed tile size (one that tiles a program id or steps a loop) at
some launch. This rewrite keeps the wrapper's rule and moves it a power of two
(``transforms._scale``: ``triton.next_power_of_2(n) * 2``, ``max(1, BLOCK // 2)``):

- the launch passes a bare name the launching function assigns exactly once (not a parameter of
  it): that assignment's value is scaled, and every later use of the name follows it (the grid,
  a buffer sized by it, a second launch);
- otherwise, where the tile does not tile the grid (a loop's step, a chunk of a row), the
  argument itself is scaled at the launch;
- a grid-tiling tile written any other way is left alone: the grid would not follow.

A power of two stays one. Whether the kernel still computes the same (a row that must fit one
tile, a tile below a ``tl.dot`` minimum) is not judged here: the verifier judges every candidate.
Edits are made by text positions from ``ast`` (no libcst): the config search writes dozens.
"""

from __future__ import annotations

import ast
from typing import Any

from ._scale import rescale
from .base import char_index


def _function(tree: ast.Module, qualname: str | None) -> ast.AST | None:
    if not qualname:
        return None
    node: ast.AST = tree
    for part in qualname.split("."):
        node = next((c for c in ast.iter_child_nodes(node)
                     if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and c.name == part), None)
        if node is None:
            return None
    return node


def _single_assignment(fn: ast.AST, name: str) -> ast.expr | None:
    """The value of the only statement of ``fn`` (nested functions aside) that binds ``name``, when
    it is a plain ``name = value``; None when the name is bound otherwise or more than once."""
    found: list[ast.AST] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, ast.Name) and child.id == name and isinstance(child.ctx, ast.Store):
                found.append(child)
            visit(child)

    visit(fn)
    if len(found) != 1:
        return None
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and node.targets[0] is found[0]:
            return node.value
    return None


def _replace(source: str, node: ast.AST, text: str) -> str:
    lines = source.splitlines(keepends=True)
    start = char_index(lines, node.lineno, node.col_offset)
    end = char_index(lines, node.end_lineno, node.end_col_offset)
    return source[:start] + text + source[end:]


def scale_computed_tile(source: str, analysis: Any, site_index: int, param: str,
                        factor: int) -> str | None:
    """``source`` with the computed tile ``param`` of launch ``site_index`` scaled by ``factor``
    (see the module doc); None where it cannot be written."""
    site = analysis.site(site_index)
    arg = site.arg_for(param)
    knob = next((c for c in site.knobs.constexprs if c.name == param), None) if site.knobs else None
    if arg is None or arg.is_literal or knob is None or site.alias_partners:
        return None
    tree = ast.parse(source)
    fn = _function(tree, site.function)
    if arg.variable and fn is not None:
        params = {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)} \
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else set()
        value = None if arg.variable in params else _single_assignment(fn, arg.variable)
        if value is not None and value.lineno < site.span.line:
            text = ast.get_source_segment(source, value) or ""
            out = _replace(source, value, rescale(text, factor)) if text else None
            return out if out is not None and _parses(out) else None
    if knob.tiles_grid:
        return None
    call = _launch_call(tree, site)
    node = _argument_node(call, arg) if call is not None else None
    if node is None:
        return None
    out = _replace(source, node, rescale(ast.get_source_segment(source, node) or "", factor))
    return out if _parses(out) else None


def _launch_call(tree: ast.Module, site: Any) -> ast.Call | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) \
                and node.lineno == site.span.line and node.col_offset == site.span.col:
            return node
    return None


def _argument_node(call: ast.Call, arg: Any) -> ast.expr | None:
    if arg.keyword is not None:
        return next((k.value for k in call.keywords if k.arg == arg.keyword), None)
    if arg.position is not None and arg.position < len(call.args) \
            and not any(isinstance(a, ast.Starred) for a in call.args[:arg.position + 1]):
        return call.args[arg.position]
    return None


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


__all__ = ["scale_computed_tile"]
