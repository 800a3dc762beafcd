"""Read one ``@triton.jit`` function: parameters, decorators and what its body does.

The body analysis is a light data flow over the kernel's local assignments, enough to answer the
questions the transforms ask: which pointer parameters are read, written or updated atomically
(through ``x_ptr + offsets`` chains and ``tl.make_block_ptr(base=...)``), which constexprs tile a
program id (``pid * BLOCK``: the grid must follow them), which loops hold loads.
"""

from __future__ import annotations

import ast

from ._astutil import (
    SourceText,
    dotted,
    is_tl_call,
    literal_value,
    names_in,
    tl_name,
    walk_in_order,
)
from .flow import (
    ATOMICS,
    BodyReader,
    call_arg,
    find_accesses,
    find_offsets,
    find_pid_vars,
    stepped_constexprs,
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


def _decorator_target(dec: ast.expr) -> str:
    return dotted(dec.func if isinstance(dec, ast.Call) else dec)


def is_jit_decorator(dec: ast.expr) -> bool:
    name = _decorator_target(dec)
    return name in ("triton.jit", "jit") or (name.endswith(".jit") and not name.startswith("torch"))


def is_kernel_def(node: ast.AST) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        is_jit_decorator(d) for d in node.decorator_list)


def _str_list(node: ast.expr | None) -> tuple[str, ...]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return tuple(e.value for e in node.elts
                     if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return ()


def _parse_config(call: ast.Call, text: SourceText) -> AutotuneConfig:
    kwargs: list[tuple[str, object]] = []
    d = call_arg(call, 0, "kwargs")
    if isinstance(d, ast.Dict):
        for k, v in zip(d.keys, d.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                ok, val = literal_value(v)
                kwargs.append((k.value, val if ok else None))

    def lit(name: str, pos: int) -> int | None:
        ok, val = literal_value(call_arg(call, pos, name))
        return val if ok and isinstance(val, int) else None

    return AutotuneConfig(tuple(kwargs), lit("num_warps", 1), lit("num_stages", 2), text.text(call))


def _is_config(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _decorator_target(node).split(".")[-1] == "Config"


def _complete(node: ast.AST | None) -> bool:
    """Whether every config comes from a ``triton.Config`` call written in ``node``."""
    if isinstance(node, ast.List):
        return bool(node.elts) and all(_is_config(e) for e in node.elts)
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return _is_config(node.elt)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _complete(node.left) and _complete(node.right)
    return False


def parse_autotune(dec: ast.Call, text: SourceText,
                   module_assigns: dict[str, ast.expr]) -> AutotuneInfo:
    configs = call_arg(dec, 0, "configs")
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
    head = resolved.left if isinstance(resolved, ast.BinOp) and isinstance(resolved.op, ast.Add) \
        else resolved
    extendable = isinstance(head, ast.List) and any(
        isinstance(e, ast.Call) and _decorator_target(e).split(".")[-1] == "Config"
        for e in head.elts)
    return AutotuneInfo(
        configs_complete=_complete(resolved),
        configs=tuple(_parse_config(c, text) for c in calls),
        key=_str_list(call_arg(dec, 1, "key")),
        configs_source=text.text(configs),
        configs_literal=literal,
        restore_value=_str_list(call_arg(dec, 99, "restore_value")),
        reset_to_zero=_str_list(call_arg(dec, 99, "reset_to_zero")),
        has_prune="prune_configs_by" in kw,
        has_hooks=bool(kw & {"pre_hook", "post_hook"}),
        configs_extendable=extendable,
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
                ok, val = literal_value(call_arg(it, 99, "num_stages"))
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


def _is_return_guard(stmt: ast.stmt) -> bool:
    """``if cond: return``: a bare return as the whole body, and no else."""
    return isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1 \
        and isinstance(stmt.body[0], ast.Return) and stmt.body[0].value is None


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
            values = call_arg(dec, 0, "values")
            if isinstance(values, ast.Dict):
                heuristics += [k.value for k in values.keys
                               if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        elif is_jit_decorator(dec) and isinstance(dec, ast.Call):
            jit_kwargs = ", ".join(text.text(a) for a in list(dec.args) + list(dec.keywords))

    reader = BodyReader(fn, params)
    loaded: set[str] = set()
    stored: set[str] = set()
    atomic: set[str] = set()
    atomics: list[str] = []
    axes: list[int] = []
    tiled: dict[str, set[int]] = {}
    arange: set[str] = set()
    compared: set[str] = set()
    compared_c: set[str] = set()        # constexprs, likewise
    unresolved = loads = stores = returns = 0
    uses_dot = uses_num_programs = False
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Return):
                returns += 1
            elif isinstance(node, ast.Compare):
                compared |= names_in(node) & reader.runtime
                compared_c |= names_in(node) & reader.constexprs
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                # a tile index (a name or the call itself) times a constexpr: ``pid * BLOCK``;
                # ``(b * H + h) * D`` is a flat index times a problem size, not a tiling
                for side, other in ((node.left, node.right), (node.right, node.left)):
                    if not (isinstance(side, ast.Name) or is_tl_call(side, "program_id")):
                        continue
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
                loaded |= reader.bases(call_arg(node, 0, "pointer"))
            elif name == "store":
                stores += 1
                b = reader.bases(call_arg(node, 0, "pointer"))
                stored |= b
                unresolved += not b
            elif name in ATOMICS:
                atomics.append(name)
                b = reader.bases(call_arg(node, 0, "pointer"))
                atomic |= b
                unresolved += not b
            elif name in ("dot", "dot_scaled"):
                uses_dot = True
            elif name == "program_id":
                ok, axis = literal_value(call_arg(node, 0, "axis"))
                axes.append(axis if ok and isinstance(axis, int) else -1)
            elif name == "num_programs":
                uses_num_programs = True
            elif name == "arange":
                for a in node.args:
                    arange |= names_in(a) & reader.constexprs
            if name in ("range", "static_range", "cdiv") or plain == "range":
                for a in node.args:
                    compared |= names_in(a) & reader.runtime
                    compared_c |= names_in(a) & reader.constexprs
    guards = tuple(stmt.lineno for stmt in fn.body if _is_return_guard(stmt))
    has_return = returns > 0
    last = fn.body[-1]
    returns -= isinstance(last, ast.Return) and last.value is None    # a final bare return: a no-op
    order = {p.name: p.index for p in params}
    srt = lambda names: tuple(sorted(names, key=lambda n: order.get(n, 1 << 30)))  # noqa: E731
    first = fn.decorator_list[0] if fn.decorator_list else fn
    start = text.span(first)
    if fn.decorator_list:       # ast puts decorators after the "@": the span starts at it
        at = text.lines[start.line - 1].rfind("@", 0, start.col + 1)
        start = type(start)(start.line, max(at, 0), start.end_line, start.end_col)
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
        compared_constexprs=srt(compared_c - arange),
        has_return=has_return,
        return_guards=guards,
        other_returns=returns - len(guards),
        nested=nested,
        stepped_constexprs=srt(stepped_constexprs(fn, reader)),
        program_id_calls=tuple(axes),
        pid_vars=tuple(find_pid_vars(fn, reader, text)),
        offsets=tuple(find_offsets(fn, reader, text)),
        accesses=tuple(find_accesses(fn, reader, text)),
        body_names=tuple(sorted(reader.flow.assigns)),
        has_varargs=fn.args.vararg is not None or fn.args.kwarg is not None,
        reassigned_params=srt(set(reader.flow.assigns) & set(order)),
    )
