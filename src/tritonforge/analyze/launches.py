"""Find every ``kernel[grid](...)`` launch of a file's kernels and read its arguments and grid.

A launch through a local alias (``fx = kern_a if c else kern_b`` then ``fx[grid](...)``, or
``fx = kern``) counts too, as one site per kernel the alias may be bound to (``LaunchSite.alias``):
a file that picks its kernel that way otherwise shows no launch of the kernels it runs, and every
launch-side move lands on a kernel it may never run.

Values are followed one step through the enclosing function: ``BLOCK = 64`` then
``kernel[grid](..., BLOCK)`` reads as the literal 64 coming from that line, so that a rewrite can
change the assignment (and everything else that reads it, such as the grid) in one place. A name
assigned more than once, or to anything but a literal, is "computed" and left alone.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field

from ._astutil import SourceText, int_literals, literal_value, names_in, subscript_keys
from .model import (
    ConstexprKnob,
    GridInfo,
    GridKind,
    KernelInfo,
    LaunchArg,
    LaunchKnobs,
    LaunchSite,
    ValueOrigin,
)

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion",
                  "launch_cooperative_grid", "launch_pdl", "stream")


@dataclass
class Scope:
    """Assignments of one function body (nested functions excluded) or of the module."""

    name: str | None
    params: set[str] = field(default_factory=set)
    assigns: dict[str, list[tuple[int, ast.expr | None]]] = field(default_factory=dict)
    defs: dict[str, ast.FunctionDef] = field(default_factory=dict)
    body: list[ast.stmt] = field(default_factory=list)

    def add(self, target: ast.expr, value: ast.expr | None, line: int) -> None:
        if isinstance(target, ast.Name):
            self.assigns.setdefault(target.id, []).append((line, value))
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) \
                and len(value.elts) == len(target.elts) else [None] * len(target.elts)
            for t, v in zip(target.elts, values):
                self.add(t, v, line)
        elif isinstance(target, ast.Starred):
            self.add(target.value, None, line)


def _scope_nodes(body: list[ast.stmt]):
    """Nodes of a body, not descending into nested function or class definitions."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def build_scope(name: str | None, body: list[ast.stmt], params: set[str] | None = None) -> Scope:
    scope = Scope(name, set(params or ()), body=body)
    for node in _scope_nodes(body):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Assign):
            for t in node.targets:
                scope.add(t, node.value, line)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            scope.add(node.target, node.value, line)
        elif isinstance(node, ast.AugAssign):
            scope.add(node.target, None, line)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            scope.add(node.target, None, line)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    scope.add(item.optional_vars, None, line)
        elif isinstance(node, ast.NamedExpr):
            scope.add(node.target, node.value, line)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body is not body:
            scope.defs[node.name] = node
            scope.add(ast.Name(node.name), None, node.lineno)
    return scope


def _block_at(stmts: list[ast.stmt], line: int) -> tuple[list[ast.stmt], ast.stmt] | None:
    """The innermost statement list holding a statement that spans ``line``, and that statement."""
    for st in stmts:
        if not st.lineno <= line <= (st.end_lineno or st.lineno):
            continue
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return stmts, st
        blocks = [v for _, v in ast.iter_fields(st) if isinstance(v, list) and v
                  and isinstance(v[0], ast.stmt)]
        blocks += [h.body for h in getattr(st, "handlers", []) + getattr(st, "cases", [])]
        for block in blocks:
            found = _block_at(block, line)
            if found is not None:
                return found
        return stmts, st
    return None


def _assigned_just_before(body: list[ast.stmt], name: str, assign_line: int, line: int) -> bool:
    """Whether the assignment of ``name`` at ``assign_line`` is a plain ``name = ...`` statement of
    the same block as the statement at ``line``, before it: whatever else assigns ``name``, the
    value at ``line`` is that one (every later assignment has a later line)."""
    found = _block_at(body, line)
    if found is None:
        return False
    block, at = found
    for st in block[:block.index(at)]:
        if st.lineno == assign_line and isinstance(st, ast.Assign) and len(st.targets) == 1 \
                and isinstance(st.targets[0], ast.Name) and st.targets[0].id == name:
            return True
    return False


def _fn_params(fn: ast.FunctionDef | ast.Lambda) -> set[str]:
    a = fn.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    names |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    return names


class _Resolver:
    """Follows bare names through the enclosing function, then the module."""

    def __init__(self, local: Scope | None, module: Scope):
        self.local, self.module = local, module

    def literal(self, name: str, line: int) -> tuple[ValueOrigin, object, int | None]:
        for scope, origin in ((self.local, ValueOrigin.LOCAL), (self.module, ValueOrigin.GLOBAL)):
            if scope is None:
                continue
            if name in scope.params:
                return ValueOrigin.COMPUTED, None, None
            if name in scope.assigns:
                entries = scope.assigns[name]
                if len(entries) == 1 and (origin is ValueOrigin.GLOBAL or entries[0][0] <= line):
                    ok, value = literal_value(entries[0][1])
                    if ok:
                        return origin, value, entries[0][0]
                return ValueOrigin.COMPUTED, None, None
        return ValueOrigin.COMPUTED, None, None

    def single_value(self, name: str, line: int) -> ast.expr | None:
        """What a local name is assigned, when the enclosing function assigns it exactly once."""
        if self.local is None or name in self.local.params:
            return None
        entries = self.local.assigns.get(name, [])
        return entries[0][1] if len(entries) == 1 and entries[0][0] <= line else None

    def last_value(self, name: str, line: int) -> ast.expr | None:
        for scope in (self.local, self.module):
            if scope is None or name in scope.params:
                continue
            entries = [e for e in scope.assigns.get(name, []) if e[0] <= line or scope is self.module]
            if entries:
                return entries[-1][1]
        return None

    def binding(self, name: str, line: int) -> str:
        """How a bare name is bound at ``line`` (GridInfo.binding)."""
        if self.local is not None and (name in self.local.params or name in self.local.assigns):
            if self.single_value(name, line) is not None:
                return "local"
            before = [e[0] for e in self.local.assigns.get(name, []) if e[0] <= line]
            known = name not in self.local.params and before \
                and _assigned_just_before(self.local.body, name, max(before), line)
            return "local" if known else "other"
        entries = self.module.assigns.get(name, [])
        return "global" if len(entries) == 1 and entries[0][1] is not None else "other"

    def function(self, name: str) -> ast.FunctionDef | None:
        for scope in (self.local, self.module):
            if scope is not None and name in scope.defs:
                return scope.defs[name]
        return None

    def closure(self, expr: ast.AST, skip: set[str] = frozenset()) -> tuple[set[str], list[int]]:
        """Names and int literals ``expr`` reads, following local assignments transitively."""
        names: set[str] = set()
        ints = list(int_literals(expr))
        todo = [n for n in names_in(expr) if n not in skip]
        while todo:
            n = todo.pop()
            if n in names:
                continue
            names.add(n)
            scope = self.local if self.local is not None and n in self.local.assigns else None
            if scope is None:
                continue
            for _, value in scope.assigns[n]:
                if value is not None:
                    ints += int_literals(value)
                    todo += [m for m in names_in(value) if m not in names]
        return names, ints


def _grid(node: ast.expr, text: SourceText, res: _Resolver, line: int) -> GridInfo:
    info = _grid_info(node, text, res, line)
    if isinstance(node, ast.Name):
        return dataclasses.replace(info, binding=res.binding(node.id, line))
    return info


def _grid_info(node: ast.expr, text: SourceText, res: _Resolver, line: int) -> GridInfo:
    resolved: ast.AST = node
    if isinstance(node, ast.Name):
        fn = res.function(node.id)
        value = res.last_value(node.id, line)
        if value is not None:
            resolved = value
        elif fn is not None:
            resolved = fn
    if isinstance(resolved, ast.Lambda):
        arg = resolved.args.args[0].arg if resolved.args.args else ""
        names, ints = res.closure(resolved.body, _fn_params(resolved))
        body = resolved.body
        dims = len(body.elts) if isinstance(body, (ast.Tuple, ast.List)) else None
        return GridInfo(text.text(node), GridKind.LAMBDA, text.text(resolved), dims,
                        tuple(sorted(names)), tuple(subscript_keys(body, arg)), tuple(ints))
    if isinstance(resolved, (ast.FunctionDef, ast.AsyncFunctionDef)):
        arg = resolved.args.args[0].arg if resolved.args.args else ""
        rets = [n.value for n in ast.walk(resolved) if isinstance(n, ast.Return) and n.value]
        dims = len(rets[0].elts) if rets and isinstance(rets[0], (ast.Tuple, ast.List)) else None
        keys = [k for stmt in resolved.body for k in subscript_keys(stmt, arg)]
        names: set[str] = set()
        ints: list[int] = []
        for stmt in resolved.body:
            n, i = res.closure(stmt, _fn_params(resolved))
            names |= n
            ints += i
        return GridInfo(text.text(node), GridKind.FUNCTION, resolved.name, dims,
                        tuple(sorted(names)), tuple(dict.fromkeys(keys)), tuple(ints))
    names, ints = res.closure(resolved)
    if isinstance(resolved, (ast.Tuple, ast.List)):
        kind, dims = GridKind.TUPLE, len(resolved.elts)
    else:
        kind, dims = GridKind.OTHER, None
    return GridInfo(text.text(node), kind, text.text(resolved), dims, tuple(sorted(names)), (),
                    tuple(ints))


def _arg(node: ast.expr, text: SourceText, res: _Resolver, line: int, *, position=None,
         keyword=None, param=None) -> LaunchArg:
    ok, value = literal_value(node)
    if ok:
        origin = ValueOrigin.KEYWORD if keyword is not None else ValueOrigin.POSITIONAL
        return LaunchArg(text.text(node), text.span(node), position, keyword, param, value, True,
                         origin)
    if isinstance(node, ast.Name):
        origin, value, vline = res.literal(node.id, line)
        single = res.single_value(node.id, line)
        return LaunchArg(text.text(node), text.span(node), position, keyword, param, value,
                         origin is not ValueOrigin.COMPUTED, origin, node.id, vline,
                         text.text(single) if single is not None else None)
    return LaunchArg(text.text(node), text.span(node), position, keyword, param)


def launch_kernel_name(call: ast.Call, kernels: set[str]) -> str | None:
    """The kernel a call launches when it has the form ``kernel[grid](...)``."""
    func = call.func
    if not isinstance(func, ast.Subscript):
        return None
    target = func.value
    if isinstance(target, ast.Name) and target.id in kernels:
        return target.id
    if isinstance(target, ast.Attribute) and target.attr in kernels:
        return target.attr
    return None


def alias_kernels(value: ast.expr | None, kernels: set[str]) -> tuple[str, ...] | None:
    """The kernels ``value`` may evaluate to when it is a kernel's bare name or a conditional
    between such names (``a if c else b``, nested too); None for anything else."""
    if isinstance(value, ast.Name) and value.id in kernels:
        return (value.id,)
    if isinstance(value, ast.IfExp):
        body, orelse = alias_kernels(value.body, kernels), alias_kernels(value.orelse, kernels)
        if body is not None and orelse is not None:
            return tuple(dict.fromkeys(body + orelse))
    return None


def launch_alias(call: ast.Call, kernels: set[str], scope: Scope | None
                 ) -> tuple[str, tuple[str, ...]] | None:
    """``(name, kernels)`` when a call has the form ``name[grid](...)`` and ``name`` is a local
    of the enclosing function assigned exactly once, to a kernel or a conditional between
    kernels (``fx = a if gemma else b``). Parameters, names assigned twice, loop variables and
    module-level names stay unresolved: no single binding is known for them."""
    func = call.func
    if scope is None or not isinstance(func, ast.Subscript) or not isinstance(func.value, ast.Name):
        return None
    name = func.value.id
    if name in kernels or name in scope.params:
        return None
    entries = scope.assigns.get(name, [])
    if len(entries) != 1:
        return None
    found = alias_kernels(entries[0][1], kernels)
    return (name, found) if found else None


def _knobs(index: int, kernel: KernelInfo | None, name: str, args: tuple[LaunchArg, ...],
           grid: GridInfo, nw: LaunchArg | None, ns: LaunchArg | None) -> LaunchKnobs:
    knobs: list[ConstexprKnob] = []
    autotuned = kernel is not None and kernel.autotune is not None
    if kernel is not None:
        tuned = set(kernel.autotune.tuned_names) if kernel.autotune else set()
        tiled = {t.name for t in kernel.tiled_constexprs}
        blocks = set(kernel.block_constexprs)
        for p in kernel.constexpr_params:
            arg = next((a for a in args if a.param == p.name), None)
            follows = p.name in grid.meta_keys or (
                arg is not None and arg.variable is not None and arg.variable in grid.names)
            common = dict(tiles_grid=p.name in tiled, grid_follows=follows,
                          block_like=p.name in blocks)
            if p.name in tuned and arg is None:
                knobs.append(ConstexprKnob(p.name, None, ValueOrigin.AUTOTUNE, "configs", **common))
            elif p.name in kernel.heuristics and arg is None:
                knobs.append(ConstexprKnob(p.name, None, ValueOrigin.HEURISTICS, "heuristics",
                                           **common))
            elif arg is None:
                ok, value = literal_value(ast.parse(p.default, mode="eval").body) \
                    if p.default else (False, None)
                knobs.append(ConstexprKnob(p.name, value if ok else None, ValueOrigin.DEFAULT,
                                           p.default or "", ok, **common))
            else:
                knobs.append(ConstexprKnob(p.name, arg.literal, arg.origin, arg.source,
                                           arg.is_literal, **common))

    def lit(a: LaunchArg | None) -> int | None:
        return a.literal if a is not None and a.is_literal and isinstance(a.literal, int) else None

    return LaunchKnobs(index, name, tuple(knobs), lit(nw), lit(ns), nw is not None, ns is not None,
                       autotuned)


def find_launches(tree: ast.Module, text: SourceText, kernels: dict[str, KernelInfo],
                  module_scope: Scope) -> tuple[LaunchSite, ...]:
    found: list[tuple[ast.Call, str, str | None, Scope | None, str | None, tuple[str, ...]]] = []
    names = set(kernels)

    def visit(node: ast.AST, qual: list[str], scope: Scope | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = build_scope(child.name, child.body, _fn_params(child))
                visit(child, qual + [child.name], inner)
            elif isinstance(child, ast.ClassDef):
                visit(child, qual + [child.name], scope)
            else:
                if isinstance(child, ast.Call):
                    kname = launch_kernel_name(child, names)
                    alias = launch_alias(child, names, scope) if kname is None else None
                    if kname is not None:
                        found.append((child, kname, ".".join(qual) or None, scope, None, ()))
                    elif alias is not None:
                        for target in alias[1]:
                            found.append((child, target, ".".join(qual) or None, scope,
                                          alias[0], alias[1]))
                visit(child, qual, scope)

    visit(tree, [], None)
    found.sort(key=lambda f: (f[0].lineno, f[0].col_offset))   # stable: alias order kept
    sites = []
    for index, (call, kname, qual, scope, alias, targets) in enumerate(found):
        res = _Resolver(scope, module_scope)
        kernel = kernels.get(kname)
        params = kernel.param_names if kernel else ()
        line = call.lineno
        args: list[LaunchArg] = []
        star = star_kwargs = False
        for i, a in enumerate(call.args):
            if isinstance(a, ast.Starred):
                star = True
            param = params[i] if not star and i < len(params) else None
            args.append(_arg(a, text, res, line, position=i, param=param))
        nw = ns = None
        options = []
        for kw in call.keywords:
            if kw.arg is None:
                star = star_kwargs = True
                continue
            if kw.arg == "num_warps":
                nw = _arg(kw.value, text, res, line, keyword=kw.arg)
            elif kw.arg == "num_stages":
                ns = _arg(kw.value, text, res, line, keyword=kw.arg)
            elif kw.arg in params:
                args.append(_arg(kw.value, text, res, line, keyword=kw.arg, param=kw.arg))
            else:
                options.append(kw.arg)
        grid = _grid(call.func.slice, text, res, line)
        knobs = _knobs(index, kernel, kname, tuple(args), grid, nw, ns)
        sites.append(LaunchSite(index, kname, text.span(call), qual, grid, tuple(args), nw, ns,
                                tuple(options), star, knobs, alias, targets, star_kwargs))
    return tuple(sites)
