"""Prune configs that cannot fit the device before anything is compiled or verified.

``search.resources`` estimates, from the source alone, a (low, high) range of shared memory and
registers per thread for every launch config of a candidate (block sizes from the constexpr
values at the launch, num_warps, num_stages, element sizes from the task's tensor dtypes). Against
the device limits of ``profile.limits`` (sm_90: 227 KiB shared per block, 255 registers per thread,
64K registers per block) a config is

- OVER when even the low end is over a limit (threads per block; the operands of one ``tl.dot``
  in one buffer; the tiles carried across a loop, which must stay in registers or spill): it is
  pruned, with a ``Pruned`` record that the loop writes into its history (``Status.PRUNED``);
- UNCERTAIN when only the high end is over: it is kept, and the GPU compile decides;
- FITS otherwise.

A candidate is pruned only for a (launch, resource) that its parent does not already exceed by
the same estimate: when the estimate calls the running incumbent "over", the estimate is wrong
for this kernel, and it must not block the whole search.

Decision on a second, precise stage (a static compile for sm_90 with ``profile.static``, which
reads the real registers, spills and shared memory): not used. Measured here (2 CPU cores,
Triton 3.6, a masked fp32/fp16 matmul, 2026-11-22): 1 to 4 s per ordinary config, 12 s for
256x256x32 and 46 s for 256x256x128 (ptxas on spill-heavy code), 270 s for 256x256x64 fp16
(ptxas timed out) -- and the uncertain configs are exactly the large ones. That is slower than
letting the GPU worker compile and reject them, so uncertain configs go on to verification, and
``profile.static.compile_stats`` stays the tool for a diagnosis, not for pruning.
"""

from __future__ import annotations

import ast
import enum
import logging
from dataclasses import dataclass
from typing import Any, Iterable

from ..analyze import analyze_source
from ..model import Candidate, HardwareInfo, HistoryEntry, SpecCall, Status, Task, TensorSpec
from ..profile.limits import DeviceLimits, limits_for
from .resources import UNKNOWN_BYTES, Bytes, ResourceEstimate, dtype_bytes, estimate

log = logging.getLogger(__name__)

DEFAULT_ARCH = 90                    # the GPU the search targets when the device does not say


class Fit(str, enum.Enum):
    FITS = "fits"
    UNCERTAIN = "uncertain"
    OVER = "over"


@dataclass(frozen=True)
class ConfigCheck:
    """One launch config of one kernel against the device limits."""

    kernel: str
    site: int | None                       # launch site index; None for an autotune config
    config: tuple[tuple[str, Any], ...]    # constexpr values, num_warps, num_stages
    estimate: ResourceEstimate
    fit: Fit
    over: tuple[tuple[str, str], ...] = ()       # (resource, reason) certainly over
    uncertain: tuple[tuple[str, str], ...] = ()  # (resource, reason) maybe over

    @property
    def reason(self) -> str:
        return "; ".join(r for _, r in self.over)


@dataclass(frozen=True)
class Pruned:
    """A candidate dropped before verification because a config of it cannot fit the device."""

    candidate: str                  # hash
    origin: str
    description: str
    reason: str
    resources: tuple[str, ...]      # "shared", "registers", "threads"
    stage: str = "estimate"

    def history_entry(self) -> HistoryEntry:
        return HistoryEntry(self.candidate, self.origin, self.description, Status.PRUNED, None,
                            f"pruned before compiling ({self.stage}): {self.reason}")


def limits_for_hardware(hardware: HardwareInfo | None) -> DeviceLimits:
    """The device's limits from its compute capability ("9.0"), else sm_90's."""
    cap = getattr(hardware, "capability", "") if hardware is not None else ""
    try:
        major, _, minor = str(cap).partition(".")
        arch = int(major) * 10 + int(minor or 0) if cap else DEFAULT_ARCH
    except ValueError:
        arch = DEFAULT_ARCH
    return limits_for(arch)


def task_element_bytes(task: Task | None) -> Bytes:
    """The range of floating-point element sizes among the task's tensor inputs (unknown: 1-4)."""
    if task is None:
        return UNKNOWN_BYTES
    sizes: set[int] = set()

    def visit(v: Any) -> None:
        if isinstance(v, TensorSpec):
            if "float" in v.dtype or v.dtype.startswith(("fp", "bf")):
                b = dtype_bytes(v.dtype)
                if b:
                    sizes.add(b)
        elif isinstance(v, tuple):
            for x in v:
                visit(x)

    for case in task.cases:
        if isinstance(case.recipe, SpecCall):
            visit(case.recipe.args)
            visit(tuple(v for _, v in case.recipe.kwargs))
    return (min(sizes), max(sizes)) if sizes else UNKNOWN_BYTES


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB"


def check_estimate(e: ResourceEstimate, limits: DeviceLimits) -> tuple[Fit, tuple, tuple]:
    """(fit, over, uncertain) of one estimate; over/uncertain are (resource, reason) pairs."""
    over, maybe = [], []
    threads = e.threads
    if threads > limits.max_threads_per_block:
        over.append(("threads", f"num_warps={e.num_warps} is {threads} threads per block, over the "
                                f"{limits.max_threads_per_block} {limits.name} allows"))
    lo, hi = e.shared_bytes
    tiles = ", ".join(f"dot {d.m}x{d.k} @ {d.k}x{d.n}" for d in e.dots)
    if lo > limits.shared_per_block:
        over.append(("shared", f"shared memory: one buffer of the tl.dot operands ({tiles}) "
                               f"needs {_kib(lo)}, over the {_kib(limits.shared_per_block)} "
                               f"{limits.name} allows per block (num_stages={e.num_stages} "
                               f"multi-buffers it to ~{_kib(hi)})"))
    elif hi > limits.shared_per_block:
        maybe.append(("shared", f"shared memory up to ~{_kib(hi)} with num_stages="
                                f"{e.num_stages} ({tiles}), over {_kib(limits.shared_per_block)}"))
    cap = min(limits.registers_per_thread, (limits.registers_per_block // threads) // 8 * 8)
    rlo, rhi = e.registers
    if rlo > cap:
        over.append(("registers", f"registers: the tiles carried across the loop need >= {rlo} "
                                  f"registers per thread at num_warps={e.num_warps}, over the "
                                  f"{cap} {limits.name} allows: they would spill to local memory"))
    elif rhi > cap:
        maybe.append(("registers", f"registers: up to ~{rhi} per thread, over {cap}"))
    fit = Fit.OVER if over else Fit.UNCERTAIN if maybe else Fit.FITS
    return fit, tuple(over), tuple(maybe)


def _check(tree: ast.Module, kernel: str, site: int | None, constexprs: dict[str, Any],
           warps: int | None, stages: int | None, limits: DeviceLimits,
           nbytes: Bytes) -> ConfigCheck | None:
    w, s = warps or 4, stages or 3
    try:
        e = estimate(tree, kernel, constexprs, w, s, default_bytes=nbytes)
    except Exception as exc:  # noqa: BLE001 - an estimate that trips on odd code must not cost the candidate
        log.debug("no resource estimate for %s: %s: %s", kernel, type(exc).__name__, exc)
        return None
    if e is None:
        return None
    fit, over, maybe = check_estimate(e, limits)
    config = tuple(sorted(constexprs.items())) + (("num_warps", w), ("num_stages", s))
    return ConfigCheck(kernel, site, config, e, fit, over, maybe)


def check_source(source: str, limits: DeviceLimits, nbytes: Bytes = UNKNOWN_BYTES) -> list[ConfigCheck]:
    """Every launch site's config (and every autotune config) of ``source``, checked."""
    try:
        analysis = analyze_source(source)
        tree = ast.parse(source)
    except Exception as exc:  # noqa: BLE001 - a source that does not parse is the verifier's to report
        log.debug("no resource check, the source does not parse: %s", exc)
        return []
    out: list[ConfigCheck] = []
    for knobs in analysis.knobs:
        if knobs.autotuned:
            continue
        consts = {k.name: k.value for k in knobs.constexprs if isinstance(k.value, int)}
        c = _check(tree, knobs.kernel, knobs.site, consts, knobs.num_warps, knobs.num_stages, limits, nbytes)
        if c is not None:
            out.append(c)
    for k in analysis.kernels:
        for cfg in (k.autotune.configs if k.autotune else ()):
            consts = {n: v for n, v in cfg.kwargs if isinstance(v, int)}
            c = _check(tree, k.name, None, consts, cfg.num_warps, cfg.num_stages, limits, nbytes)
            if c is not None:
                out.append(c)
    return out


def over_keys(checks: Iterable[ConfigCheck]) -> set[tuple[str, int | None, str]]:
    return {(c.kernel, c.site, res) for c in checks for res, _ in c.over}


def prune_candidate(cand: Candidate, parent_source: str | None, limits: DeviceLimits,
                    nbytes: Bytes = UNKNOWN_BYTES,
                    parent_over_keys: set | None = None) -> Pruned | None:
    """A ``Pruned`` record when ``cand`` has a launch config over the limits that its parent's
    same launch is not already over; None when it may go on to verification."""
    checks = [c for c in check_source(cand.source, limits, nbytes) if c.site is not None]
    if not any(c.fit is Fit.OVER for c in checks):
        return None
    parent_over = parent_over_keys if parent_over_keys is not None else (
        over_keys(check_source(parent_source, limits, nbytes)) if parent_source else set())
    reasons, resources = [], []
    for c in checks:
        for res, why in c.over:
            if (c.kernel, c.site, res) in parent_over:
                log.info("%s: the estimate says %s at launch %s is over, but so is the parent's: "
                         "not pruned on it", c.kernel, res, c.site)
                continue
            reasons.append(f"{c.kernel} launch {c.site}: {why}")
            resources.append(res)
    if not reasons:
        return None
    return Pruned(cand.hash, cand.origin, cand.description, "; ".join(reasons),
                  tuple(dict.fromkeys(resources)))


def prune_candidates(cands: list[Candidate], parent_source: str | None, limits: DeviceLimits,
                     nbytes: Bytes = UNKNOWN_BYTES) -> tuple[list[Candidate], list[Pruned]]:
    """Split ``cands`` into those that may fit (in order) and the pruned ones."""
    parent_over = over_keys(check_source(parent_source, limits, nbytes)) if parent_source else set()
    kept, pruned = [], []
    for c in cands:
        p = prune_candidate(c, parent_source, limits, nbytes, parent_over_keys=parent_over)
        if p is None:
            kept.append(c)
        else:
            log.info("pruned %s: %s", c.description or c.hash, p.reason)
            pruned.append(p)
    return kept, pruned


def prune_specs(source: str, kernel: str, specs: list, limits: DeviceLimits,
                nbytes: Bytes = UNKNOWN_BYTES) -> tuple[list, list[str]]:
    """Autotune ``ConfigSpec``s of ``kernel`` that may fit, and why each other one was dropped."""
    tree = ast.parse(source)
    kept, dropped = [], []
    for spec in specs:
        c = _check(tree, kernel, None, dict(spec.kwargs), spec.num_warps, spec.num_stages, limits, nbytes)
        if c is not None and c.fit is Fit.OVER:
            dropped.append(f"{spec.render()}: {c.reason}")
        else:
            kept.append(spec)
    return kept, dropped
