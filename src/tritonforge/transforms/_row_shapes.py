"""The tile shapes of a one-row-per-program kernel body with 2-D tiles (for ``rows_per_program``).

A row kernel may build its tile from two 1-D ranges, ``offs_h[:, None]`` and ``offs_d[None, :]``
(a KV-cache copy moves a ``[heads, head_dim]`` tile per token). ``rows_per_program`` then makes
the row a ``[R, 1, 1]`` column: Triton broadcasts like numpy, aligned on the right, so a value of
shape ``S`` computed from the row becomes ``[R] + S`` (padded with ones) and meets the
row-independent tiles exactly as the original did, one row per leading index. That holds only if
every shape in the body is read here: subscripts are ``x[None, :]`` / ``x[:, None]`` of a 1-D
tile that does not depend on the row (indexing a lifted value would pick the row axis), nothing
has three axes, and two tiles meet only where their widths are the same constexpr or one is 1.

The reading also gives the tiles' sizes, as the constexpr names of their widths: the launch
divides its element budget by the largest tile's product (a ``[16, 64]`` tile is 1024 elements,
not 64). Reductions are recorded, not read: ``rows_per_program`` refuses them beside 2-D tiles
(the reduced axis would move).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

Shape = tuple[str | int, ...]      # a constexpr width name per axis, 1 for a broadcast axis

REDUCTIONS = {"sum", "max", "min", "argmax", "argmin"}


@dataclass(frozen=True)
class BodyShapes:
    """What the body's tiles are: their widths, largest first kept (smaller tiles whose widths
    another holds are dropped), and the line of the first reduction if there is one."""

    tiles: tuple[tuple[str, ...], ...]
    reduction_line: int | None


class _Unread(Exception):
    """A shape this reading does not follow; its message says which and where."""


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _broadcast(a: Shape, b: Shape, line: int) -> Shape:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out: list[str | int] = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise _Unread(f"tiles of widths {x} and {y} meet on one axis (line {line})")
    return tuple(out)


def _expansion(index: ast.expr) -> int | None:
    """1 for ``[None, :]``, 0 for ``[:, None]`` (the axis the 1-D tile lands on), else None."""
    if not isinstance(index, ast.Tuple) or len(index.elts) != 2:
        return None

    def full(e: ast.expr) -> bool:
        return isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None

    def none(e: ast.expr) -> bool:
        return isinstance(e, ast.Constant) and e.value is None

    first, second = index.elts
    return 1 if none(first) and full(second) else 0 if full(first) and none(second) else None


class _Reader:
    def __init__(self, row: str):
        self.env: dict[str, Shape] = {}
        self.dependent = {row}
        self.seen: list[Shape] = []
        self.reduction_line: int | None = None

    def shape(self, e: ast.expr) -> Shape:
        s = self._shape(e)
        if len(s) > 2:
            raise _Unread(f"a value has {len(s)} axes (line {e.lineno})")
        if s and s not in self.seen:
            self.seen.append(s)
        return s

    def _all(self, exprs: list[ast.expr], line: int) -> Shape:
        out: Shape = ()
        for x in exprs:
            out = _broadcast(out, self.shape(x), line)
        return out

    def _shape(self, e: ast.expr) -> Shape:
        line = getattr(e, "lineno", 0)
        if isinstance(e, ast.Name):
            return self.env.get(e.id, ())       # parameters are scalars
        if isinstance(e, ast.Constant):
            return ()
        if isinstance(e, ast.Attribute):
            if e.attr in ("T", "shape"):
                raise _Unread(f"`.{e.attr}` of a tile (line {line})")
            return ()                            # tl.float32, x.dtype
        if isinstance(e, ast.Subscript):
            axis = _expansion(e.slice)
            if axis is None:
                raise _Unread(f"an index other than [None, :] or [:, None] (line {line})")
            if _names(e.value) & self.dependent:
                raise _Unread(f"an index of a tile that depends on the row (line {line}): its "
                              "first axis would be the rows")
            inner = self.shape(e.value)
            if len(inner) != 1:
                raise _Unread(f"an index of a value with {len(inner)} axes (line {line})")
            return (1, inner[0]) if axis == 1 else (inner[0], 1)
        if isinstance(e, ast.BinOp):
            return self._all([e.left, e.right], line)
        if isinstance(e, ast.BoolOp):
            return self._all(list(e.values), line)
        if isinstance(e, ast.Compare):
            return self._all([e.left, *e.comparators], line)
        if isinstance(e, ast.UnaryOp):
            return self.shape(e.operand)
        if isinstance(e, ast.Call):
            return self._call(e, line)
        raise _Unread(f"a {type(e).__name__} expression (line {line})")

    def _call(self, e: ast.Call, line: int) -> Shape:
        f = e.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        args = [*e.args, *(kw.value for kw in e.keywords)]
        if name == "arange" and len(e.args) == 2 and isinstance(e.args[1], ast.Name):
            return (e.args[1].id,)
        if name in REDUCTIONS:
            self._all(args, line)
            if self.reduction_line is None:
                self.reduction_line = line
            return ()
        module = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
            and f.value.id in ("tl", "triton", "libdevice", "math")
        if isinstance(f, ast.Attribute) and not module:
            # a method of a value (x.to(tl.float32)): its shape
            self._all(args, line)
            return self.shape(f.value)
        # elementwise calls (tl.load, tl.where, tl.exp, ...): their operands' broadcast
        return self._all(args, line)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Return):
            return
        value = getattr(stmt, "value", None)
        if value is None:
            return
        shape = self.shape(value)
        if isinstance(stmt, ast.Expr):
            return
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for t in targets:
            if not isinstance(t, ast.Name):
                raise _Unread(f"an assignment to {ast.unparse(t)} (line {stmt.lineno})")
            if isinstance(stmt, ast.AugAssign):
                shape = _broadcast(self.env.get(t.id, ()), shape, stmt.lineno)
            self.env[t.id] = shape
            if _names(value) & self.dependent:
                self.dependent.add(t.id)


def body_shapes(body: list[ast.stmt], row: str) -> BodyShapes | str:
    """The tiles of a straight-line kernel body whose row index is ``row``, or what this reading
    cannot follow (the caller has checked the statements' kinds and calls)."""
    reader = _Reader(row)
    try:
        for stmt in body:
            reader.statement(stmt)
    except _Unread as e:
        return str(e)
    tiles: list[tuple[str, ...]] = []
    for s in reader.seen:
        widths = tuple(str(w) for w in s if w != 1)
        if widths and all(sorted(widths) != sorted(t) for t in tiles):
            tiles.append(widths)

    def within(small: tuple[str, ...], big: tuple[str, ...]) -> bool:
        rest = list(big)
        for w in small:
            if w not in rest:
                return False
            rest.remove(w)
        return True

    kept = tuple(t for t in tiles if not any(o != t and within(t, o) for o in tiles))
    return BodyShapes(kept, reader.reduction_line)


__all__ = ["BodyShapes", "body_shapes"]
