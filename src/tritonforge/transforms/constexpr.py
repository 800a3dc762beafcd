"""Change a hard-coded constexpr (a block size) at a launch, with the grid following it.

Where the value is written decides what is edited: ``BLOCK_SIZE = 4`` in the launching function
(or at module level) is changed where it is assigned, so the grid and everything else written in
terms of that name follow; a literal at the launch (``BLOCK_SIZE=1024``, positional ``1024``) is
changed at the launch. A kernel that multiplies a program id by the constexpr needs a grid that
follows it: a META lambda or a grid reading the same name does; a grid holding the old literal
(``triton.cdiv(n, 1024)``) has that literal rewritten too; any other grid is a refusal.

Only tile sizes are changed by default (constexprs that multiply a program id or step a loop):
HEAD_DIM or IS_CAUSAL describe the problem, and changing them changes the result.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import libcst as cst

from ..analyze import ConstexprKnob, KernelInfo, LaunchSite, SourceAnalysis, ValueOrigin
from ..errors import TransformError
from ._cst import (
    find_function,
    grid_node,
    int_node,
    launch_calls,
    literal_node,
    replace,
    set_keyword,
    site_selection,
)
from .base import Applicability, Transform, first_no


@dataclass(frozen=True)
class _Plan:
    site: LaunchSite
    origin: ValueOrigin
    variable: str | None
    old: object
    rewrite_grid_literal: bool


def check_block_value(kernel: KernelInfo, name: str, value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"{name}={value!r}: a block size must be a positive integer"
    if name in kernel.arange_constexprs and value & (value - 1):
        return f"{name}={value} is used in tl.arange, which needs a power of two"
    # every tile of a tl.dot kernel: a K tile that only sizes a tl.arange and advances pointers
    # (`offs_k += TILE_K`, no loop step) is none of block_constexprs, and an autotune range
    # extension took bmm_optimized's TILE_K 32 down to 8, which tl.dot cannot compile
    tile = name in kernel.block_constexprs or name in kernel.arange_constexprs
    if kernel.uses_dot and tile and value < 16:
        return f"{name}={value}: {kernel.name} uses tl.dot, which needs tiles of at least 16"
    return None


def _direct_grid_ints(site: LaunchSite) -> list[int]:
    try:
        expr = ast.parse(site.grid.resolved, mode="eval")
    except SyntaxError:
        return []
    return [n.value for n in ast.walk(expr) if isinstance(n, ast.Constant)
            and isinstance(n.value, int) and not isinstance(n.value, bool)]


def site_knob(analysis: SourceAnalysis, site: LaunchSite, name: str) -> ConstexprKnob | str:
    """Constexpr ``name``'s knob at ``site``, or why no launch-side rewrite may set it: the kernel
    has no such constexpr, or @triton.autotune / @triton.heuristics chooses it (shared by
    ``constexpr_override`` and ``param_block_override``)."""
    where = f"site {site.index} ({site.kernel})"
    knob = site.knobs.constexpr(name) if site.knobs else None
    if knob is None:
        names = analysis.kernel(site.kernel).constexpr_names
        return f"{where}: {site.kernel} has no constexpr {name!r} " \
               f"(constexprs: {', '.join(names) or 'none'})"
    if knob.origin is ValueOrigin.AUTOTUNE:
        return f"{where}: {name} is chosen by @triton.autotune (widen the configs instead)"
    if knob.origin is ValueOrigin.HEURISTICS:
        return f"{where}: {name} is computed by @triton.heuristics"
    return knob


def plan_site(analysis: SourceAnalysis, site: LaunchSite, name: str, value: object,
              force: bool = False) -> _Plan | str:
    """How to set constexpr ``name`` to ``value`` at ``site``, or why it cannot be done.

    At a call through an alias (``fx[grid](...)``, ``fx`` one of several kernels) the value
    written there reaches whichever kernel runs, so it must suit each of them, be written in the
    same place for each (the same keyword, or the same local), and change what each reads."""
    plan = _plan_one(analysis, site, name, value, force)
    if isinstance(plan, str):
        return plan
    for other in analysis.same_call(site):
        theirs = _plan_one(analysis, other, name, value, force)
        if isinstance(theirs, str):
            return f"site {site.index} ({site.kernel}) launches through `{site.alias}`, which " \
                   f"may also be {other.kernel}: {theirs}"
        if _binding(theirs, name) != _binding(plan, name):
            return f"site {site.index} ({site.kernel}) launches through `{site.alias}`, which " \
                   f"may also be {other.kernel}, where {name} is bound otherwise"
    return plan


def _binding(plan: _Plan, name: str) -> tuple:
    arg = plan.site.arg_for(name)
    return plan.origin, plan.variable, plan.old, arg.span if arg is not None else None


def _plan_one(analysis: SourceAnalysis, site: LaunchSite, name: str, value: object,
              force: bool = False) -> _Plan | str:
    kernel = analysis.kernel(site.kernel)
    where = f"site {site.index} ({site.kernel})"
    knob = site_knob(analysis, site, name)
    if isinstance(knob, str):
        return knob
    if not knob.tunable:
        if knob.origin is ValueOrigin.DEFAULT:
            return f"{where}: {name} is not passed at the launch and has no literal default"
        return f"{where}: {name} is computed at the launch (`{knob.source}`), not a literal"
    if not knob.block_like and not force:
        return f"{where}: {name} is not a tile size (it neither multiplies a program id nor " \
               "steps a loop), so changing it would change the result (force=True overrides)"
    bad = check_block_value(kernel, name, value) if knob.block_like else None
    if bad:
        return f"{where}: {bad}"
    if knob.value == value:
        return f"{where}: {name} is already {value!r}"
    rewrite = False
    if knob.tiles_grid and not knob.grid_follows:
        grid = site.grid
        if grid.kind.value in ("lambda", "function"):
            return f"{where}: the grid `{grid.source}` is a function that does not read " \
                   f"META[{name!r}]"
        if isinstance(knob.value, int) and knob.value in _direct_grid_ints(site):
            rewrite = True
        else:
            return f"{where}: {kernel.name} multiplies a program id by {name} but the grid " \
                   f"`{grid.resolved}` is not written in terms of it: changing {name} would " \
                   "skip or repeat tiles"
    arg = site.arg_for(name)
    return _Plan(site, knob.origin, arg.variable if arg else None, knob.value, rewrite)


class ConstexprOverride(Transform):
    name = "constexpr_override"
    summary = "change a literal block size at a launch; the grid follows"
    preserves_semantics = False     # right only for kernels that mask their tails: verify
    param_names = ("name", "value", "site", "kernel", "force")
    example_params = {"name": "BLOCK_SIZE", "value": 256}
    no_example_reason = "no literal tile size at any launch (block sizes computed, autotuned " \
                        "or absent)"

    def examples(self, analysis: SourceAnalysis) -> list[dict[str, Any]]:
        """Each literal block size of each launch, doubled."""
        out = []
        for s in analysis.launch_sites:
            for knob in s.knobs.tunable_constexprs if s.knobs else ():
                if knob.block_like and isinstance(knob.value, int) \
                        and not isinstance(knob.value, bool):
                    out.append({"name": knob.name, "value": knob.value * 2, "site": s.index})
        return out

    def _plans(self, analysis: SourceAnalysis, name: str | None, value: object,
               site: int | None, kernel: str | None, force: bool) -> tuple[list[_Plan], list[str]]:
        plans, reasons = [], []
        if not name:
            return [], ["give the constexpr name= and value="]
        for s in site_selection(analysis, site, kernel):
            k = analysis.kernel(s.kernel)
            if name not in k.constexpr_names and site is None and kernel is None:
                continue        # other kernels of the file: not a target, not a reason
            p = plan_site(analysis, s, name, value, force)
            if isinstance(p, str):
                reasons.append(p)
            else:
                plans.append(p)
        return plans, reasons

    def _applies(self, analysis: SourceAnalysis, name: str | None = None, value: object = None,
                 site: int | None = None, kernel: str | None = None, force: bool = False,
                 **_: Any) -> Applicability:
        plans, reasons = self._plans(analysis, name, value, site, kernel, force)
        if not plans:
            return first_no(reasons, f"launch of a kernel with constexpr {name!r}")
        targets = []
        for p in plans:
            where = f"{p.variable} = ... in {p.site.function}" if p.origin is ValueOrigin.LOCAL \
                else f"module-level {p.variable}" if p.origin is ValueOrigin.GLOBAL \
                else f"site {p.site.index} ({p.site.kernel})"
            targets.append(where + (" and the grid literal" if p.rewrite_grid_literal else ""))
        return Applicability.yes(list(dict.fromkeys(targets)), "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, name: str | None = None,
               value: object = None, site: int | None = None, kernel: str | None = None,
               force: bool = False, **_: Any) -> str:
        plans, _ = self._plans(analysis, name, value, site, kernel, force)
        module = cst.parse_module(source)
        calls = launch_calls(module, analysis)
        edits: dict[int, Any] = {}
        new_value = literal_node(value)
        done_vars: set[tuple[str | None, str]] = set()
        for p in plans:
            call = calls[p.site.index]
            if p.origin in (ValueOrigin.LOCAL, ValueOrigin.GLOBAL):
                scope = p.site.function if p.origin is ValueOrigin.LOCAL else None
                if (scope, p.variable) in done_vars:
                    continue
                done_vars.add((scope, p.variable))
                node = assigned_value(module, scope, p.variable)
                edits[id(node)] = lambda n, v=new_value: v
            elif p.origin is ValueOrigin.KEYWORD:
                arg = next(a for a in call.args if a.keyword and a.keyword.value == name)
                edits[id(arg.value)] = lambda n, v=new_value: v
            elif p.origin is ValueOrigin.POSITIONAL:
                pos = p.site.arg_for(name).position
                arg = [a for a in call.args if a.keyword is None][pos]
                edits[id(arg.value)] = lambda n, v=new_value: v
            else:   # DEFAULT: not passed, add the keyword
                edits[id(call)] = lambda c, v=new_value: set_keyword(c, name, v)
            if p.rewrite_grid_literal:
                target = grid_node(call)
                if isinstance(target, cst.Name):
                    target = assigned_value(module, p.site.function, target.value)
                edits[id(target)] = lambda g, old=p.old: _swap_int(g, old, value)
        return replace(module, edits).code


def _swap_int(node: cst.CSTNode, old: int, new: int) -> cst.CSTNode:
    class Swap(cst.CSTTransformer):
        def leave_Integer(self, original: cst.Integer, updated: cst.Integer) -> cst.BaseExpression:
            return int_node(new) if original.evaluated_value == old else updated

    return node.visit(Swap())


def assigned_value(module: cst.Module, function: str | None, variable: str) -> cst.CSTNode:
    """The value expression assigned to ``variable`` (the single assignment the analysis saw)."""
    fn = find_function(module, function) if function else None
    root: cst.CSTNode = fn if fn is not None else module
    found: list[cst.CSTNode] = []

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is root

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                found.extend(_match_target(t.target, node.value, variable))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if node.value is not None:
                found.extend(_match_target(node.target, node.value, variable))

    root.visit(V())
    if len(found) != 1:
        raise TransformError(f"expected one assignment of {variable!r}, found {len(found)}")
    return found[0]


def _match_target(target: cst.BaseExpression, value: cst.BaseExpression,
                  variable: str) -> list[cst.CSTNode]:
    if isinstance(target, cst.Name):
        return [value] if target.value == variable else []
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
            and len(target.elements) == len(value.elements):
        out = []
        for t, v in zip(target.elements, value.elements):
            out += _match_target(t.value, v.value, variable)
        return out
    return []


__all__ = ["ConstexprOverride", "assigned_value", "check_block_value", "plan_site"]
