"""Streaming reduction: a kernel that holds a whole row in registers loops over it in chunks.

    offs = tl.arange(0, BLOCK_N)               offs = tl.arange(0, BLOCK_N)
    x = tl.load(p + offs, mask=offs < N,       x = tl.load(p + offs, mask=offs < N, other=0.0)
                other=0.0)                     _tf_part = tl.sum(x * w, axis=0)
    y = tl.sum(x * w, axis=0)          ->      _tf_acc = <_tf_part, widened to fp32 if 16-bit>
                                               for _tf_start in range(BLOCK_N, N, BLOCK_N):
                                                   _tf_offs = _tf_start + tl.arange(0, BLOCK_N)
                                                   _tf_x = tl.load(p + _tf_offs, ...)
                                                   _tf_acc += tl.sum(_tf_x * w, axis=0)
                                               y = _tf_acc.to(_tf_part.dtype)
    k[grid](..., BLOCK_N=BLOCK_N)              k[grid](..., BLOCK_N=min(256, BLOCK_N))

With ``BLOCK_N = triton.next_power_of_2(N)`` at every launch, a row of 8192 elements sits in
registers at once and spills (the paper's batched GEMV, examples/batched_gemv.py: 1.74x as a
streaming reduction). The rewritten kernel sums any BLOCK_N >= 1 in chunks, so it is right for
every block size; the launch passes a fixed chunk, or the whole row when that is smaller.

Only one pattern is matched, and every condition is checked (a wrong rewrite is the worst bug):
BLOCK_N appears once in the kernel, in ``tl.arange(0, BLOCK_N)``; every launch passes
``triton.next_power_of_2(E)`` for it, E being what it passes for N (so the original covers the
whole row); the statements that depend on those offsets are top-level assignments, each name
assigned once; the offsets are used only to form pointers and masks of ``tl.load``s that are
masked with ``<offsets> < N`` and ``other=0``; the loaded values go, through ``+ - *``, ``.to``
and ``tl.abs`` only, into ONE ``tl.sum`` over the axis the offsets span, and each summand is
zero where the mask is off (so padding adds nothing whatever the chunk). Nothing else (a store,
another reduction, a loop, a helper call) may use them.

The sum order changes: chunk sums are added in order, in fp32 for 16-bit floats (the original
summed in the sum's own type), and the result is cast back to that type. Floats see a
reassociation, which the verifier tolerates; integer sums are exact either way. One difference
remains: where a factor that does not depend on the row is infinite, a padded lane adds
``0 * inf`` = NaN, and how many padded lanes there are depends on the chunk.

``applies`` reads the body from ``SourceAnalysis.source`` (when it is the analyzed text) and runs
the same checks as ``apply``, so the two agree; with no source it screens the launches and
constexprs only, and the body checks run in ``apply`` (TransformError with the reason).
"""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst

from ..analyze import KernelInfo, LaunchSite, SourceAnalysis, ValueOrigin, analyze_source
from ..errors import TransformError
from ..model import content_hash
from ._cst import kernel_text, launch_calls, replace, splice
from ._stream_cst import BodyPlan
from ._stream_match import plan_body
from .base import Applicability, Transform, alias_refusal, first_no, short

CHUNKS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def _pow2_argument(text: str) -> ast.expr | None:
    """E when ``text`` is ``triton.next_power_of_2(E)`` (or ``next_power_of_2(E)``)."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call) or len(node.args) != 1 or node.keywords:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id \
        if isinstance(func, ast.Name) else ""
    return node.args[0] if name == "next_power_of_2" else None


def _same_expr(text: str, node: ast.expr) -> bool:
    try:
        return ast.dump(ast.parse(text, mode="eval").body) == ast.dump(node)
    except SyntaxError:
        return False


def check_site(kernel: KernelInfo, site: LaunchSite, block: str) -> tuple[str, ...] | str:
    """The kernel parameters whose value ``block`` is the next power of two of at ``site``
    (what the launch passes for them is E in ``triton.next_power_of_2(E)``), or why none."""
    where = f"site {site.index} ({site.kernel})"
    shared = alias_refusal(site, f"clamping {block} to a chunk")
    if shared:
        return shared
    if site.has_star_args:
        return f"{where} passes *args/**kwargs"
    knob = site.knobs.constexpr(block) if site.knobs else None
    arg = site.arg_for(block)
    if knob is None or arg is None:
        return f"{where} does not pass {block}"
    if knob.origin in (ValueOrigin.AUTOTUNE, ValueOrigin.HEURISTICS):
        return f"{where}: {block} is chosen by @triton.{knob.origin.value}"
    text = arg.assigned if arg.variable and arg.assigned else arg.source
    inner = _pow2_argument(text)
    if inner is None:
        return f"{where} passes {block}=`{short(text, 40)}`, not triton.next_power_of_2(N) " \
               "(the original must hold the whole row)"
    params = tuple(a.param for a in site.args if a.param and a.param != block
                   and a.param in kernel.param_names and _same_expr(a.source, inner))
    if not params:
        return f"{where}: {block} = `{short(text, 40)}`, but no kernel argument is passed " \
               f"`{ast.unparse(inner)}`"
    return params


def screen(analysis: SourceAnalysis, k: KernelInfo) -> tuple[str, tuple[str, ...]] | str:
    """(BLOCK_N, candidate row-length params) from the static analysis alone, or why not."""
    if k.autotune is not None:
        return f"{k.name} is autotuned (its block sizes are configs)"
    sites = analysis.sites_of(k.name)
    if not sites:
        return f"{k.name} is not launched in this file"
    whole_row = [c for c in k.arange_constexprs
                 if c not in k.block_constexprs and c not in k.heuristics]
    if not whole_row:
        return f"{k.name} has no tl.arange over a constexpr that neither tiles a program id " \
               "nor steps a loop (no whole-row offsets)"
    reasons = []
    for block in whole_row:
        found: set[str] | None = None
        for s in sites:
            got = check_site(k, s, block)
            if isinstance(got, str):
                reasons.append(got)
                found = None
                break
            found = set(got) if found is None else found & set(got)
        if found:
            return block, tuple(p for p in k.param_names if p in found)
        if found is not None:
            reasons.append(f"{k.name}: the launches pass {block} for different row lengths")
    return "; ".join(reasons)


def _host_names_single(source: str, site: LaunchSite, block_arg_text: str) -> str | None:
    """Why the host names E reads may change between ``BLOCK = next_power_of_2(E)`` and the
    launch (assigned more than once in the launching scope), or None."""
    inner = _pow2_argument(block_arg_text)
    if inner is None:
        return None
    tree = ast.parse(source)
    scope: ast.AST = tree
    for part in (site.function or "").split(".") if site.function else ():
        scope = next((n for n in ast.iter_child_nodes(scope)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and n.name == part), scope)
    counts: dict[str, int] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, ast.arg):
            counts[node.arg] = counts.get(node.arg, 0) + 1
    for name in {n.id for n in ast.walk(inner) if isinstance(n, ast.Name)}:
        if counts.get(name, 0) > 1:
            return f"site {site.index}: {name} is assigned more than once in " \
                   f"{site.function or 'the module'}, so the row length may change before " \
                   "the launch"
    return None


class StreamingReduction(Transform):
    name = "streaming_reduction"
    summary = "whole-row tl.sum with BLOCK_N = next_power_of_2(N) -> a loop over N in chunks"
    preserves_semantics = True      # up to the order of a float sum (fp32 chunk accumulation)
    param_names = ("chunk", "kernel")
    example_params = {"chunk": 256}

    def _targets(self, analysis: SourceAnalysis, kernel: str | None
                 ) -> tuple[list[tuple[KernelInfo, str, tuple[str, ...]]], list[str]]:
        out, reasons = [], []
        for k in analysis.kernels:
            if kernel is not None and k.name != kernel:
                continue
            got = screen(analysis, k)
            if isinstance(got, str):
                reasons.append(got)
            else:
                out.append((k, *got))
        return out, reasons

    def _applies(self, analysis: SourceAnalysis, chunk: int = 256, kernel: str | None = None,
                 **_: Any) -> Applicability:
        if chunk not in CHUNKS or isinstance(chunk, bool):
            return Applicability.no(f"chunk={chunk!r} must be a power of two from 16 to 8192")
        targets, reasons = self._targets(analysis, kernel)
        if not targets:
            return first_no(reasons, "@triton.jit kernel" if kernel is None
                            else f"kernel {kernel!r}")
        source = analysis.source
        if isinstance(source, str) and content_hash(source) == analysis.source_hash:
            plans, reasons = self.plans(source, analysis, kernel)
            if not plans:
                return first_no(reasons, "@triton.jit kernel")
            return Applicability.yes([f"{k.name} over {p.block} (row length {p.n})"
                                      for k, p in plans], "; ".join(reasons))
        return Applicability.yes([f"{k.name} over {block} (row length {' or '.join(ns)})"
                                  for k, block, ns in targets],
                                 "; ".join(reasons) + ("; " if reasons else "") +
                                 "the kernel body is checked when applied")

    def plans(self, source: str, analysis: SourceAnalysis, kernel: str | None = None
              ) -> tuple[list[tuple[KernelInfo, BodyPlan]], list[str]]:
        """The kernels this source can stream, each with its body plan, and why the others
        cannot (the body checks that ``applies`` cannot make)."""
        targets, reasons = self._targets(analysis, kernel)
        tl = "tl" if "tl" in analysis.module_names else "triton.language"
        out = []
        for k, block, ns in targets:
            kt = kernel_text(source, k)
            module = cst.parse_module(kt.text)
            fn = next(s for s in module.body if isinstance(s, cst.FunctionDef))
            plan = plan_body(module, fn, k, block, ns, tl)
            if isinstance(plan, str):
                reasons.append(plan)
                continue
            host = next((why for s in analysis.sites_of(k.name)
                         if (why := _host_names_single(source, s, _block_text(s, block)))), None)
            if host:
                reasons.append(host)
                continue
            out.append((k, plan))
        return out, reasons

    def _apply(self, source: str, analysis: SourceAnalysis, chunk: int = 256,
               kernel: str | None = None, **_: Any) -> str:
        plans, reasons = self.plans(source, analysis, kernel)
        if not plans:
            raise TransformError(f"{self.name}: " + "; ".join(reasons))
        for k, plan in sorted(plans, key=lambda p: -p[0].span.line):   # bottom-up
            kt = kernel_text(source, k)
            source = splice(source, kt, plan.rewrite())
        fresh = analyze_source(source)
        module = cst.parse_module(source)
        calls = launch_calls(module, fresh)
        edits: dict[int, Any] = {}
        for k, plan in plans:
            for s in fresh.sites_of(k.name):
                arg = next(a for i, a in enumerate(calls[s.index].args)
                           if _binds(a, i, s, plan.block))
                edits[id(arg.value)] = lambda v, c=chunk: cst.parse_expression(
                    f"min({c}, {cst.Module([]).code_for_node(v)})")
        return replace(module, edits).code


def _block_text(site: LaunchSite, block: str) -> str:
    arg = site.arg_for(block)
    if arg is None:
        return ""
    return arg.assigned if arg.variable and arg.assigned else arg.source


def _binds(arg: cst.Arg, index: int, site: LaunchSite, block: str) -> bool:
    """Whether libcst argument ``index`` of the launch is the one the analysis binds to
    ``block`` (keyword by name, positional by position)."""
    bound = site.arg_for(block)
    if bound is None:
        return False
    if bound.keyword is not None:
        return arg.keyword is not None and arg.keyword.value == bound.keyword
    return arg.keyword is None and index == bound.position


__all__ = ["StreamingReduction", "check_site", "screen"]
