"""Rewrites inside a kernel body that only give the compiler information: results cannot change.

- ``loop_pipelining``: ``for k in range(...)`` holding loads -> ``tl.range(..., num_stages=S)``,
  which asks the software pipeliner to prefetch S-1 iterations ahead (the loop-level version of
  the launch-level num_stages).
- ``offset_hints``: after ``offs = pid * BLOCK + tl.arange(0, BLOCK)`` add
  ``offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)``: what the offsets are by
  construction, stated so that loads and stores vectorize even when the compiler cannot prove it.
- ``cache_hints``: ``eviction_policy=``/``cache_modifier=`` on loads; by default
  ``evict_first`` on loads read once per program (outside loops, in kernels without tl.dot), so
  streamed data does not push reused data out of L2.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from ..analyze import KernelInfo, LoopInfo, LoopKind, MemAccess, SourceAnalysis, TiledOffset
from ._cst import edit_kernel, int_node, literal_node, set_keyword
from .base import Applicability, Transform, first_no

_POLICIES = (None, "evict_first", "evict_last")
_MODIFIERS = (None, ".ca", ".cg", ".cv")


def _kernels(analysis: SourceAnalysis, kernel: str | None) -> list[KernelInfo]:
    return [k for k in analysis.kernels if kernel is None or k.name == kernel]


def _tl(analysis: SourceAnalysis) -> str:
    return "tl" if "tl" in analysis.module_names else "triton.language"


class LoopPipelining(Transform):
    name = "loop_pipelining"
    summary = "for k in range(...) with loads -> tl.range(..., num_stages=S)"
    param_names = ("num_stages", "kernel", "loop", "innermost_only")
    example_params = {"num_stages": 3}

    def _targets(self, analysis: SourceAnalysis, num_stages: int, kernel: str | None,
                 loop: int | None, innermost_only: bool
                 ) -> tuple[list[tuple[KernelInfo, LoopInfo]], list[str]]:
        out, reasons = [], []
        for k in _kernels(analysis, kernel):
            for lp in k.loops:
                if loop is not None and lp.index != loop:
                    continue
                where = f"{k.name} loop {lp.index} (line {lp.span.line})"
                if lp.kind not in (LoopKind.RANGE, LoopKind.TL_RANGE):
                    reasons.append(f"{where} is a {lp.kind.value} loop")
                elif not lp.loads:
                    reasons.append(f"{where} loads nothing")
                elif innermost_only and not lp.innermost:
                    reasons.append(f"{where} holds another loop (innermost loops pipeline)")
                elif lp.num_stages == num_stages:
                    reasons.append(f"{where} already has num_stages={num_stages}")
                else:
                    out.append((k, lp))
        return out, reasons

    def _applies(self, analysis: SourceAnalysis, num_stages: int = 3, kernel: str | None = None,
                 loop: int | None = None, innermost_only: bool = True, **_: Any) -> Applicability:
        if not isinstance(num_stages, int) or not 1 <= num_stages <= 8:
            return Applicability.no(f"num_stages={num_stages!r} must be an integer from 1 to 8")
        targets, reasons = self._targets(analysis, num_stages, kernel, loop, innermost_only)
        if not targets:
            return first_no(reasons, "loop in a kernel")
        return Applicability.yes([f"{k.name} loop {lp.index} (line {lp.span.line})"
                                  for k, lp in targets], "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, num_stages: int = 3,
               kernel: str | None = None, loop: int | None = None, innermost_only: bool = True,
               **_: Any) -> str:
        targets, _ = self._targets(analysis, num_stages, kernel, loop, innermost_only)
        tl = _tl(analysis)

        def edit(node: cst.For) -> cst.For:
            it = node.iter
            assert isinstance(it, cst.Call)
            if isinstance(it.func, cst.Name):        # range(...) -> tl.range(...)
                it = it.with_changes(func=cst.parse_expression(f"{tl}.range"))
            return node.with_changes(iter=set_keyword(it, "num_stages", int_node(num_stages)))

        by_kernel: dict[str, list[LoopInfo]] = {}
        for k, lp in targets:
            by_kernel.setdefault(k.name, []).append(lp)
        for k in sorted((analysis.kernel(n) for n in by_kernel), key=lambda k: -k.span.line):
            source = edit_kernel(source, k, {(cst.For, lp.span.line, lp.span.col): edit
                                             for lp in by_kernel[k.name]})
        return source


class OffsetHints(Transform):
    name = "offset_hints"
    summary = "tl.multiple_of / tl.max_contiguous on pid * BLOCK + tl.arange(0, BLOCK) offsets"
    param_names = ("kernel",)

    def _targets(self, analysis: SourceAnalysis, kernel: str | None
                 ) -> tuple[list[tuple[KernelInfo, TiledOffset]], list[str]]:
        out, reasons = [], []
        for k in _kernels(analysis, kernel):
            for off in k.offsets:
                if off.hinted:
                    reasons.append(f"{k.name}: {off.name} already has alignment hints")
                else:
                    out.append((k, off))
        return out, reasons

    def _applies(self, analysis: SourceAnalysis, kernel: str | None = None,
                 **_: Any) -> Applicability:
        targets, reasons = self._targets(analysis, kernel)
        if not targets:
            return first_no(reasons, "`offs = pid * BLOCK + tl.arange(0, BLOCK)` offset")
        return Applicability.yes([f"{k.name}: {o.name} (line {o.span.line})" for k, o in targets],
                                 "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, kernel: str | None = None,
               **_: Any) -> str:
        targets, _ = self._targets(analysis, kernel)
        tl = _tl(analysis)
        by_kernel: dict[str, list[TiledOffset]] = {}
        for k, off in targets:
            by_kernel.setdefault(k.name, []).append(off)
        # bottom-up, so that inserted lines do not move the kernels still to edit
        for k in sorted((analysis.kernel(n) for n in by_kernel), key=lambda k: -k.span.line):
            edits = {}
            for off in by_kernel[k.name]:
                line = f"{off.name} = {tl}.max_contiguous({tl}.multiple_of({off.name}, " \
                       f"{off.block}), {off.block})\n"
                edits[(cst.SimpleStatementLine, off.span.line, off.span.col)] = (
                    lambda stmt, text=line: cst.FlattenSentinel([stmt, cst.parse_statement(text)]))
            source = edit_kernel(source, k, edits)
        return source


class CacheHints(Transform):
    name = "cache_hints"
    summary = "eviction_policy / cache_modifier on loads (evict_first on streamed loads)"
    param_names = ("policy", "cache_modifier", "scope", "kernel")
    example_params = {"policy": "evict_first"}

    def _targets(self, analysis: SourceAnalysis, policy: str | None, cache_modifier: str | None,
                 scope: str, kernel: str | None
                 ) -> tuple[list[tuple[KernelInfo, MemAccess]], list[str]]:
        out, reasons = [], []
        for k in _kernels(analysis, kernel):
            loads = [a for a in k.accesses if a.op == "load"]
            if not loads:
                continue
            if scope == "streamed" and k.uses_dot:
                reasons.append(f"{k.name} uses tl.dot: its loads are reused tiles, not streams")
                continue
            for a in loads:
                if scope == "streamed" and a.in_loop:
                    continue
                if policy is not None and a.eviction_policy is not None or \
                        cache_modifier is not None and a.cache_modifier is not None:
                    reasons.append(f"{k.name}: the load at line {a.span.line} already has hints")
                    continue
                out.append((k, a))
            if not any(t[0] is k for t in out) and scope == "streamed":
                reasons.append(f"{k.name}: every load sits in a loop (not streamed)")
        return out, reasons

    def _applies(self, analysis: SourceAnalysis, policy: str | None = "evict_first",
                 cache_modifier: str | None = None, scope: str = "streamed",
                 kernel: str | None = None, **_: Any) -> Applicability:
        if policy not in _POLICIES or cache_modifier not in _MODIFIERS:
            return Applicability.no(f"policy must be one of {_POLICIES} and cache_modifier one "
                                    f"of {_MODIFIERS}")
        if policy is None and cache_modifier is None:
            return Applicability.no("give policy and/or cache_modifier")
        if scope not in ("streamed", "all"):
            return Applicability.no(f"scope={scope!r} must be 'streamed' or 'all'")
        targets, reasons = self._targets(analysis, policy, cache_modifier, scope, kernel)
        if not targets:
            return first_no(reasons, "tl.load")
        return Applicability.yes([f"{k.name}: load at line {a.span.line}" for k, a in targets],
                                 "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, policy: str | None = "evict_first",
               cache_modifier: str | None = None, scope: str = "streamed",
               kernel: str | None = None, **_: Any) -> str:
        targets, _ = self._targets(analysis, policy, cache_modifier, scope, kernel)

        def edit(call: cst.Call) -> cst.Call:
            if policy is not None:
                call = set_keyword(call, "eviction_policy", literal_node(policy))
            if cache_modifier is not None:
                call = set_keyword(call, "cache_modifier", literal_node(cache_modifier))
            return call

        by_kernel: dict[str, list[MemAccess]] = {}
        for k, a in targets:
            by_kernel.setdefault(k.name, []).append(a)
        for k in sorted((analysis.kernel(n) for n in by_kernel), key=lambda k: -k.span.line):
            source = edit_kernel(source, k, {(cst.Call, a.span.line, a.span.col): edit
                                             for a in by_kernel[k.name]})
        return source
