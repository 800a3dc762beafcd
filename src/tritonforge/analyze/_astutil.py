"""Small helpers over ``ast`` shared by the analysis modules: names, literals, spans, source text."""

from __future__ import annotations

import ast
from typing import Iterator

from .model import Literal, Span

# Module aliases under which Triton's language module is commonly imported.
_TL_PREFIXES = ("triton.language.", "tl.", "language.")


def dotted(node: ast.AST | None) -> str:
    """``a.b.c`` for a Name/Attribute chain, "" for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def tl_name(node: ast.AST | None) -> str:
    """The ``triton.language`` function a call target names (``"load"`` for ``tl.load``), or ""."""
    name = dotted(node)
    for prefix in _TL_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return ""


def is_tl_call(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Call) and tl_name(node.func) in names


class _NotLiteral(Exception):
    pass


def _eval(node: ast.AST) -> Literal:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str, type(None))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval(node.operand)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left), _eval(node.right)
        if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) \
                and not isinstance(b, bool):
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: a // b if b else None, ast.LShift: lambda: a << b,
                   ast.Pow: lambda: a ** b if 0 <= b <= 64 else None}
            fn = ops.get(type(node.op))
            if fn is not None:
                v = fn()
                if v is not None:
                    return v
    raise _NotLiteral


def literal_value(node: ast.AST | None) -> tuple[bool, Literal]:
    """(True, value) when ``node`` is a literal or integer arithmetic on literals (``2**10``)."""
    if node is None:
        return False, None
    try:
        return True, _eval(node)
    except _NotLiteral:
        return False, None


class SourceText:
    """The source with helpers to cut node text and to turn byte columns into characters."""

    def __init__(self, source: str):
        self.source = source
        self.lines = source.splitlines(keepends=True)

    def _char_col(self, line: int, byte_col: int) -> int:
        if line - 1 >= len(self.lines) or byte_col <= 0:
            return max(byte_col, 0)
        text = self.lines[line - 1]
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> Span:
        line = getattr(node, "lineno", 0)
        end_line = getattr(node, "end_lineno", None) or line
        return Span(line, self._char_col(line, getattr(node, "col_offset", 0)),
                    end_line, self._char_col(end_line, getattr(node, "end_col_offset", 0) or 0))

    def text(self, node: ast.AST | None) -> str:
        """The exact source text of ``node`` (``ast.unparse`` when positions are missing)."""
        if node is None:
            return ""
        try:
            sp = self.span(node)
        except (AttributeError, TypeError):
            return ast.unparse(node)
        if sp.line == 0 or sp.end_line > len(self.lines):
            return ast.unparse(node)
        if sp.line == sp.end_line:
            return self.lines[sp.line - 1][sp.col:sp.end_col]
        first = self.lines[sp.line - 1][sp.col:]
        middle = self.lines[sp.line:sp.end_line - 1]
        last = self.lines[sp.end_line - 1][:sp.end_col]
        return "".join([first, *middle, last])


def walk_in_order(node: ast.AST) -> Iterator[ast.AST]:
    """Every node below ``node`` (itself included) in source order (depth first, by position)."""
    yield node
    children = list(ast.iter_child_nodes(node))
    children.sort(key=lambda c: (getattr(c, "lineno", 0), getattr(c, "col_offset", 0)))
    for child in children:
        yield from walk_in_order(child)


def names_in(node: ast.AST) -> set[str]:
    """Every bare name read in an expression (roots of attribute chains included)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def assigned_names(target: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(target):
        if isinstance(n, ast.Name):
            out.append(n.id)
    return out


def subscript_keys(node: ast.AST, base: str) -> list[str]:
    """String keys of ``base['KEY']`` subscripts below ``node``."""
    keys = []
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == base:
            sl = n.slice
            if isinstance(sl, ast.Constant) and isinstance(sl.value, str):
                keys.append(sl.value)
    return keys


def int_literals(node: ast.AST) -> list[int]:
    return [n.value for n in ast.walk(node)
            if isinstance(n, ast.Constant) and isinstance(n.value, int)
            and not isinstance(n.value, bool)]
