"""Wrap a kernel in ``@triton.autotune`` over its block sizes and launch options.

For each launch of the kernel the tuned constexprs and ``num_warps``/``num_stages`` leave the
launch (Triton 3.6 refuses values given twice), and a grid written in terms of a tuned block size
becomes ``lambda META: ...`` (see ``_grid``). Autotuning runs the kernel once per config: a kernel
that writes what it reads gets ``restore_value=[...]``; one that accumulates with ``tl.atomic_*``
into a buffer the launcher zero-fills gets ``reset_to_zero=[...]`` (cheaper), any other atomic
target ``restore_value``. Without tunable block sizes the configs vary num_warps/num_stages only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import libcst as cst

from ..analyze import KernelInfo, LaunchSite, SourceAnalysis, ValueOrigin
from ..errors import TransformError
from ._cst import dotted, find_kernel, launch_calls, remove_args, replace
from ._grid import function_view, meta_grid, other_uses
from .base import Applicability, Transform, alias_refusal, first_no
from .configs import ConfigSpec, neighbourhood
from .constexpr import assigned_value

_ZEROS = re.compile(r"\b(zeros|zeros_like|new_zeros)\s*\(")


@dataclass
class _Plan:
    kernel: KernelInfo
    names: list[str]
    configs: list[ConfigSpec]
    key: list[str]
    restore: list[str]
    reset: list[str]
    grids: dict[int, str] = field(default_factory=dict)     # site -> new grid source
    notes: list[str] = field(default_factory=list)


def _key(kernel: KernelInfo) -> list[str]:
    pointers = set(kernel.pointer_params)
    runtime = [p.name for p in kernel.params if not p.is_constexpr and p.name not in pointers]
    key = [n for n in kernel.compared_params if n in runtime]
    return key or [n for n in runtime if "stride" not in n.lower()]


def _buffers(kernel: KernelInfo, sites: Sequence[LaunchSite]) -> tuple[list[str], list[str]]:
    restore = set(kernel.in_place_params)
    reset: set[str] = set()
    for p in kernel.atomic_params:
        zeroed = all((a := s.arg_for(p)) is not None and a.assigned is not None
                     and _ZEROS.search(a.assigned) for s in sites)
        (reset if zeroed and p not in restore else restore).add(p)
    # the same tensor passed as an input and as an output: the output is written in place
    for s in sites:
        by_source: dict[str, list[str]] = {}
        for a in s.args:
            if a.param in kernel.pointer_params:
                by_source.setdefault(a.source, []).append(a.param)
        for params in by_source.values():
            if len(params) > 1 and set(params) & set(kernel.loaded_params):
                restore |= set(params) & (set(kernel.stored_params) | set(kernel.atomic_params))
    order = kernel.param_names
    return sorted(restore, key=order.index), sorted(reset, key=order.index)


def _grids(source: str | None, sites: Sequence[LaunchSite], chosen: list[str]
           ) -> dict[int, str] | tuple[list[str], str]:
    """New META grids per site, or (names to drop, why) when a tuned value would leave some
    other reader in the launching function out of step (or the grid cannot follow)."""
    out: dict[int, str] = {}
    for s in sites:
        need = [n for n in chosen if n not in s.grid.meta_keys
                and (s.knobs.constexpr(n).tiles_grid or s.knobs.constexpr(n).grid_follows)]
        local = {s.arg_for(n).variable: n for n in chosen if s.arg_for(n) is not None
                 and s.arg_for(n).origin is ValueOrigin.LOCAL}
        if need and s.grid.kind.value in ("lambda", "function"):
            return need, f"site {s.index}: the grid function `{s.grid.source}` does not read " \
                         f"META[{need[0]!r}]"
        if source is None:
            continue
        view = function_view(source, s.function)
        feeding: set[str] = set()
        if need:
            variables: dict[str, str] = {}
            literals: dict[int, str] = {}
            for n in need:
                arg = s.arg_for(n)
                if arg is not None and arg.variable and arg.origin in (ValueOrigin.LOCAL,
                                                                       ValueOrigin.GLOBAL):
                    variables[arg.variable] = n
                else:
                    literals[s.knobs.constexpr(n).value] = n
            mg = meta_grid(view, s, variables, literals)
            if mg.source is None:
                return need, f"site {s.index}: {mg.reason}, so it cannot follow a tuned block size"
            feeding = set(mg.inlined) | ({s.grid.source} if s.grid.source.isidentifier() else set())
            out[s.index] = mg.source
        uses = other_uses(view, s, set(local) | feeding)
        if uses:
            name, line = uses[0]
            drop = [local[name]] if name in local else need
            return drop, f"{name} is also read at line {line} of {s.function}: a tuned " \
                         f"{', '.join(drop)} would leave it out of step"
    return out


def plan_autotune(source: str | None, analysis: SourceAnalysis, kernel: KernelInfo,
                  names: Sequence[str] | None, configs: Sequence[ConfigSpec] | None,
                  key: Sequence[str] | None, max_configs: int) -> _Plan | str:
    """Everything the rewrite needs, or the reason it does not apply. ``source`` is needed only
    for grids that must become META lambdas (None: assume they can)."""
    k = kernel
    if k.autotune is not None:
        return f"{k.name} is already autotuned (autotune_widen adds configs)"
    if k.has_varargs:
        return f"{k.name} takes *args/**kwargs"
    sites = analysis.sites_of(k.name)
    if not sites:
        return f"{k.name} is not launched in this file"
    if "triton" not in analysis.module_names:
        return "the file does not `import triton` (the decorator needs triton.autotune)"
    if k.unresolved_accesses:
        return f"{k.name} writes through pointers whose parameter was not found: cannot tell " \
               "which buffers to restore between tuning runs"
    for s in sites:
        shared = alias_refusal(s, "removing the arguments the autotune configs supply")
        if shared:
            return shared
        if s.has_star_args:
            return f"site {s.index} passes *args/**kwargs"
        extra = set(s.other_options) & {"num_ctas", "maxnreg"}
        if extra:
            return f"site {s.index} passes {', '.join(sorted(extra))}, which configs would repeat"
    reasons: list[str] = []
    explicit = names is not None
    wanted = list(names) if explicit else [n for n in k.block_constexprs if n not in k.heuristics]
    chosen: list[str] = []
    for name in wanted:
        bad = next((s for s in sites if s.knobs is None or s.knobs.constexpr(name) is None
                    or not s.knobs.constexpr(name).tunable), None)
        if bad is None:
            chosen.append(name)
        elif explicit:
            return f"{name} is not a literal at site {bad.index}"
        else:
            reasons.append(f"{name} is not a literal at site {bad.index}")
    new_grids: dict[int, str] = {}
    while True:         # drop names whose variables are read elsewhere, until none are
        result = _grids(source, sites, chosen)
        if isinstance(result, dict):
            new_grids = result
            break
        dropped, why = result
        if not dropped or explicit:
            return why
        reasons.append(why)
        chosen = [n for n in chosen if n not in dropped]
    first = sites[0]
    w0 = first.knobs.num_warps or 4
    s0 = first.knobs.num_stages or 3
    base = ConfigSpec(tuple((n, first.knobs.constexpr(n).value) for n in chosen), w0, s0)
    extra = {n: sorted({s.knobs.constexpr(n).value for s in sites[1:]} - {base.value(n)})
             for n in chosen}
    specs = list(configs) if configs else neighbourhood(k, base, extra, max_configs)
    for spec in specs:
        if {n for n, _ in spec.kwargs} != set(chosen):
            return f"config {spec.render()} does not set exactly {chosen}"
    key_names = list(key) if key is not None else _key(k)
    unknown = [n for n in key_names if n not in k.param_names]
    if unknown:
        return f"key {unknown} are not parameters of {k.name}"
    restore, reset = _buffers(k, sites)
    for option, value in (("num_warps", first.knobs.num_warps), ("num_stages",
                                                                  first.knobs.num_stages)):
        arg = first.num_warps if option == "num_warps" else first.num_stages
        if arg is not None and value is None:
            reasons.append(f"{option} at site {first.index} is computed (`{arg.source}`): the "
                           f"configs start from the default")
    plan = _Plan(k, chosen, specs, key_names, restore, reset, new_grids, list(reasons))
    if not chosen:
        plan.notes.append("no literal block size to tune: configs vary num_warps/num_stages")
    return plan


def render_decorator(plan: _Plan, indent: str = "") -> str:
    ind = indent + "    "
    lines = ["triton.autotune(", f"{ind}configs=["]
    lines += [f"{ind}    {c.render()}," for c in plan.configs]
    lines.append(f"{ind}],")
    lines.append(f"{ind}key={plan.key!r},")
    if plan.restore:
        lines.append(f"{ind}restore_value={plan.restore!r},")
    if plan.reset:
        lines.append(f"{ind}reset_to_zero={plan.reset!r},")
    lines.append(f"{indent})")
    return "\n".join(lines)


def _is_triton_decorator(dec: cst.Decorator) -> bool:
    target = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
    return dotted(target).split(".")[-1] in ("jit", "heuristics", "autotune")


def add_decorator(fn: cst.FunctionDef, text: str) -> cst.FunctionDef:
    decorators = list(fn.decorators)
    at = next((i for i, d in enumerate(decorators) if _is_triton_decorator(d)), 0)
    new = cst.Decorator(decorator=cst.parse_expression(text))
    if at == 0 and decorators:
        # comments above the first decorator stay above the new one
        new = new.with_changes(leading_lines=decorators[0].leading_lines)
        decorators[0] = decorators[0].with_changes(leading_lines=())
    decorators.insert(at, new)
    return fn.with_changes(decorators=decorators)


def strip_launch(call: cst.Call, site: LaunchSite, kernel: KernelInfo, names: Sequence[str],
                 grid: str | None) -> cst.Call:
    """Remove tuned constexprs and launch options from a launch; positional arguments after a
    removed one become keywords. Replace the grid when a new one is given."""
    params = kernel.param_names
    drop_positions = {a.position for a in site.args if a.param in names and a.position is not None}
    first_drop = min(drop_positions) if drop_positions else None
    args = list(call.args)
    pos = -1
    converted = []
    for a in args:
        if a.keyword is None and not a.star:
            pos += 1
            if first_drop is not None and pos > first_drop and pos not in drop_positions:
                a = a.with_changes(keyword=cst.Name(params[pos]), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace("")))
            converted.append((pos, a))
        else:
            converted.append((None, a))
    drop_kw = set(names) | {"num_warps", "num_stages"}
    new_args = remove_args([a for _, a in converted], lambda i, a: (
        converted[i][0] in drop_positions if converted[i][0] is not None
        else a.keyword is not None and a.keyword.value in drop_kw))
    call = call.with_changes(args=new_args)
    if grid is not None:
        sub = call.func
        elem = sub.slice[0].with_changes(slice=cst.Index(value=cst.parse_expression(grid)))
        call = call.with_changes(func=sub.with_changes(slice=[elem]))
    return call


class AutotuneInjection(Transform):
    name = "autotune"
    summary = "wrap a kernel in @triton.autotune over its block sizes, num_warps and num_stages"
    preserves_semantics = False    # block sizes change: right for kernels that mask their tails
    param_names = ("kernel", "names", "configs", "key", "max_configs")
    example_params: dict[str, Any] = {}

    def _plans(self, source: str | None, analysis: SourceAnalysis, kernel: str | None,
               names, configs, key, max_configs) -> tuple[list[_Plan], list[str]]:
        plans, reasons = [], []
        for k in analysis.kernels:
            if kernel is not None and k.name != kernel:
                continue
            if kernel is None and not analysis.sites_of(k.name):
                continue      # helpers called from other kernels: not a target, not a reason
            p = plan_autotune(source, analysis, k, names, configs, key, max_configs)
            if isinstance(p, str):
                reasons.append(f"{k.name}: {p}")
            else:
                plans.append(p)
        return plans, reasons

    def _applies(self, analysis: SourceAnalysis, kernel: str | None = None, names=None,
                 configs=None, key=None, max_configs: int = 12, **_: Any) -> Applicability:
        plans, reasons = self._plans(None, analysis, kernel, names, configs, key, max_configs)
        if not plans:
            return first_no(reasons, "launched kernel")
        targets = [f"kernel {p.kernel.name} over {', '.join(p.names) or 'launch options'}"
                   for p in plans]
        return Applicability.yes(targets, "; ".join(reasons + [n for p in plans for n in p.notes]))

    def _apply(self, source: str, analysis: SourceAnalysis, kernel: str | None = None,
               names=None, configs=None, key=None, max_configs: int = 12, **_: Any) -> str:
        plans, reasons = self._plans(source, analysis, kernel, names, configs, key, max_configs)
        if not plans:
            raise TransformError(f"{self.name}: " + "; ".join(reasons))
        module = cst.parse_module(source)
        calls = launch_calls(module, analysis)
        edits: dict[int, Any] = {}
        for plan in plans:
            fn = find_kernel(module, plan.kernel.name)
            text = render_decorator(plan)
            edits[id(fn)] = lambda f, t=text: add_decorator(f, t)
            for s in analysis.sites_of(plan.kernel.name):
                grid = plan.grids.get(s.index)
                if grid is not None and s.grid.source.isidentifier() and s.grid.kind.value == "tuple":
                    # grid = (...) then kernel[grid]: make the assignment the lambda (no other
                    # reader of it exists, _grids checked), and leave the launch's grid alone
                    node = assigned_value(module, s.function, s.grid.source)
                    edits[id(node)] = lambda n, g=grid: cst.parse_expression(g)
                    grid = None
                edits[id(calls[s.index])] = (
                    lambda c, s=s, p=plan, g=grid: strip_launch(c, s, p.kernel, p.names, g))
        return replace(module, edits).code
