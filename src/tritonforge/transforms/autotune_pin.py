"""Replace a kernel's ``@triton.autotune`` by one config passed at each of its launches.

An autotuner times every config on the first call with each key, in each process, and then costs
host time on every call to find its pick: +75% to +291% on 4-6 us cases (H100, 2026-11-23).
Its pick can also differ between two processes; bmm_chunk_bwd's verdicts followed those picks
(H100, 2026-11-23). Pinning the config it picked on the case that weighs most gives the same
kernel without either cost, for the search and the arbiter to judge; the size dispatch can
still join it with the original where another size wants another config.

What an autotune adds besides the choice stays out: ``reset_to_zero`` and ``restore_value`` only
undo the benchmark runs, and ``prune_configs_by`` only narrows them. A user ``pre_hook`` or
``post_hook`` may do work a launch needs, so a kernel with one is refused.

``keep_decorator=True`` pins differently: the autotune stays, listing only that config (one
config is never benchmarked), and no launch changes. Launches this source does not show (a test
section, another module) then keep working; the launch-site pin broke dequantize_matmul's test
section, whose launches pass no tile sizes (H100, 2026-11-24). The autotuner's per-call host
cost stays, so this is the repair for such a failure, not the first move.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from ..analyze import KernelInfo, SourceAnalysis
from ._cst import dotted, find_kernel, int_node, launch_calls, replace, set_keyword
from .base import Applicability, Transform, alias_refusal
from .configs import ConfigSpec


def _is_autotune(dec: cst.Decorator) -> bool:
    return isinstance(dec.decorator, cst.Call) and \
        dotted(dec.decorator.func).split(".")[-1] == "autotune"


def _problem(analysis: SourceAnalysis, kernel: str, config: ConfigSpec | None,
             keep_decorator: bool = False) -> str | None:
    """Why ``kernel`` cannot be pinned to ``config`` (None: it can)."""
    if not analysis.has_kernel(kernel):
        return f"no kernel {kernel!r} in this source"
    k: KernelInfo = analysis.kernel(kernel)
    at = k.autotune
    if at is None:
        return f"{kernel} is not autotuned"
    if at.has_hooks:
        return f"{kernel}'s autotune has a pre_hook/post_hook, which a plain launch would skip"
    if config is None:
        return "give the config to pin (config=ConfigSpec(...))"
    tuned = set(at.tuned_names)
    given = {n for n, _ in config.kwargs}
    if given != tuned:
        return f"the config sets {sorted(given)} but {kernel}'s autotune sets {sorted(tuned)}"
    unknown = given - set(k.constexpr_names)
    if unknown:
        return f"{sorted(unknown)} are not constexprs of {kernel}"
    if keep_decorator:
        return None             # no launch changes: whatever the launches pass stays valid
    sites = [s for s in analysis.launch_sites if s.kernel == kernel]
    if not sites:
        return f"no launch of {kernel} in this source: its launches could not take the config"
    for s in sites:
        shared = alias_refusal(s, "passing the pinned config")
        if shared:
            return shared
        if s.has_star_args:
            return f"site {s.index} passes *args/**kwargs: the config may collide with them"
        clash = [n for n in (*given, "num_warps", "num_stages")
                 if s.arg_for(n) is not None or (n == "num_warps" and s.num_warps)
                 or (n == "num_stages" and s.num_stages)]
        if clash:
            return f"site {s.index} already passes {clash}"
    return None


def _one_config(dec: cst.Decorator, config: ConfigSpec) -> cst.Decorator:
    """The autotune decorator ``dec`` listing ``config`` alone (its other arguments kept)."""
    call = dec.decorator
    assert isinstance(call, cst.Call)
    prefix = dotted(call.func)[: -len("autotune")]          # "triton." or "" (imported name)
    rendered = config.render().replace("triton.", prefix or "triton.", 1)
    listed = cst.parse_expression(f"[{rendered}]")
    args = list(call.args)
    for i, arg in enumerate(args):
        if (arg.keyword is not None and arg.keyword.value == "configs") or \
                (arg.keyword is None and i == 0):
            args[i] = arg.with_changes(value=listed)
            break
    return dec.with_changes(decorator=call.with_changes(args=args))


class AutotunePin(Transform):
    name = "autotune_pin"
    summary = "replace @triton.autotune by one config passed at the kernel's launches"
    param_names = ("kernel", "config", "keep_decorator")
    example_params: dict[str, Any] = {}
    no_example_reason = "no autotuned kernel whose listed configs could be pinned"

    def examples(self, analysis: SourceAnalysis) -> list[dict[str, Any]]:
        """The first listed config of each autotuned kernel (coverage runs)."""
        out = []
        for k in analysis.kernels:
            if k.autotune is not None and k.autotune.configs:
                c = k.autotune.configs[0]
                if all(isinstance(v, int) and not isinstance(v, bool) for _, v in c.kwargs):
                    out.append({"kernel": k.name, "config": ConfigSpec(
                        tuple(c.kwargs), c.num_warps or 4,
                        c.num_stages if c.num_stages is not None else 3)})
        return out

    def _applies(self, analysis: SourceAnalysis, kernel: str | None = None,
                 config: ConfigSpec | None = None, keep_decorator: bool = False,
                 **_: Any) -> Applicability:
        if kernel is None:
            return Applicability.no("give the kernel whose autotune to pin (kernel=NAME)")
        problem = _problem(analysis, kernel, config, keep_decorator)
        if problem:
            return Applicability.no(problem)
        if keep_decorator:
            return Applicability.yes([f"kernel {kernel}'s autotune configs"])
        sites = [s.index for s in analysis.launch_sites if s.kernel == kernel]
        return Applicability.yes([f"kernel {kernel}"] + [f"site {i}" for i in sites])

    def _apply(self, source: str, analysis: SourceAnalysis, kernel: str | None = None,
               config: ConfigSpec | None = None, keep_decorator: bool = False, **_: Any) -> str:
        module = cst.parse_module(source)
        fn = find_kernel(module, kernel)
        if keep_decorator:
            return replace(module, {id(fn): lambda f: f.with_changes(
                decorators=[_one_config(x, config) if _is_autotune(x) else x
                            for x in f.decorators])}).code
        calls = launch_calls(module, analysis)
        edits = {id(fn): lambda f: f.with_changes(
            decorators=[x for x in f.decorators if not _is_autotune(x)])}
        values = [*config.kwargs, ("num_warps", config.num_warps),
                  ("num_stages", config.num_stages)]
        for s in analysis.launch_sites:
            if s.kernel != kernel:
                continue

            def pin(call: cst.Call, values=values) -> cst.Call:
                for name, value in values:
                    call = set_keyword(call, name, int_node(value))
                return call
            edits[id(calls[s.index])] = pin
        return replace(module, edits).code


__all__ = ["AutotunePin"]
