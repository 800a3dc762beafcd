"""Read one ``@triton.jit`` function: parameters, decorators and what its body does.

The body analysis is a light data flow over the kernel's local assignments, enough to answer the
questions the transforms ask: which pointer parameters are read, written or updated atomically
(through ``x_ptr + offsets`` chains and ``tl.make_block_ptr(base=...)``), which constexprs tile a
program id (``pid * BLOCK``: the grid must follow them), which loops hold loads.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ._astutil import (
    SourceText,
    dotted,
    is_tl_call,
    literal_value,
    names_in,
    tl_name,
    walk_in_order,
)
from .model import (
    AutotuneConfig,
    AutotuneInfo,
    ConstexprStyle,
    KernelInfo,
    LoopInfo,
    LoopKind,
    Param,
    TiledConstexpr,
)

_ATOMICS = ("atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
            "atomic_xchg", "atomic_cas")


def _decorator_target(dec: ast.expr) -> str:
    return dotted(dec.func if isinstance(dec, ast.Call) else dec)


def is_jit_decorator(dec: ast.expr) -> bool:
    name = _decorator_target(dec)
    return name in ("triton.jit", "jit") or (name.endswith(".jit") and not name.startswith("torch"))


def is_kernel_def(node: ast.AST) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        is_jit_decorator(d) for d in node.decorator_list)


def _call_arg(call: ast.Call, pos: int, kw: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == kw:
            return k.value
    if len(call.args) > pos and not any(isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
        return call.args[pos]
    return None


def _str_list(node: ast.expr | None) -> tuple[str, ...]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return tuple(e.value for e in node.elts
                     if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return ()


def _parse_config(call: ast.Call, text: SourceText) -> AutotuneConfig:
    kwargs: list[tuple[str, object]] = []
    d = _call_arg(call, 0, "kwargs")
    if isinstance(d, ast.Dict):
        for k, v in zip(d.keys, d.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                ok, val = literal_value(v)
                kwargs.append((k.value, val if ok else None))

    def lit(name: str, pos: int) -> int | None:
        ok, val = literal_value(_call_arg(call, pos, name))
        return val if ok and isinstance(val, int) else None

    return AutotuneConfig(tuple(kwargs), lit("num_warps", 1), lit("num_stages", 2), text.text(call))


def parse_autotune(dec: ast.Call, text: SourceText,
                   module_assigns: dict[str, ast.expr]) -> AutotuneInfo:
    configs = _call_arg(dec, 0, "configs")
    resolved = configs
    if isinstance(configs, ast.Name) and configs.id in module_assigns:
        resolved = module_assigns[configs.id]
    calls = [n for n in walk_in_order(resolved)
             if isinstance(n, ast.Call) and _decorator_target(n).split(".")[-1] == "Config"] \
        if resolved is not None else []
    literal = isinstance(resolved, ast.List) and bool(resolved.elts) and all(
        isinstance(e, ast.Call) and _decorator_target(e).split(".")[-1] == "Config"
        for e in resolved.elts)
    kw = {k.arg for k in dec.keywords}
    return AutotuneInfo(
        configs=tuple(_parse_config(c, text) for c in calls),
        key=_str_list(_call_arg(dec, 1, "key")),
        configs_source=text.text(configs),
        configs_literal=literal,
        restore_value=_str_list(_call_arg(dec, 99, "restore_value")),
        reset_to_zero=_str_list(_call_arg(dec, 99, "reset_to_zero")),
        has_prune="prune_configs_by" in kw,
        has_hooks=bool(kw & {"pre_hook", "post_hook"}),
    )


def _params(fn: ast.FunctionDef, text: SourceText) -> tuple[Param, ...]:
    a = fn.args
    positional = list(a.posonlyargs) + list(a.args)
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    entries = list(zip(positional, defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
    out = []
    for i, (arg, default) in enumerate(entries):
        style = None
        ann = arg.annotation
        if ann is not None:
            if dotted(ann).endswith("constexpr"):
                style = ConstexprStyle.ANNOTATION
            elif isinstance(ann, ast.Constant) and isinstance(ann.value, str) \
                    and ann.value.strip().endswith("constexpr"):
                style = ConstexprStyle.STRING
        out.append(Param(arg.arg, i, text.text(ann) if ann is not None else None,
                         text.text(default) if default is not None else None, style))
    return tuple(out)


@dataclass
class _Flow:
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


def _collect_flow(body: list[ast.stmt]) -> _Flow:
    flow = _Flow()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    flow.add(t, node.value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                flow.add(node.target, node.value)
            elif isinstance(node, (ast.For, ast.comprehension)):
                flow.add(node.target, None)
    return flow


class _BodyReader:
    def __init__(self, fn: ast.FunctionDef, params: tuple[Param, ...]):
        self.fn = fn
        self.runtime = {p.name for p in params if not p.is_constexpr}
        self.constexprs = {p.name for p in params if p.is_constexpr}
        self.flow = _collect_flow(fn.body)
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
                return self.bases(_call_arg(expr, 0, "base"), seen)
            if name == "advance":
                return self.bases(_call_arg(expr, 0, "base"), seen)
            if name in ("multiple_of", "max_contiguous", "max_constancy"):
                return self.bases(_call_arg(expr, 0, "input"), seen)
            if isinstance(expr.func, ast.Attribute) and expr.func.attr in ("to", "cast"):
                return self.bases(expr.func.value, seen)
        if isinstance(expr, ast.Subscript):
            return self.bases(expr.value, seen)
        return set()

    def pid_axes(self, expr: ast.expr | None) -> frozenset[int]:
        """Grid axes whose program id flows into ``expr``."""
        if expr is None:
            return frozenset()
        axes: set[int] = set()
        for node in ast.walk(expr):
            if is_tl_call(node, "program_id"):
                ok, axis = literal_value(_call_arg(node, 0, "axis"))
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


def _loops(fn: ast.FunctionDef, text: SourceText) -> tuple[LoopInfo, ...]:
    found: list[LoopInfo] = []

    def record(node: ast.For | ast.While, depth: int) -> None:
        inner = [n for n in ast.walk(node) if n is not node and isinstance(n, (ast.For, ast.While))]
        loads = sum(1 for n in ast.walk(node) if is_tl_call(n, "load"))
        num_stages = None
        if isinstance(node, ast.While):
            kind, target = LoopKind.WHILE, ""
        else:
            target = text.text(node.target)
            it = node.iter
            is_call = isinstance(it, ast.Call)
            tl = tl_name(it.func) if is_call else ""
            if is_call and dotted(it.func) == "range":
                kind = LoopKind.RANGE
            elif tl == "range":
                kind = LoopKind.TL_RANGE
                ok, val = literal_value(_call_arg(it, 99, "num_stages"))
                num_stages = val if ok and isinstance(val, int) else None
            elif tl == "static_range":
                kind = LoopKind.STATIC_RANGE
            else:
                kind = LoopKind.OTHER_FOR
        found.append(LoopInfo(0, kind, text.span(node), target, loads, not inner, depth, num_stages))

    def scan(node: ast.AST, depth: int) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.For, ast.While)):
                record(child, depth)
                scan(child, depth + 1)
            else:
                scan(child, depth)

    for stmt in fn.body:
        if isinstance(stmt, (ast.For, ast.While)):
            record(stmt, 0)
            scan(stmt, 1)
        else:
            scan(stmt, 0)
    found.sort(key=lambda lp: (lp.span.line, lp.span.col))
    return tuple(LoopInfo(i, lp.kind, lp.span, lp.target, lp.loads, lp.innermost, lp.depth,
                          lp.num_stages) for i, lp in enumerate(found))


def analyze_kernel(fn: ast.FunctionDef, text: SourceText, module_assigns: dict[str, ast.expr],
                   nested: bool = False) -> KernelInfo:
    params = _params(fn, text)
    autotune = None
    heuristics: list[str] = []
    jit_kwargs = ""
    for dec in fn.decorator_list:
        last = _decorator_target(dec).split(".")[-1]
        if last == "autotune" and isinstance(dec, ast.Call):
            autotune = parse_autotune(dec, text, module_assigns)
        elif last == "heuristics" and isinstance(dec, ast.Call):
            values = _call_arg(dec, 0, "values")
            if isinstance(values, ast.Dict):
                heuristics += [k.value for k in values.keys
                               if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        elif is_jit_decorator(dec) and isinstance(dec, ast.Call):
            jit_kwargs = ", ".join(text.text(a) for a in list(dec.args) + list(dec.keywords))

    reader = _BodyReader(fn, params)
    loaded: set[str] = set()
    stored: set[str] = set()
    atomic: set[str] = set()
    atomics: list[str] = []
    axes: list[int] = []
    tiled: dict[str, set[int]] = {}
    arange: set[str] = set()
    compared: set[str] = set()
    unresolved = loads = stores = 0
    uses_dot = uses_num_programs = has_return = False
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Return):
                has_return = True
            elif isinstance(node, ast.Compare):
                compared |= names_in(node) & reader.runtime
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                for side, other in ((node.left, node.right), (node.right, node.left)):
                    side_axes = reader.pid_axes(side)
                    if side_axes and not reader.pid_axes(other):
                        for name in names_in(other) & reader.constexprs:
                            tiled.setdefault(name, set()).update(side_axes)
            if not isinstance(node, ast.Call):
                continue
            name = tl_name(node.func)
            plain = dotted(node.func)
            if name == "load":
                loads += 1
                loaded |= reader.bases(_call_arg(node, 0, "pointer"))
            elif name == "store":
                stores += 1
                b = reader.bases(_call_arg(node, 0, "pointer"))
                stored |= b
                unresolved += not b
            elif name in _ATOMICS:
                atomics.append(name)
                b = reader.bases(_call_arg(node, 0, "pointer"))
                atomic |= b
                unresolved += not b
            elif name in ("dot", "dot_scaled"):
                uses_dot = True
            elif name == "program_id":
                ok, axis = literal_value(_call_arg(node, 0, "axis"))
                axes.append(axis if ok and isinstance(axis, int) else -1)
            elif name == "num_programs":
                uses_num_programs = True
            elif name == "arange":
                for a in node.args:
                    arange |= names_in(a) & reader.constexprs
            if name in ("range", "static_range", "cdiv") or plain == "range":
                for a in node.args:
                    compared |= names_in(a) & reader.runtime
    order = {p.name: p.index for p in params}
    srt = lambda names: tuple(sorted(names, key=lambda n: order.get(n, 1 << 30)))  # noqa: E731
    first = fn.decorator_list[0] if fn.decorator_list else fn
    start = text.span(first)
    end = text.span(fn)
    return KernelInfo(
        name=fn.name,
        span=type(start)(start.line, start.col, end.end_line, end.end_col),
        def_line=fn.lineno,
        params=params,
        decorators=tuple(text.text(d) for d in fn.decorator_list),
        autotune=autotune,
        heuristics=tuple(heuristics),
        jit_kwargs=jit_kwargs,
        uses_dot=uses_dot,
        atomics=tuple(dict.fromkeys(atomics)),
        loops=_loops(fn, text),
        program_id_axes=tuple(sorted(set(axes))),
        uses_num_programs=uses_num_programs,
        loads=loads,
        stores=stores,
        loaded_params=srt(loaded),
        stored_params=srt(stored),
        atomic_params=srt(atomic),
        unresolved_accesses=unresolved,
        tiled_constexprs=tuple(TiledConstexpr(n, tuple(sorted(a))) for n, a in
                               sorted(tiled.items(), key=lambda kv: order.get(kv[0], 0))),
        arange_constexprs=srt(arange),
        compared_params=srt(compared),
        has_return=has_return,
        nested=nested,
    )
