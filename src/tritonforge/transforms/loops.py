"""Loop rewrites inside kernels that keep every value: hoisting invariant loads, unrolling.

- ``hoist_invariant_loads``: ``w = tl.load(W + cols, mask=m)`` as a statement of a loop body,
  reading nothing the loop assigns, moves in front of the loop, its mask and-ed with "the loop
  runs" (``lo < hi``) so that a loop of no iterations still reads no memory. Triton does not
  hoist a load out of a loop that also stores (MLIR's loop-invariant code motion moves only
  side-effect-free operations), so such a loop re-reads the same tile every iteration.
  Needs, all checked by ``applies``: a ``range``/``tl.range`` loop whose step is absent, a
  positive literal or a tile-size constexpr (so ``lo < hi`` is "it runs"); the statement a plain
  ``name = tl.load(...)`` at the top of the loop body, not volatile and not through a block
  pointer (``boundary_check``, or a pointer the loop does not read as an expression); no name
  it reads assigned anywhere in the loop (the loop variable included); ``name`` assigned once
  in the loop and used nowhere outside it (so no value before or after the loop changes); no
  store or atomic in the loop through a pointer parameter the load reads through. Distinct
  pointer arguments are taken not to overlap, which Triton's own software pipeliner assumes when
  it prefetches a later iteration's loads above this iteration's stores.
- ``static_unroll``: ``for i in range(a, b, s)`` whose bounds are int literals or constexprs
  with a known value at every launch (or their defaults), non-negative, with at most
  ``max_trips`` iterations -> ``tl.static_range(a, b, s)``: the same operations in the same
  order, unrolled at compile time so that iterations overlap (Triton keeps ``range`` loops
  rolled and pipelines only those with loads). Bounds >= 0 keep the loop variable's arithmetic
  the same as a constexpr (Python ints) as it was as an int32.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import libcst as cst

from ..analyze import KernelInfo, LoopKind, SourceAnalysis
from ._cst import edit_kernel, kw_arg
from .base import Applicability, Transform, first_no

_LOAD = ("tl.load", "triton.language.load")
_WRITES = ("store", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or",
           "atomic_xor", "atomic_xchg", "atomic_cas")


def _tl(analysis: SourceAnalysis) -> str:
    return "tl" if "tl" in analysis.module_names else "triton.language"


def _kernel_def(tree: ast.Module, kernel: KernelInfo) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == kernel.name \
                and node.lineno == kernel.def_line:
            return node
    return None


def _stored_names(node: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.append(n.id)
    return out


def _read_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _loops(fn: ast.FunctionDef, kernel: KernelInfo) -> list[tuple[Any, ast.For]]:
    """(LoopInfo, ast.For) pairs of the kernel's for loops, matched by position."""
    by_pos = {(n.lineno, n.col_offset): n for n in ast.walk(fn) if isinstance(n, ast.For)}
    return [(lp, by_pos[(lp.span.line, lp.span.col)]) for lp in kernel.loops
            if (lp.span.line, lp.span.col) in by_pos]


# ----------------------------------------------------------------------------- hoisting

@dataclass(frozen=True)
class _Hoist:
    loop_line: int
    loop_col: int
    statements: tuple[int, ...]      # indices in the loop body
    guard: str                       # "lo < hi" text, "" when the loop surely runs
    names: tuple[str, ...]


def _positive_step(node: ast.expr | None, kernel: KernelInfo) -> bool:
    if node is None:
        return True
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value > 0
    return isinstance(node, ast.Name) and node.id in kernel.block_constexprs


def _guard(loop: ast.For) -> str | None:
    """"lo < hi" for the loop's range ("" when both are literals and it runs), None if the
    range is not one this can guard."""
    args = loop.iter.args
    if loop.iter.keywords and any(k.arg not in ("num_stages", "loop_unroll_factor")
                                  for k in loop.iter.keywords):
        return None
    lo, hi = (ast.Constant(0), args[0]) if len(args) == 1 else (args[0], args[1])
    if isinstance(lo, ast.Constant) and isinstance(hi, ast.Constant):
        return "" if lo.value < hi.value else None
    return f"({ast.unparse(lo)}) < ({ast.unparse(hi)})"


def _load_of(stmt: ast.stmt) -> ast.Call | None:
    """The ``tl.load`` call of ``name = tl.load(...)`` or ``name = tl.load(...).to(...)``."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    while isinstance(call.func, ast.Attribute) and call.func.attr == "to" \
            and isinstance(call.func.value, ast.Call):
        call = call.func.value
    return call if ast.unparse(call.func) in _LOAD and call.args else None


def _pointer_tile(node: ast.expr, fn: ast.FunctionDef) -> bool:
    """Pointer arithmetic (``X + offs``), or a name only ever assigned pointer arithmetic (not
    a block pointer from ``tl.make_block_ptr``/``tl.advance``, which a mask cannot guard)."""
    if isinstance(node, ast.BinOp):
        return True
    if not isinstance(node, ast.Name):
        return False
    values = [n.value for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign))
              and any(isinstance(t, ast.Name) and t.id == node.id
                      for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    return bool(values) and not any(isinstance(v, ast.Call) for v in values)


def _hoists(analysis: SourceAnalysis, kernel: KernelInfo) -> tuple[list[_Hoist], list[str]]:
    tree = ast.parse(analysis.source)
    fn = _kernel_def(tree, kernel)
    if fn is None:
        return [], [f"{kernel.name}: its definition was not found"]
    out, reasons = [], []
    pointers = set(kernel.pointer_params)
    for lp, loop in _loops(fn, kernel):
        where = f"{kernel.name} loop {lp.index} (line {lp.span.line})"
        if lp.kind not in (LoopKind.RANGE, LoopKind.TL_RANGE) or not lp.loads:
            continue
        if not isinstance(loop.iter, ast.Call) or not 1 <= len(loop.iter.args) <= 3 or \
                not _positive_step(loop.iter.args[2] if len(loop.iter.args) == 3 else None, kernel):
            reasons.append(f"{where}: not a range with a positive step")
            continue
        guard = _guard(loop)
        if guard is None:
            reasons.append(f"{where}: its range cannot be guarded")
            continue
        assigned = set(_stored_names(loop))
        written = set()
        for n in ast.walk(loop):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in _WRITES and n.args:
                written |= _read_names(n.args[0]) & pointers or {"?"}
        outside = [n for n in ast.walk(fn) if n is not loop]
        inside = set(map(id, ast.walk(loop)))
        used_outside = {n.id for n in outside if isinstance(n, ast.Name) and id(n) not in inside}
        picked, names = [], []
        for i, stmt in enumerate(loop.body):
            call = _load_of(stmt)
            if call is None:
                continue
            name = stmt.targets[0].id
            kws = {k.arg for k in call.keywords}
            reads = _read_names(stmt.value)
            if reads & assigned:
                continue      # varies with the loop: not a candidate, no reason worth listing
            if "boundary_check" in kws or "volatile" in kws or "padding_option" in kws \
                    or not _pointer_tile(call.args[0], fn) or len(call.args) > 1:
                reasons.append(f"{where}: the load of {name} is not a plain pointer-tile load")
            elif _stored_names(loop).count(name) != 1 or name in used_outside:
                reasons.append(f"{where}: {name} is assigned again or used outside the loop")
            elif "?" in written or reads & written:
                reasons.append(f"{where}: the loop stores through the pointer {name} is read from")
            else:
                picked.append(i)
                names.append(name)
        if picked:
            out.append(_Hoist(lp.span.line, lp.span.col, tuple(picked), guard, tuple(names)))
    return out, reasons


class _GuardLoad(cst.CSTTransformer):
    """And ``guard`` into the mask of the first ``tl.load`` call (adding ``mask=`` if none)."""

    def __init__(self, guard: str):
        super().__init__()
        self.guard = cst.parse_expression(f"({guard})")     # "&" binds tighter than "<"
        self.done = False
        self.failed = False

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if self.done or cst.Module([]).code_for_node(updated.func) not in _LOAD:
            return updated
        self.done = True
        args = list(updated.args)
        for i, a in enumerate(args):
            if a.keyword is not None and a.keyword.value == "mask":
                old = cst.parse_expression(f"({cst.Module([]).code_for_node(a.value)})")
                args[i] = a.with_changes(value=cst.BinaryOperation(
                    left=old, operator=cst.BitAnd(), right=self.guard))
                return updated.with_changes(args=args)
        if len(args) != 1 or args[0].keyword is not None:
            self.failed = True      # a positional mask: left alone
            return updated
        return updated.with_changes(args=[
            args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            kw_arg("mask", self.guard)])


def _guarded(stmt: cst.SimpleStatementLine, guard: str) -> cst.SimpleStatementLine | None:
    if not guard:
        return stmt
    editor = _GuardLoad(guard)
    new = stmt.visit(editor)
    return None if editor.failed or not editor.done else new


class HoistInvariantLoads(Transform):
    name = "hoist_invariant_loads"
    summary = "loads that do not change across a loop's iterations moved in front of it"
    param_names = ("kernel",)

    def _targets(self, analysis: SourceAnalysis, kernel: str | None):
        out, reasons = [], []
        for k in analysis.kernels:
            if kernel is not None and k.name != kernel:
                continue
            hoists, why = _hoists(analysis, k)
            out += [(k, h) for h in hoists]
            reasons += why
        return out, reasons

    def _applies(self, analysis: SourceAnalysis, kernel: str | None = None,
                 **_: Any) -> Applicability:
        targets, reasons = self._targets(analysis, kernel)
        if not targets:
            return first_no(reasons, "loop-invariant tl.load in a kernel loop")
        return Applicability.yes([f"{k.name}: {', '.join(h.names)} out of the loop at line "
                                  f"{h.loop_line}" for k, h in targets], "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, kernel: str | None = None,
               **_: Any) -> str:
        targets, _ = self._targets(analysis, kernel)
        by_kernel: dict[str, list[_Hoist]] = {}
        for k, h in targets:
            by_kernel.setdefault(k.name, []).append(h)

        def edit_for(h: _Hoist):
            def edit(node: cst.For):
                body = list(node.body.body)
                moved = [_guarded(body[i], h.guard) for i in h.statements]
                rest = [s for i, s in enumerate(body) if i not in h.statements]
                if any(m is None for m in moved) or not rest:
                    return node
                moved = [m.with_changes(leading_lines=()) for m in moved]
                new = node.with_changes(body=node.body.with_changes(body=rest))
                return cst.FlattenSentinel([*moved, new])
            return edit

        for k in sorted((analysis.kernel(n) for n in by_kernel), key=lambda k: -k.span.line):
            source = edit_kernel(source, k, {(cst.For, h.loop_line, h.loop_col): edit_for(h)
                                             for h in by_kernel[k.name]})
        return source


# ----------------------------------------------------------------------------- unrolling

def _known_values(analysis: SourceAnalysis, kernel: KernelInfo, name: str,
                  fn: ast.FunctionDef) -> list[int] | None:
    """Every value constexpr ``name`` of ``kernel`` takes: at each launch, from the autotune
    configs, or its default; None when one is not a literal int."""
    values: list[int] = []
    if kernel.autotune is not None:
        for cfg in kernel.autotune.configs:
            v = dict(cfg.kwargs).get(name)
            if v is not None:
                values.append(v)
    for site in analysis.sites_of(kernel.name):
        knob = site.knobs.constexpr(name) if site.knobs else None
        if knob is not None:
            values.append(knob.value)
    if not values:
        p = kernel.param(name)
        values = [ast.literal_eval(p.default)] if p is not None and p.default else []
    if not values or any(type(v) is not int for v in values):
        return None
    return values


def _trips(loop: ast.For, analysis: SourceAnalysis, kernel: KernelInfo,
           fn: ast.FunctionDef) -> int | None:
    """The most iterations the loop can make over every known bound value, None if unknown or
    a bound can be negative."""
    args = loop.iter.args
    if loop.iter.keywords or not 1 <= len(args) <= 3:
        return None
    options = []
    for a in args:
        if isinstance(a, ast.Constant) and type(a.value) is int:
            options.append([a.value])
        elif isinstance(a, ast.Name) and a.id in kernel.constexpr_names:
            vals = _known_values(analysis, kernel, a.id, fn)
            if vals is None:
                return None
            options.append(vals)
        else:
            return None
    if any(v < 0 for vs in options for v in vs):
        return None
    lo, hi, step = ([0], options[0], [1]) if len(options) == 1 else \
        (options[0], options[1], options[2] if len(options) == 3 else [1])
    if 0 in step:
        return None
    return max(len(range(a, b, s)) for a in lo for b in hi for s in step)


class StaticUnroll(Transform):
    name = "static_unroll"
    summary = "short loops with constant bounds -> tl.static_range (unrolled at compile time)"
    param_names = ("max_trips", "kernel")
    example_params = {"max_trips": 16}

    def _targets(self, analysis: SourceAnalysis, max_trips: int, kernel: str | None):
        out, reasons = [], []
        tree = ast.parse(analysis.source)
        for k in analysis.kernels:
            if kernel is not None and k.name != kernel:
                continue
            fn = _kernel_def(tree, k)
            if fn is None:
                continue
            for lp, loop in _loops(fn, k):
                if lp.kind is not LoopKind.RANGE:
                    continue
                where = f"{k.name} loop {lp.index} (line {lp.span.line})"
                n = _trips(loop, analysis, k, fn)
                if n is None:
                    reasons.append(f"{where}: bounds not known constants >= 0")
                elif not 1 < n <= max_trips:
                    reasons.append(f"{where}: {n} iteration(s), not 2 to {max_trips}")
                else:
                    out.append((k, lp))
        return out, reasons

    def _applies(self, analysis: SourceAnalysis, max_trips: int = 16, kernel: str | None = None,
                 **_: Any) -> Applicability:
        if not isinstance(max_trips, int) or max_trips < 2:
            return Applicability.no(f"max_trips={max_trips!r} must be an integer >= 2")
        targets, reasons = self._targets(analysis, max_trips, kernel)
        if not targets:
            return first_no(reasons, "short constant-bound range loop in a kernel")
        return Applicability.yes([f"{k.name} loop {lp.index} (line {lp.span.line})"
                                  for k, lp in targets], "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, max_trips: int = 16,
               kernel: str | None = None, **_: Any) -> str:
        targets, _ = self._targets(analysis, max_trips, kernel)
        static = cst.parse_expression(f"{_tl(analysis)}.static_range")

        def edit(node: cst.For) -> cst.For:
            return node.with_changes(iter=node.iter.with_changes(func=static))

        by_kernel: dict[str, list] = {}
        for k, lp in targets:
            by_kernel.setdefault(k.name, []).append(lp)
        for k in sorted((analysis.kernel(n) for n in by_kernel), key=lambda k: -k.span.line):
            source = edit_kernel(source, k, {(cst.For, lp.span.line, lp.span.col): edit
                                             for lp in by_kernel[k.name]})
        return source


__all__ = ["HoistInvariantLoads", "StaticUnroll"]
