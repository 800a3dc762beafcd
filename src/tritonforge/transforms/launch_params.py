"""Set ``num_warps=`` / ``num_stages=`` at launch sites, or on the configs of autotuned kernels.

The cheapest change there is: no kernel code moves. Measured on TritonBench-G (DESIGN.md), it
alone made 4 of 6 kernels probed at least 1.05x faster. An autotuned kernel takes its launch
options from its ``triton.Config`` list (passing them at the launch as well is an error in
Triton 3.6: "got multiple values"), so there the configs are edited instead, for every launch.
At a call through a local alias (``fx[grid](...)``, ``fx`` one of several kernels) the options
reach whichever kernel runs; refused when another of them is autotuned or sets them by heuristics.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from ..analyze import KernelInfo, LaunchSite, SourceAnalysis
from ._cst import dotted, find_kernel, int_node, launch_calls, replace, set_keyword, site_selection
from .base import Applicability, Transform, first_no, short, site_label

_OPTION_POSITION = {"num_warps": 1, "num_stages": 2}    # positions in triton.Config(kwargs, ...)


def check_launch_values(num_warps: int | None, num_stages: int | None) -> str | None:
    if num_warps is None and num_stages is None:
        return "give num_warps and/or num_stages"
    if num_warps is not None and (not isinstance(num_warps, int) or num_warps < 1
                                  or num_warps > 32 or num_warps & (num_warps - 1)):
        return f"num_warps={num_warps!r} must be a power of two from 1 to 32"
    if num_stages is not None and (not isinstance(num_stages, int) or not 1 <= num_stages <= 8):
        return f"num_stages={num_stages!r} must be an integer from 1 to 8"
    return None


def set_config_option(call: cst.Call, name: str, value: int) -> cst.Call:
    """A ``triton.Config(...)`` call with ``name`` (num_warps/num_stages) set to ``value``."""
    pos = _OPTION_POSITION[name]
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if len(positional) > pos:
        args = list(call.args)
        args[args.index(positional[pos])] = positional[pos].with_changes(value=int_node(value))
        return call.with_changes(args=args)
    return set_keyword(call, name, int_node(value))


def config_calls(node: cst.CSTNode) -> list[cst.Call]:
    """Every ``triton.Config(...)`` call below ``node``."""
    found: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            if dotted(call.func).split(".")[-1] == "Config":
                found.append(call)

    node.visit(V())
    return found


def autotune_decorator(fn: cst.FunctionDef) -> cst.Call | None:
    for dec in fn.decorators:
        if isinstance(dec.decorator, cst.Call) and \
                dotted(dec.decorator.func).split(".")[-1] == "autotune":
            return dec.decorator
    return None


def module_configs_target(module: cst.Module, kernel: KernelInfo) -> cst.CSTNode | None:
    """Where the Config calls of an autotuned kernel live: its decorator or a module-level list."""
    fn = find_kernel(module, kernel.name)
    dec = autotune_decorator(fn)
    if dec is None:
        return None
    configs = next((a.value for a in dec.args if a.keyword and a.keyword.value == "configs"),
                   dec.args[0].value if dec.args and dec.args[0].keyword is None else None)
    if isinstance(configs, cst.Name):
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign) and any(
                            isinstance(t.target, cst.Name) and t.target.value == configs.value
                            for t in small.targets):
                        return small.value
        return None
    return dec


def _partner_problem(analysis: SourceAnalysis, site: LaunchSite, num_warps: int | None,
                     num_stages: int | None) -> str | None:
    """Why launch options cannot go on an alias call (``fx[grid](...)``, ``fx`` one of several
    kernels): they reach whichever kernel runs, which is right unless another of them takes them
    from its autotune configs (passing them too is an error) or from @triton.heuristics."""
    for name in site.alias_partners:
        other = analysis.kernel(name)
        if other.autotune is not None:
            return f"{site_label(site)}: `{site.alias}` may also be {name}, which is " \
                   "autotuned: launch options at that call would clash with its configs"
        set_by = [n for n, v in (("num_warps", num_warps), ("num_stages", num_stages))
                  if v is not None and n in other.heuristics]
        if set_by:
            return f"{site_label(site)}: `{site.alias}` may also be {name}, whose " \
                   f"@triton.heuristics sets {set_by[0]}"
    return None


class LaunchParams(Transform):
    name = "launch_params"
    summary = "set num_warps/num_stages at launch sites (or on autotune configs)"
    param_names = ("num_warps", "num_stages", "site", "kernel")
    example_params = {"num_warps": 8}

    def _targets(self, analysis: SourceAnalysis, site: int | None, kernel: str | None,
                 num_warps: int | None, num_stages: int | None
                 ) -> tuple[list[LaunchSite], list[KernelInfo], list[str]]:
        sites, tuned, reasons = [], [], []
        for s in site_selection(analysis, site, kernel):
            k = analysis.kernel(s.kernel)
            if k.autotune is not None:
                if not k.autotune.configs_complete:
                    reasons.append(f"{k.name} is autotuned with configs from "
                                   f"`{short(k.autotune.configs_source)}`, not editable in place")
                elif all((num_warps is None or (c.num_warps or 4) == num_warps)
                         and (num_stages is None or (c.num_stages or 3) == num_stages)
                         for c in k.autotune.configs):
                    reasons.append(f"every autotune config of {k.name} already has these values")
                elif k not in tuned:
                    tuned.append(k)
                continue
            by_heuristics = [n for n, v in (("num_warps", num_warps), ("num_stages", num_stages))
                             if v is not None and n in k.heuristics]
            if by_heuristics:
                reasons.append(f"site {s.index} ({s.kernel}): @triton.heuristics sets "
                               f"{by_heuristics[0]}, which would override the launch")
                continue
            partner = _partner_problem(analysis, s, num_warps, num_stages)
            if partner:
                reasons.append(partner)
                continue
            if s.has_star_args:
                reasons.append(f"site {s.index} ({s.kernel}) passes *args/**kwargs: "
                               "launch options may come from there")
                continue
            same = (num_warps is None or s.knobs.num_warps == num_warps) and \
                   (num_stages is None or s.knobs.num_stages == num_stages)
            if same:
                reasons.append(f"site {s.index} ({s.kernel}) already has these values")
                continue
            sites.append(s)
        return sites, tuned, reasons

    def _applies(self, analysis: SourceAnalysis, num_warps: int | None = None,
                 num_stages: int | None = None, site: int | None = None,
                 kernel: str | None = None, **_: Any) -> Applicability:
        bad = check_launch_values(num_warps, num_stages)
        if bad:
            return Applicability.no(bad)
        sites, tuned, reasons = self._targets(analysis, site, kernel, num_warps, num_stages)
        if not sites and not tuned:
            return first_no(reasons, "launch site" if site is None else f"launch site {site}")
        targets = list(dict.fromkeys(site_label(s) for s in sites))
        targets += [f"autotune configs of {k.name}" for k in tuned]
        return Applicability.yes(targets, "; ".join(reasons))

    def _apply(self, source: str, analysis: SourceAnalysis, num_warps: int | None = None,
               num_stages: int | None = None, site: int | None = None,
               kernel: str | None = None, **_: Any) -> str:
        module = cst.parse_module(source)
        sites, tuned, _ = self._targets(analysis, site, kernel, num_warps, num_stages)
        values = [(n, v) for n, v in (("num_warps", num_warps), ("num_stages", num_stages))
                  if v is not None]
        edits = {}
        calls = launch_calls(module, analysis)
        for s in sites:
            def edit(call: cst.Call) -> cst.Call:
                for n, v in values:
                    call = set_keyword(call, n, int_node(v))
                return call
            edits[id(calls[s.index])] = edit
        for k in tuned:
            target = module_configs_target(module, k)
            if target is None:
                continue
            for cfg in config_calls(target):
                def edit_cfg(call: cst.Call) -> cst.Call:
                    for n, v in values:
                        call = set_config_option(call, n, v)
                    return call
                edits[id(cfg)] = edit_cfg
        return replace(module, edits).code


__all__ = ["LaunchParams", "autotune_decorator", "check_launch_values", "config_calls",
           "module_configs_target", "set_config_option"]
