"""Light data flow over a kernel body, and the code patterns the transforms look for.

``BodyReader`` follows local assignments: which pointer parameter an address expression is based
on (the leftmost term of ``+`` chains, ``tl.make_block_ptr(base=...)``), and which program-id axes
flow into an expression. The ``find_*`` functions list the places a transform rewrites: memory
accesses, ``pid * BLOCK + tl.arange(0, BLOCK)`` offsets and ``pid = tl.program_id(axis)``
statements, with positions in the file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ._astutil import SourceText, dotted, is_tl_call, literal_value, names_in, tl_name, walk_in_order
from .model import MemAccess, Param, ProgramIdVar, TiledOffset

ATOMICS = ("atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
           "atomic_xchg", "atomic_cas")


def call_arg(call: ast.Call, pos: int, kw: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == kw:
            return k.value
    if len(call.args) > pos and not any(isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
        return call.args[pos]
    return None


@dataclass
class Flow:
    """Local assignments of a kernel body: name -> the expressions assigned to it."""

    assigns: dict[str, list[ast.expr | None]] = field(default_factory=dict)

    def add(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            self.assigns.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) \
                and len(value.elts) == len(target.elts) else [None] * len(target.elts)
            for t, v in zip(target.elts, values):
                self.add(t, v)


def collect_flow(body: list[ast.stmt]) -> Flow:
    flow = Flow()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    flow.add(t, node.value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                flow.add(node.target, node.value)
            elif isinstance(node, ast.AugAssign):
                flow.add(node.target, None)
            elif isinstance(node, (ast.For, ast.comprehension)):
                flow.add(node.target, None)
    return flow


class BodyReader:
    """Answers data-flow questions about one kernel body."""

    def __init__(self, fn: ast.FunctionDef, params: tuple[Param, ...]):
        self.fn = fn
        self.runtime = {p.name for p in params if not p.is_constexpr}
        self.constexprs = {p.name for p in params if p.is_constexpr}
        self.flow = collect_flow(fn.body)
        self._axes_memo: dict[str, frozenset[int]] = {}

    def bases(self, expr: ast.expr | None, seen: frozenset[str] = frozenset()) -> set[str]:
        """Runtime params a pointer expression is based on (the leftmost term of ``+`` chains)."""
        if expr is None:
            return set()
        if isinstance(expr, ast.Name):
            if expr.id in self.runtime:     # a param, even when the body reassigns it from itself
                return {expr.id}
            if expr.id in seen:
                return set()
            out: set[str] = set()
            for value in self.flow.assigns.get(expr.id, []):
                out |= self.bases(value, seen | {expr.id})
            return out
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
            left = self.bases(expr.left, seen)
            return left or (self.bases(expr.right, seen) if isinstance(expr.op, ast.Add) else set())
        if isinstance(expr, ast.IfExp):
            return self.bases(expr.body, seen) | self.bases(expr.orelse, seen)
        if isinstance(expr, ast.Call):
            name = tl_name(expr.func)
            if name in ("make_block_ptr", "make_tensor_descriptor"):
                return self.bases(call_arg(expr, 0, "base"), seen)
            if name == "advance":
                return self.bases(call_arg(expr, 0, "base"), seen)
            if name in ("multiple_of", "max_contiguous", "max_constancy"):
                return self.bases(call_arg(expr, 0, "input"), seen)
            if isinstance(expr.func, ast.Attribute) and expr.func.attr in ("to", "cast"):
                return self.bases(expr.func.value, seen)
        if isinstance(expr, ast.Subscript):
            return self.bases(expr.value, seen)
        return set()

    def is_block_ptr(self, expr: ast.expr | None, depth: int = 0) -> bool:
        """Whether an address is a block pointer (``tl.make_block_ptr`` / ``tl.advance``)."""
        if expr is None or depth > 8:
            return False
        if isinstance(expr, ast.Call):
            return tl_name(expr.func) in ("make_block_ptr", "advance")
        if isinstance(expr, ast.Name):
            return any(self.is_block_ptr(v, depth + 1) for v in self.flow.assigns.get(expr.id, []))
        return False

    def pid_axes(self, expr: ast.expr | None) -> frozenset[int]:
        """Grid axes whose program id flows into ``expr``."""
        if expr is None:
            return frozenset()
        axes: set[int] = set()
        for node in ast.walk(expr):
            if is_tl_call(node, "program_id"):
                ok, axis = literal_value(call_arg(node, 0, "axis"))
                axes.add(axis if ok and isinstance(axis, int) else -1)
            elif isinstance(node, ast.Name) and node.id in self.flow.assigns:
                axes |= self._name_axes(node.id)
        return frozenset(axes)

    def _name_axes(self, name: str) -> frozenset[int]:
        if name in self._axes_memo:
            return self._axes_memo[name]
        self._axes_memo[name] = frozenset()      # cycle guard: a name is not its own source
        axes: frozenset[int] = frozenset()
        for value in self.flow.assigns[name]:
            axes |= self.pid_axes(value)
        self._axes_memo[name] = axes
        return axes


def _mask_position(op: str) -> int:
    return {"load": 1, "store": 2}.get(op, 2)


def find_accesses(fn: ast.FunctionDef, reader: BodyReader, text: SourceText) -> list[MemAccess]:
    in_loop: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.For, ast.While)):
            for inner in ast.walk(node):
                in_loop.add(id(inner))
    out = []
    for stmt in fn.body:
        for node in walk_in_order(stmt):
            if not isinstance(node, ast.Call):
                continue
            op = tl_name(node.func)
            if op not in ("load", "store") and op not in ATOMICS:
                continue
            pointer = call_arg(node, 0, "pointer")
            mask = None if op == "atomic_cas" else call_arg(node, _mask_position(op), "mask")

            def kw(name: str) -> str | None:
                ok, v = literal_value(call_arg(node, 99, name))
                return v if ok and isinstance(v, str) else None

            out.append(MemAccess(op, text.span(node), tuple(sorted(reader.bases(pointer))),
                                 id(node) in in_loop, mask is not None,
                                 reader.is_block_ptr(pointer), kw("eviction_policy"),
                                 kw("cache_modifier")))
    return out


def find_pid_vars(fn: ast.FunctionDef, reader: BodyReader, text: SourceText) -> list[ProgramIdVar]:
    out = []
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name) and is_tl_call(stmt.value, "program_id"):
            ok, axis = literal_value(call_arg(stmt.value, 0, "axis"))
            if ok and isinstance(axis, int):
                name = stmt.targets[0].id
                out.append(ProgramIdVar(name, axis, text.span(stmt),
                                        len(reader.flow.assigns.get(name, [])) > 1))
    return out


def _arange_end(node: ast.expr) -> ast.expr | None:
    """``B`` for ``tl.arange(0, B)``."""
    if is_tl_call(node, "arange") and len(node.args) == 2:
        ok, start = literal_value(node.args[0])
        if ok and start == 0:
            return node.args[1]
    return None


def _pid_times(node: ast.expr, block: str, reader: BodyReader, text: SourceText) -> set[int]:
    """Axes when ``node`` is ``pid * block`` (or a name assigned exactly that), else empty."""
    if isinstance(node, ast.Name):
        values = reader.flow.assigns.get(node.id, [])
        return _pid_times(values[0], block, reader, text) if len(values) == 1 and values[0] else set()
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for side, other in ((node.left, node.right), (node.right, node.left)):
            if text.text(other) == block:
                axes = reader.pid_axes(side)
                if axes and not reader.pid_axes(other):
                    return set(axes)
    return set()


def find_offsets(fn: ast.FunctionDef, reader: BodyReader, text: SourceText) -> list[TiledOffset]:
    hinted = set()
    for node in ast.walk(fn):
        if is_tl_call(node, "multiple_of", "max_contiguous") and node.args \
                and isinstance(node.args[0], ast.Name):
            hinted.add(node.args[0].id)
    top = {id(s) for s in fn.body}
    out = []
    for stmt in walk_in_order(fn):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            continue
        value = stmt.value
        if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
            continue
        for a, b in ((value.left, value.right), (value.right, value.left)):
            end = _arange_end(b)
            if end is None:
                continue
            block = text.text(end)
            ok, lit = literal_value(end)
            if not (isinstance(end, ast.Name) and end.id in reader.constexprs
                    or ok and isinstance(lit, int)):
                continue
            axes = _pid_times(a, block, reader, text)
            if axes:
                name = stmt.targets[0].id
                out.append(TiledOffset(name, text.span(stmt), block, tuple(sorted(axes)),
                                       name in hinted, id(stmt) in top))
                break
    return out


def stepped_constexprs(fn: ast.FunctionDef, reader: BodyReader) -> set[str]:
    """Constexprs that step a loop: ``range(a, b, BLOCK)`` or ``range(tl.cdiv(N, BLOCK))``."""
    out: set[str] = set()
    for node in ast.walk(fn):
        if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Call):
            continue
        it = node.iter
        if not (dotted(it.func) == "range" or tl_name(it.func) == "range"):
            continue
        if len(it.args) == 3:
            out |= names_in(it.args[2]) & reader.constexprs
        for a in it.args[:2]:
            for sub in ast.walk(a):
                if is_tl_call(sub, "cdiv") and len(sub.args) == 2:
                    out |= names_in(sub.args[1]) & reader.constexprs
    return out
