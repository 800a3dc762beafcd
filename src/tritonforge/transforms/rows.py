"""Rows per program: a kernel that handles one row per program handles several, side by side.

    row = tl.program_id(0)                row = (tl.program_id(0) * ROWS_PER_PROGRAM
                                                 + tl.arange(0, ROWS_PER_PROGRAM))[:, None]
                                          _tf_row_ok = row < _tf_rows
    x = tl.load(X + row * s + cols,  ->   x = tl.load(X + row * s + cols,
                mask=cols < n)                        mask=(cols < n) & _tf_row_ok)
    v = tl.sum(x * x, axis=0)             v = tl.sum(x * x, axis=1, keep_dims=True)
    kernel[(M,)](...)                     kernel[(triton.cdiv(M, R),)](..., _tf_rows=M,
                                                                      ROWS_PER_PROGRAM=R)

A row kernel launched over many short rows spends its time starting programs and waiting on one
small load each: dequantize_rowwise reads and writes 192 MB in 0.32 ms on an H100, about five
times its DRAM roofline, with one 128-byte row per program (H100, 2026-11-23). Here the row index
becomes a column of ``R`` rows, so every value computed from it gains a leading axis of ``R`` and
broadcasts against the row's 1-D tiles (Triton broadcasts like numpy): the same code, ``R`` rows
at once. Loads and stores through a row-dependent pointer get the row's validity in their mask
(the last program may have fewer rows), and a reduction of a row-dependent value reduces the row
axis, keeping it (``axis=1, keep_dims=True``). ``R`` is chosen at the launch, from the widest
tile the kernel's ``tl.arange`` bounds take there: ``max(1, elements // width)`` (a power of two
when the width is one), so a long row keeps one row per program.

It applies only to the plain pattern, where that is the same computation: the program id read once
into a name (``row = tl.program_id(0)``, or ``.to(tl.int64)`` of it) never reassigned; a body of plain statements (no loop,
branch, or return but a bare one at the end); no reshapes or dots; reductions written as
``tl.sum/max/min/argmax/argmin(x[, axis=0])``; every store through a row-dependent pointer; and a
launch whose grid is read by ``_tiles.tiles_of`` with a tile width computed without side effects.
2-D tiles built as ``offs_h[:, None]`` / ``offs_d[None, :]`` (a KV-cache copy of a ``[heads,
head_dim]`` tile per token) make the row a ``[R, 1, 1]`` column instead, if ``_row_shapes`` reads
every shape in the body and there is no reduction; ``R`` then divides the budget by the largest
tile's product of widths. Anything else is a refusal that says why. The verifier has the last word.
"""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst

from ..analyze import KernelInfo, LaunchSite, SourceAnalysis, analyze_source
from ..errors import TransformError
from ._cst import append_arg, append_param, dotted, edit_kernel, kw_arg, launch_calls, replace
from ._row_shapes import REDUCTIONS, body_shapes
from ._tiles import tiles_of
from .base import Applicability, Transform, alias_refusal, candidate_kernels, first_no

ROWS = "ROWS_PER_PROGRAM"
COUNT = "_tf_rows"
OK = "_tf_row_ok"
# calls whose shapes or semantics a leading row axis would change
REFUSED_CALLS = {"dot", "dot_scaled", "reshape", "view", "trans", "permute", "expand_dims",
                 "broadcast_to", "join", "split", "cumsum", "cumprod", "sort", "flip",
                 "associative_scan", "reduce", "histogram", "num_programs", "make_block_ptr",
                 "advance", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or",
                 "atomic_xor", "atomic_xchg", "atomic_cas", "static_range", "range", "device_print",
                 "static_print", "full", "zeros", "zeros_like", "full_like", "cat", "interleave",
                 "ravel", "gather", "topk", "xor_sum", "reduce_or", "broadcast"}
PURE_CALLS = {"triton.next_power_of_2", "triton.cdiv", "max", "min", "int", "len", "abs"}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _pure(src: str) -> bool:
    """An expression the launch may evaluate twice: names, attributes, subscripts, arithmetic and
    calls of a few side-effect-free helpers."""
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError:
        return False
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            if ast.unparse(n.func) not in PURE_CALLS or n.keywords:
                return False
        elif not isinstance(n, (ast.Expression, ast.Name, ast.Attribute, ast.Constant, ast.BinOp,
                                ast.UnaryOp, ast.Subscript, ast.expr_context, ast.operator,
                                ast.unaryop)):
            return False
    return True


def _body(analysis: SourceAnalysis, k: KernelInfo) -> list[ast.stmt] | str:
    tree = ast.parse(analysis.source)
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == k.name),
              None)
    if fn is None:
        return f"{k.name}'s definition was not found"
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]     # a docstring
    return body


Tiles = list[tuple[str, ...]]     # each tile's widths (constexpr names), one per axis


def _cast_row(analysis: SourceAnalysis, k: KernelInfo) -> tuple[str, str] | None:
    """(the name, the dtype) of ``name = tl.program_id(0).to(dtype)`` as a statement of the
    kernel's body, the name assigned nowhere else: the row index widened (``tl.int64``, so that
    ``row * stride`` cannot overflow on a large tensor), as kldiv_ops and logsumexp_fwd write it,
    which the analysis's program-id variables (plain ``tl.program_id(axis)``) do not read."""
    body = _body(analysis, k)
    if isinstance(body, str):
        return None
    for stmt in body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            continue
        v = stmt.value
        if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "to"
                and len(v.args) == 1 and not v.keywords and isinstance(v.func.value, ast.Call)
                and _call_name(v.func.value) == "program_id"):
            continue
        axis = v.func.value.args[0] if v.func.value.args else next(
            (kw.value for kw in v.func.value.keywords if kw.arg == "axis"), None)
        if not (isinstance(axis, ast.Constant) and axis.value == 0):
            continue
        name = stmt.targets[0].id
        assigned = sum(1 for s in body for n in ast.walk(s)
                       if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                       for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                       for m in ast.walk(t) if isinstance(m, ast.Name) and m.id == name)
        return (name, ast.unparse(v.args[0])) if assigned == 1 else None
    return None


def _check_kernel(analysis: SourceAnalysis, k: KernelInfo
                  ) -> tuple[str, Tiles, int, str | None] | str:
    """(the row variable, the tiles, their rank: 1 or 2, the dtype the program id is cast to
    where it is: ``_cast_row``) or why the kernel does not fit."""
    pid = [v for v in k.pid_vars if v.axis == 0]
    cast = _cast_row(analysis, k) if not pid and k.program_id_calls == (0,) else None
    if k.program_id_calls != (0,) or not (pid or cast):
        return f"{k.name} does not read tl.program_id(0) exactly once into a name"
    if pid and pid[0].reassigned:
        return f"{k.name} reassigns {pid[0].name}"
    row = pid[0].name if pid else cast[0]
    if k.autotune is not None or k.heuristics:
        return f"{k.name} is autotuned or has heuristics: the tile width is chosen after the launch"
    taken = {ROWS, COUNT, OK} & (set(k.body_names) | set(k.param_names))
    if taken:
        return f"{k.name} already uses {sorted(taken)[0]}"
    if k.has_varargs:
        return f"{k.name} takes *args/**kwargs"
    body = _body(analysis, k)
    if isinstance(body, str):
        return body
    if body and isinstance(body[-1], ast.Return) and body[-1].value is None:
        body = body[:-1]    # a bare return at the end: the end of the row's work, as before
    widths: list[str] = []
    indexed = False
    for stmt in body:
        if isinstance(stmt, ast.Return):
            return f"{k.name} returns before its end (line {stmt.lineno}): an early exit would " \
                   "end every row of the program"
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
            kind = type(stmt).__name__.lower()
            return f"{k.name} has a {kind} statement (line {stmt.lineno}): " \
                   "only plain statements keep one row's work the same for several"
        for n in ast.walk(stmt):
            indexed = indexed or isinstance(n, ast.Subscript)
            if isinstance(n, (ast.Lambda, ast.IfExp, ast.ListComp, ast.GeneratorExp)):
                return f"{k.name} has an expression this transform does not read (line {n.lineno})"
            if not isinstance(n, ast.Call):
                continue
            name = _call_name(n)
            if name in REFUSED_CALLS:
                return f"{k.name} calls {name} (line {n.lineno}): a leading row axis would " \
                       "change it"
            module_call = isinstance(n.func, ast.Attribute) and \
                isinstance(n.func.value, ast.Name) and n.func.value.id in ("tl", "triton")
            if name in REDUCTIONS and isinstance(n.func, ast.Attribute) and not module_call:
                return f"{k.name} reduces with a method call (line {n.lineno})"
            if name in REDUCTIONS:
                axis = next((kw.value for kw in n.keywords if kw.arg == "axis"),
                            n.args[1] if len(n.args) > 1 else None)
                if axis is not None and not (isinstance(axis, ast.Constant)
                                             and axis.value in (0, None)):
                    return f"{k.name} reduces over axis {ast.unparse(axis)} (line {n.lineno})"
                if any(kw.arg not in ("axis", "return_indices") for kw in n.keywords):
                    return f"{k.name} passes other options to {name} (line {n.lineno})"
            if name == "arange":
                bound = n.args[1] if len(n.args) > 1 else None
                if not isinstance(bound, ast.Name) or bound.id not in k.constexpr_names:
                    return f"{k.name}: a tl.arange bound is not a constexpr parameter " \
                           f"(line {n.lineno})"
                if bound.id not in widths:
                    widths.append(bound.id)
    if not widths:
        return f"{k.name} has no tl.arange tile"
    tiles: Tiles = [(w,) for w in widths]
    if indexed:
        shapes = body_shapes(body, row)
        if isinstance(shapes, str):
            return f"{k.name} has {shapes}"
        if shapes.reduction_line is not None:
            return f"{k.name} reduces (line {shapes.reduction_line}) beside 2-D tiles: a " \
                   "leading row axis would move the reduced axis"
        tiles = list(shapes.tiles)
    tiled = [t.name for t in k.tiled_constexprs if t.name in widths]
    if cast:        # the analysis reads ``pid * BLOCK`` of plain program-id variables only
        tiled += [w for stmt in body for n in ast.walk(stmt)
                  if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)
                  for a, b in ((n.left, n.right), (n.right, n.left))
                  if isinstance(a, ast.Name) and a.id == row and isinstance(b, ast.Name)
                  for w in [b.id] if w in widths]
    if tiled:
        return f"{k.name} tiles its program id by {tiled[0]}, its tl.arange width: a larger " \
               "block does the same (constexpr_override)"
    dependent = {row}
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call) and _call_name(n) == "store" and n.args \
                    and not _names(n.args[0]) & dependent:
                return f"{k.name} stores through a pointer that does not depend on the row " \
                       f"(line {n.lineno}): every row would write there"
        value = getattr(stmt, "value", None)
        if value is not None and _names(value) & dependent:
            targets = stmt.targets if isinstance(stmt, ast.Assign) \
                else [getattr(stmt, "target", None)]
            dependent |= {n.id for t in targets if t is not None for n in ast.walk(t)
                          if isinstance(n, ast.Name)}
    return row, tiles, 2 if indexed else 1, cast[1] if cast else None


def _launch_problem(analysis: SourceAnalysis, k: KernelInfo, shapes: Tiles) -> str | None:
    sites = analysis.sites_of(k.name)
    if not sites:
        return f"{k.name} is not launched in this file"
    if "triton" not in analysis.module_names:
        return "the file does not import triton (the grid needs triton.cdiv)"
    first_default = next((p.index for p in k.params if p.default is not None), len(k.params))
    for s in sites:
        shared = alias_refusal(s, "the rows-per-program grid and arguments")
        if shared:
            return shared
        if s.has_star_args:
            return f"site {s.index} passes *args/**kwargs"
        if any(a.position is not None and a.position >= first_default for a in s.args):
            return f"site {s.index} passes parameters with defaults by position (the new " \
                   "parameters go before them)"
        tiles = tiles_of(s, k)
        if tiles.count is None:
            return f"site {s.index}: {tiles.reason}"
        for w in dict.fromkeys(w for t in shapes for w in t):
            src = _width_source(s, k, w)
            if src is None:
                return f"site {s.index} does not pass {w}"
            if not _pure(src):
                return f"site {s.index} computes {w} as `{src}`, which the launch would " \
                       "evaluate twice"
    return None


def _width_source(site: LaunchSite, k: KernelInfo, name: str) -> str | None:
    arg = site.arg_for(name)
    if arg is not None:
        return arg.source
    p = k.param(name)
    return p.default if p is not None and p.default else None


def _mentions(node: cst.CSTNode | None, names: set[str]) -> bool:
    """Whether ``node`` reads any of ``names``."""
    if node is None:
        return False
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

    node.visit(V())
    return bool(found & names)


class _Rewrite(cst.CSTTransformer):
    """One statement's loads, stores and reductions, given the names that depend on the row."""

    def __init__(self, dependent: set[str]):
        super().__init__()
        self.dependent = dependent

    def _depends(self, node: cst.CSTNode | None) -> bool:
        return _mentions(node, self.dependent)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        name = dotted(original.func).split(".")[-1]
        args = list(updated.args)
        if name in ("load", "store"):
            ptr = next((a.value for a in args if a.keyword is None or a.keyword.value == "pointer"),
                       None)
            if not self._depends(ptr):
                return updated
            for i, a in enumerate(args):
                if a.keyword is not None and a.keyword.value == "mask":
                    both = cst.parse_expression(f"({cst.Module([]).code_for_node(a.value)}) & {OK}")
                    args[i] = a.with_changes(value=both)
                    return updated.with_changes(args=args)
            positional = [a for a in args if a.keyword is None]
            # load(pointer, mask, ...); store(pointer, value, mask): the mask's position
            at = 2 if name == "load" else 3
            if len(positional) >= at:
                a = positional[at - 1]
                both = cst.parse_expression(f"({cst.Module([]).code_for_node(a.value)}) & {OK}")
                args[args.index(a)] = a.with_changes(value=both)
                return updated.with_changes(args=args)
            return updated.with_changes(args=append_arg(args, kw_arg("mask", cst.Name(OK))))
        if name in REDUCTIONS and args and self._depends(args[0].value):
            kept = [a for i, a in enumerate(args)
                    if i == 0 or (a.keyword is not None and a.keyword.value == "return_indices")]
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            kept = append_arg(kept, kw_arg("axis", cst.Integer("1")))
            kept = append_arg(kept, kw_arg("keep_dims", cst.Name("True")))
            return updated.with_changes(args=kept)
        return updated


def _targets(stmt: cst.BaseSmallStatement) -> set[str]:
    out: set[str] = set()
    nodes = []
    if isinstance(stmt, cst.Assign):
        nodes = [t.target for t in stmt.targets]
    elif isinstance(stmt, (cst.AugAssign, cst.AnnAssign)):
        nodes = [stmt.target]
    for n in nodes:
        if isinstance(n, cst.Name):
            out.add(n.value)
        elif isinstance(n, (cst.Tuple, cst.List)):
            out |= {e.value.value for e in n.elements if isinstance(e.value, cst.Name)}
    return out


class RowsPerProgram(Transform):
    name = "rows_per_program"
    summary = "a one-row-per-program kernel handles several rows per program, side by side"
    param_names = ("kernel", "elements")
    example_params = {"elements": 2048}

    def _targets(self, analysis: SourceAnalysis, kernel: str | None):
        out, reasons = [], []
        for k in candidate_kernels(analysis, kernel):
            checked = _check_kernel(analysis, k)
            why = checked if isinstance(checked, str) else _launch_problem(analysis, k, checked[1])
            if why:
                reasons.append(why)
            else:
                out.append((k, *checked))
        return out, reasons

    def _applies(self, analysis: SourceAnalysis, kernel: str | None = None,
                 elements: int = 2048, **_: Any) -> Applicability:
        targets, reasons = self._targets(analysis, kernel)
        if not targets:
            return first_no(reasons, "one-row-per-program kernel")
        return Applicability.yes([t[0].name for t in targets], "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, kernel: str | None = None,
               elements: int = 2048, **_: Any) -> str:
        if isinstance(elements, bool) or not isinstance(elements, int) or elements < 2 or \
                elements & (elements - 1):
            raise TransformError(f"{self.name}: elements={elements!r} must be a power of two > 1")
        targets, _ = self._targets(analysis, kernel)
        tl = "tl" if "tl" in analysis.module_names else "triton.language"
        for k, row, _, rank, cast in sorted(targets, key=lambda t: -t[0].span.line):
            source = edit_kernel(source, k, {}, whole=lambda fn, row=row, rank=rank, cast=cast:
                                 _lift(fn, row, tl, rank, cast))
        return self._launches(source, [(k.name, tiles) for k, _, tiles, _, _ in targets], elements)

    def _launches(self, source: str, kernels: list[tuple[str, Tiles]], elements: int) -> str:
        fresh = analyze_source(source)
        module = cst.parse_module(source)
        calls = launch_calls(module, fresh)
        edits: dict[int, Any] = {}
        shapes = dict(kernels)
        for s in fresh.launch_sites:
            if s.kernel not in shapes:
                continue
            k = fresh.kernel(s.kernel)
            tiles = tiles_of(s, k)
            srcs = [" * ".join(f"({_width_source(s, k, w)})" for w in t) for t in shapes[s.kernel]]
            srcs = [f"({x})" if len(t) > 1 else x for x, t in zip(srcs, shapes[s.kernel])]
            widest = srcs[0] if len(srcs) == 1 else f"max({', '.join(srcs)})"
            rows = f"max(1, {elements} // {widest})"
            tail = "".join(f", {r}" for r in tiles.rest) if tiles.rest else ","
            grid = f"(triton.cdiv({tiles.count}, {rows}){tail})"

            def edit(c: cst.Call, grid=grid, rows=rows, count=tiles.count) -> cst.Call:
                elem = cst.SubscriptElement(slice=cst.Index(value=cst.parse_expression(grid)))
                args = append_arg(list(c.args), kw_arg(COUNT, cst.parse_expression(count)))
                args = append_arg(args, kw_arg(ROWS, cst.parse_expression(rows)))
                return c.with_changes(func=c.func.with_changes(slice=[elem]), args=args)

            edits[id(calls[s.index])] = edit
        return replace(module, edits).code


def _lift(fn: cst.FunctionDef, row: str, tl: str, rank: int,
          cast: str | None = None) -> cst.FunctionDef:
    """The kernel with ``row`` a column of rows (``[R, 1]``, or ``[R, 1, 1]`` beside 2-D tiles)
    and every statement after it rewritten; a program id cast to ``cast`` stays cast (the rows
    computed in that type)."""
    body = list(fn.body.body)
    at = next(i for i, s in enumerate(body)
              if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
              and isinstance(s.body[0], cst.Assign)
              and isinstance(s.body[0].targets[0].target, cst.Name)
              and s.body[0].targets[0].target.value == row)
    first = body[at]
    pid = f"{tl}.program_id(0)" + (f".to({cast})" if cast else "")
    lifted = first.with_changes(body=[first.body[0].with_changes(value=cst.parse_expression(
        f"({pid} * {ROWS} + {tl}.arange(0, {ROWS}))[:{', None' * rank}]"))])
    ok = cst.parse_statement(f"{OK} = {row} < {COUNT}\n")
    dependent = {row}
    rest = []
    for stmt in body[at + 1:]:
        rest.append(stmt.visit(_Rewrite(dependent)))
        for small in getattr(stmt, "body", ()):
            if _mentions(getattr(small, "value", None), dependent):
                dependent |= _targets(small)
    fn = fn.with_changes(body=fn.body.with_changes(body=body[:at] + [lifted, ok] + rest))
    fn = append_param(fn, cst.Param(name=cst.Name(COUNT)), before_defaults=True)[0]
    constexpr = cst.Param(name=cst.Name(ROWS), annotation=cst.Annotation(
        cst.parse_expression(f"{tl}.constexpr")))
    return append_param(fn, constexpr, before_defaults=True)[0]


__all__ = ["RowsPerProgram"]
