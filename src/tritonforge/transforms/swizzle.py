"""Grouped program ordering (GROUP_SIZE_M swizzle) for 2-D tiled kernels.

A kernel reading ``pid_m = tl.program_id(0)`` and ``pid_n = tl.program_id(1)`` runs its tiles in
launch order, row of tiles after row of tiles, so consecutive programs share little of the
operand they stream from L2. The rewrite maps the launch order (axis 0 fastest, as the hardware
dispatches it) onto groups of GROUP_SIZE_M tile rows, as in Triton's matmul tutorial:

    _tf_lin = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)
    ... pid_m, pid_n = grouped(_tf_lin)

It is a bijection of the same tile set, so every tile is still computed exactly once; the grid
and the launches stay as they are. ``GROUP_SIZE_M`` becomes a constexpr parameter with a default
(8), which a later ``constexpr_override`` or autotune can tune.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from ..analyze import KernelInfo, ProgramIdVar, SourceAnalysis
from ._cst import append_param, edit_kernel, int_node
from .base import Applicability, Transform, first_no

_LOCKS = {"atomic_cas", "atomic_xchg"}


def _swizzle_lines(tl: str, m: str, n: str, group: str) -> list[str]:
    return [
        f"_tf_lin = {tl}.program_id(0) + {tl}.program_id(1) * {tl}.num_programs(0)\n",
        f"_tf_num_m = {tl}.num_programs(0)\n",
        f"_tf_in_group = {group} * {tl}.num_programs(1)\n",
        f"_tf_first_m = (_tf_lin // _tf_in_group) * {group}\n",
        f"_tf_group_m = {tl}.minimum(_tf_num_m - _tf_first_m, {group})\n",
        f"{m} = _tf_first_m + ((_tf_lin % _tf_in_group) % _tf_group_m)\n",
        f"{n} = (_tf_lin % _tf_in_group) // _tf_group_m\n",
    ]


def check_swizzle(k: KernelInfo, group_name: str) -> tuple[ProgramIdVar, ProgramIdVar] | str:
    vars_ = {v.axis: v for v in k.pid_vars}
    if 0 not in vars_ or 1 not in vars_:
        return f"{k.name} does not read tl.program_id(0) and tl.program_id(1) into variables " \
               "in its body"
    if k.program_id_calls.count(0) != 1 or k.program_id_calls.count(1) != 1:
        return f"{k.name} calls tl.program_id(0)/(1) more than once"
    m, n = vars_[0], vars_[1]
    if m.reassigned or n.reassigned:
        return f"{k.name} reassigns {m.name if m.reassigned else n.name}"
    axes = {a for t in k.tiled_constexprs for a in t.axes}
    if not {0, 1} <= axes:
        return f"{k.name} does not tile both grid axes by block sizes (axes tiled: " \
               f"{sorted(axes) or 'none'}): not a 2-D tiled kernel"
    if set(k.atomics) & _LOCKS:
        return f"{k.name} uses {sorted(set(k.atomics) & _LOCKS)[0]} (a lock may rely on order)"
    if k.has_varargs:
        return f"{k.name} takes *args/**kwargs"
    if group_name in k.param_names or group_name in k.body_names:
        return f"{k.name} already has {group_name}"
    if any(name.startswith("_tf_") for name in k.body_names):
        return f"{k.name} already uses _tf_ names (swizzled before?)"
    return m, n


class PidSwizzle(Transform):
    name = "pid_swizzle"
    summary = "grouped (GROUP_SIZE_M) program ordering for 2-D tiled kernels"
    param_names = ("kernel", "group_size", "group_name")
    example_params: dict[str, Any] = {}

    def _targets(self, analysis: SourceAnalysis, kernel: str | None, group_name: str):
        out, reasons = [], []
        for k in analysis.kernels:
            if kernel is not None and k.name != kernel:
                continue
            r = check_swizzle(k, group_name)
            if isinstance(r, str):
                if kernel is not None or len(k.pid_vars) > 1:
                    reasons.append(r)
            else:
                out.append((k, r))
        return out, reasons

    def _applies(self, analysis: SourceAnalysis, kernel: str | None = None, group_size: int = 8,
                 group_name: str = "GROUP_SIZE_M", **_: Any) -> Applicability:
        if not isinstance(group_size, int) or group_size < 1:
            return Applicability.no(f"group_size={group_size!r} must be a positive integer")
        targets, reasons = self._targets(analysis, kernel, group_name)
        if not targets:
            return first_no(reasons, "kernel with 2-D program ids")
        return Applicability.yes([f"{k.name} ({m.name}, {n.name})" for k, (m, n) in targets],
                                 "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, kernel: str | None = None,
               group_size: int = 8, group_name: str = "GROUP_SIZE_M", **_: Any) -> str:
        targets, _ = self._targets(analysis, kernel, group_name)
        tl = "tl" if "tl" in analysis.module_names else "triton.language"
        for k, (m, n) in sorted(targets, key=lambda t: -t[0].span.line):
            first, second = sorted((m, n), key=lambda v: (v.span.line, v.span.col))
            lines = _swizzle_lines(tl, m.name, n.name, group_name)
            style = next((p.annotation for p in k.constexpr_params if p.annotation), None)
            annotation = style or f"{tl}.constexpr"

            def put(stmt: cst.SimpleStatementLine, lines=lines) -> cst.FlattenSentinel:
                new = [cst.parse_statement(t) for t in lines]
                new[0] = new[0].with_changes(leading_lines=stmt.leading_lines)
                return cst.FlattenSentinel(new)

            def drop(stmt: cst.SimpleStatementLine) -> cst.RemovalSentinel:
                return cst.RemoveFromParent()

            def add_param(fn: cst.FunctionDef, annotation=annotation) -> cst.FunctionDef:
                param = cst.Param(
                    name=cst.Name(group_name),
                    annotation=cst.Annotation(cst.parse_expression(annotation)),
                    default=int_node(group_size),
                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(" "),
                                          whitespace_after=cst.SimpleWhitespace(" ")))
                return append_param(fn, param)[0]

            edits = {(cst.SimpleStatementLine, first.span.line, first.span.col): put,
                     (cst.SimpleStatementLine, second.span.line, second.span.col): drop}
            source = edit_kernel(source, k, edits, whole=add_param)
        return source
