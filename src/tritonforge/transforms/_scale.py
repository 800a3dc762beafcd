"""Scale an integer expression by a power of two, in the text a person would write, and fold a
second scaling into the first (for ``heuristic_scale`` and the launch-option scaling of
``launch_fast``).

A factor is written signed: ``2`` doubles, ``-2`` halves. ``scale_text("nw", 2, cap=32)`` is
``min(32, nw * 2)``; ``scale_text("nw", -2)`` is ``max(1, nw // 2)``. ``rescale`` of a text this
module wrote combines the factors (``min(32, nw * 2)`` scaled by 2 is ``min(32, nw * 4)``, by -2
it is ``nw`` again), so a chain of accepted candidates never nests wrappers.
"""

from __future__ import annotations

import ast
from fractions import Fraction

WARPS_MAX = 32          # num_warps at most: Triton's 1024 threads a program


def _as_fraction(factor: int) -> Fraction:
    return Fraction(factor) if factor > 0 else Fraction(1, -factor)


def _signed(f: Fraction) -> int | None:
    """A factor as written here (2, -2 ...); None for 1, or for one not a whole multiple or
    divisor."""
    if f == 1:
        return None
    if f.denominator == 1:
        return int(f)
    return -f.denominator if f.numerator == 1 else None


def atom(text: str) -> bool:
    """A name, attribute, call, subscript or constant: safe beside ``*`` without parentheses."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)) \
        and "\n" not in text


def scale_text(inner: str, factor: int, cap: int | None = None) -> str:
    """``inner`` (an expression's text) times ``factor``, at most ``cap`` (when up), at least 1
    (when down)."""
    base = inner if atom(inner) else f"({inner})"
    if factor > 1:
        out = f"{base} * {factor}"
        return f"min({cap}, {out})" if cap is not None else out
    return f"max(1, {base} // {-factor})"


def split_scaled(text: str, cap: int | None = None) -> tuple[str, int]:
    """``(inner, factor)`` of a text ``scale_text`` wrote with ``cap``; ``(text, 1)`` for any
    other (a ``min``/``max`` of other bounds is the user's own, and stays whole)."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return text, 1
    src = text.strip()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2 \
            and not node.keywords and isinstance(node.args[0], ast.Constant):
        bound = node.args[0].value
        ours = (node.func.id == "max" and bound == 1) or \
            (node.func.id == "min" and cap is not None and bound == cap)
        if not ours:
            return text, 1
        node = node.args[1]
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
        return text, 1          # a halving is always written inside max(1, ...)
    if not (isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant)
            and type(node.right.value) is int and node.right.value > 1
            and isinstance(node.op, (ast.Mult, ast.FloorDiv))):
        return text, 1
    inner = ast.get_source_segment(src, node.left) or ""
    if not inner:
        return text, 1
    factor = node.right.value if isinstance(node.op, ast.Mult) else -node.right.value
    return inner, factor


def rescale(text: str, factor: int, cap: int | None = None) -> str:
    """``text`` scaled by ``factor``; a text this module scaled before keeps one scaling, the
    factors combined (the bare inner expression where they cancel)."""
    inner, before = split_scaled(text, cap)
    total = _as_fraction(before) * _as_fraction(factor)
    if before != 1 and total == 1:
        return inner
    signed = _signed(total) if before != 1 else factor
    if signed is None:          # not one multiple or divisor (powers of two always are)
        inner, signed = text, factor
    return scale_text(inner, signed, cap)


__all__ = ["WARPS_MAX", "atom", "rescale", "scale_text", "split_scaled"]
