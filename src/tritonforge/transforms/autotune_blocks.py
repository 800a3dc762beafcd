"""Extend an existing ``@triton.autotune`` beyond the tile sizes it lists, and key it on sizes.

``autotune_widen`` adds launch options around the configs as written; this transform moves the
tile sizes themselves past both ends of the range the list covers (``configs.extend_block_range``)
and, where the ``key`` leaves out a size the kernel's work depends on, adds that size to it
(``configs.missing_key_names``): with ``key=[]`` the autotuner tunes once per process, on
whichever size it sees first, and reuses that choice for every other.

Tile sizes may change the order of a reduction's sums (within the verifier's tolerances) but
never what is computed, as long as the kernel masks its tiles; the verifier decides, since a
tile size can be semantic (a quantization group, a scale granularity). Adding names to ``key``
changes only when the autotuner benchmarks.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from ..analyze import KernelInfo, SourceAnalysis
from ._cst import find_kernel, replace, set_keyword
from .autotune_widen import append_elements, autotuned_kernels, config_list_node
from .base import Applicability, Transform, first_no
from .configs import ConfigSpec, extend_block_range, missing_key_names
from .launch_params import autotune_decorator


def _key_list(dec: cst.Call) -> cst.List | cst.Tuple | None | bool:
    """The decorator's literal ``key=`` list; None where there is no key argument, False where
    it is not a literal list of strings (left alone)."""
    arg = next((a for a in dec.args if a.keyword and a.keyword.value == "key"), None)
    if arg is None:
        positional = [a for a in dec.args if a.keyword is None]
        if len(positional) < 2:
            return None
        arg = positional[1]
    node = arg.value
    if not isinstance(node, (cst.List, cst.Tuple)):
        return False
    if not all(isinstance(e.value, cst.SimpleString) for e in node.elements):
        return False
    return node


class AutotuneBlocks(Transform):
    name = "autotune_blocks"
    summary = "extend an autotune's tile sizes past the listed range; key it on the sizes it omits"
    param_names = ("kernel", "configs", "max_new", "key")
    example_params: dict[str, Any] = {}

    def _plans(self, analysis: SourceAnalysis, kernel: str | None, configs, max_new: int,
               key: bool) -> tuple[list[tuple[KernelInfo, list[ConfigSpec], list[str]]], list[str]]:
        plans = []
        tuned, reasons = autotuned_kernels(analysis, kernel)
        for k, specs in tuned:
            if configs is not None:
                new = [c for c in configs if c not in specs]
            else:
                new = extend_block_range(k, specs, max_new)
            names = missing_key_names(k) if key else []
            if not new and not names:
                reasons.append(f"{k.name}: no tile size to extend (tile sizes: "
                               f"{', '.join(k.block_constexprs) or 'none'}) and the key covers "
                               "every size")
                continue
            plans.append((k, new, names))
        return plans, reasons

    def _applies(self, analysis: SourceAnalysis, kernel: str | None = None, configs=None,
                 max_new: int = 8, key: bool = True, **_: Any) -> Applicability:
        plans, reasons = self._plans(analysis, kernel, configs, max_new, key)
        if not plans:
            return first_no(reasons, "autotuned kernel with a literal config list")
        return Applicability.yes(
            [f"{k.name}: +{len(new)} configs" + (f", key + {names}" if names else "")
             for k, new, names in plans], "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, kernel: str | None = None,
               configs=None, max_new: int = 8, key: bool = True, **_: Any) -> str:
        plans, _ = self._plans(analysis, kernel, configs, max_new, key)
        module = cst.parse_module(source)
        edits = {}
        for k, new, names in plans:
            node = config_list_node(module, k)
            if new and node is not None and id(node) not in edits:
                texts = [c.render() for c in new]
                edits[id(node)] = lambda n, t=texts: append_elements(n, t)
            dec = autotune_decorator(find_kernel(module, k.name))
            if not names or dec is None:
                continue
            keys = _key_list(dec)
            if keys is False:
                continue
            if keys is None:
                edits[id(dec)] = lambda d, t=names: set_keyword(
                    d, "key", cst.parse_expression(repr(list(t))))
            elif id(keys) not in edits:
                edits[id(keys)] = lambda n, t=names: _append_names(n, t)
        return replace(module, edits).code


def _append_names(node: cst.List | cst.Tuple, names: list[str]) -> cst.BaseExpression:
    quote = '"' if any(e.value.value.startswith('"') for e in node.elements) else "'"
    texts = [f"{quote}{n}{quote}" for n in names]
    if isinstance(node, cst.List):
        return append_elements(node, texts)
    items = [e.value.value for e in node.elements] + texts
    return cst.parse_expression("(" + ", ".join(items) + ",)")


__all__ = ["AutotuneBlocks"]
