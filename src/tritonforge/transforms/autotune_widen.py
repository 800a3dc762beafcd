"""Add configs to an existing ``@triton.autotune``: launch-option neighbours of the ones there.

Many hand-written config lists fix num_stages or try one num_warps; the default widening adds
num_warps x2 and /2 and num_stages +1 and -1 (for a kernel with a loop: num_stages pipelines
loops and nothing else) of each existing config (same block sizes, so the result cannot change),
at most ``max_new``. Explicit ``configs`` may add anything.
"""

from __future__ import annotations

from typing import Any, Sequence

import libcst as cst

from ..analyze import KernelInfo, SourceAnalysis
from ._cst import clean_comma, replace
from .base import Applicability, Transform, first_no, short
from .configs import ConfigSpec, widen
from .launch_params import module_configs_target


def existing_specs(kernel: KernelInfo) -> list[ConfigSpec] | str:
    at = kernel.autotune
    if at is None:
        return f"{kernel.name} is not autotuned (the autotune transform adds it)"
    if not at.configs_extendable:
        return f"{kernel.name}'s configs come from `{short(at.configs_source)}`, not a list of " \
               "triton.Config calls"
    specs = []
    for c in at.configs:
        if any(v is None or isinstance(v, bool) or not isinstance(v, int) for _, v in c.kwargs):
            return f"{kernel.name} has a config with non-integer values: {c.source}"
        specs.append(ConfigSpec(tuple(c.kwargs), c.num_warps or 4,
                                c.num_stages if c.num_stages is not None else 3))
    return specs


def autotuned_kernels(analysis: SourceAnalysis, kernel: str | None
                      ) -> tuple[list[tuple[KernelInfo, list[ConfigSpec]]], list[str]]:
    """The kernels a transform of autotune lists may touch (``kernel``, or every autotuned
    one) with their configs as specs, and why each other candidate kernel cannot be."""
    found, reasons = [], []
    for k in analysis.kernels:
        if kernel is not None and k.name != kernel or kernel is None and k.autotune is None:
            continue
        specs = existing_specs(k)
        if isinstance(specs, str):
            reasons.append(specs)
        else:
            found.append((k, specs))
    return found, reasons


def config_list_node(module: cst.Module, kernel: KernelInfo) -> cst.List | None:
    """The list literal of ``kernel``'s autotune configs (in its decorator or a module-level
    list it names; the left side of ``[...] + more``), or None."""
    target = module_configs_target(module, kernel)
    if isinstance(target, cst.Call):       # the decorator itself
        dec = target
        value = next((a.value for a in dec.args if a.keyword and a.keyword.value == "configs"),
                     dec.args[0].value if dec.args and dec.args[0].keyword is None else None)
        target = value
    if isinstance(target, cst.BinaryOperation) and isinstance(target.operator, cst.Add):
        target = target.left
    return target if isinstance(target, cst.List) else None


def append_elements(node: cst.List, texts: Sequence[str]) -> cst.List:
    """A list literal with new elements appended in the list's own layout."""
    elements = list(node.elements)
    for text in texts:
        new = cst.Element(value=cst.parse_expression(text))
        if not elements:
            elements = [new]
            continue
        last = elements[-1]
        sep = next((clean_comma(e.comma) for e in reversed(elements[:-1])
                    if isinstance(e.comma, cst.Comma)),
                   cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        if isinstance(last.comma, cst.Comma):       # trailing comma: keep it last
            elements = elements[:-1] + [last.with_changes(comma=sep),
                                        new.with_changes(comma=last.comma)]
        else:
            elements = elements[:-1] + [last.with_changes(comma=sep), new]
    return node.with_changes(elements=elements)


class AutotuneWiden(Transform):
    name = "autotune_widen"
    summary = "add num_warps/num_stages neighbours (or given configs) to an existing autotune"
    param_names = ("kernel", "configs", "max_new")
    example_params: dict[str, Any] = {}

    def _plans(self, analysis: SourceAnalysis, kernel: str | None, configs, max_new: int
               ) -> tuple[list[tuple[KernelInfo, list[ConfigSpec]]], list[str]]:
        plans = []
        tuned, reasons = autotuned_kernels(analysis, kernel)
        for k, specs in tuned:
            if configs:
                names = {n for n, _ in specs[0].kwargs} if specs else set()
                bad = [c for c in configs if {n for n, _ in c.kwargs} != names]
                if bad:
                    reasons.append(f"{k.name}: config {bad[0].render()} does not set exactly "
                                   f"{sorted(names)}")
                    continue
                new = [c for c in configs if c not in specs]
            else:
                new = widen(specs, max_new, stages=bool(k.loops))
            if not new:
                reasons.append(f"{k.name}: every candidate config is already there")
                continue
            plans.append((k, new))
        return plans, reasons

    def _applies(self, analysis: SourceAnalysis, kernel: str | None = None, configs=None,
                 max_new: int = 8, **_: Any) -> Applicability:
        plans, reasons = self._plans(analysis, kernel, configs, max_new)
        if not plans:
            return first_no(reasons, "autotuned kernel with a literal config list")
        return Applicability.yes([f"{k.name}: +{len(new)} configs" for k, new in plans],
                                 "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, kernel: str | None = None,
               configs=None, max_new: int = 8, **_: Any) -> str:
        plans, _ = self._plans(analysis, kernel, configs, max_new)
        module = cst.parse_module(source)
        edits = {}
        for k, new in plans:
            node = config_list_node(module, k)
            if node is None or id(node) in edits:
                continue        # a list shared by several kernels is widened once
            texts = [c.render() for c in new]
            edits[id(node)] = lambda n, t=texts: append_elements(n, t)
        return replace(module, edits).code


__all__ = ["AutotuneWiden", "append_elements", "autotuned_kernels", "config_list_node",
           "existing_specs"]
