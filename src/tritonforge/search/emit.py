"""The optimized file as the user asked for it: the best fixed config, or @triton.autotune.

With ``emit = "autotune"`` the best few verified configurations found by the search (block sizes,
num_warps, num_stages at each launch) become the config list of an ``@triton.autotune`` on the
ORIGINAL source, keyed on the kernel's size arguments, so that the file adapts to sizes the search
never timed. The autotuned file is a candidate like any other: the final check verifies and times
it against the original before it is kept. Configs the resource estimate puts over the device's
shared memory or registers (``search.prune``) are left out of the list.
"""

from __future__ import annotations

import logging

from ..analyze import analyze_source
from ..errors import TransformError
from ..model import Candidate
from .prune import UNKNOWN_BYTES, limits_for_hardware, prune_specs

# ``..transforms`` is imported inside functions: it needs libcst, which the GPU image lacks, and
# this module must import there.

log = logging.getLogger(__name__)


def _configs_by_kernel(source: str) -> dict[str, tuple[tuple[tuple[str, int], ...], int, int]]:
    out = {}
    for knobs in analyze_source(source).knobs:
        blocks = tuple((c.name, c.value) for c in knobs.tunable_constexprs
                       if c.block_like and isinstance(c.value, int))
        out.setdefault(knobs.kernel, (blocks, knobs.num_warps or 4, knobs.num_stages or 3))
    return out


def autotune_candidate(original: Candidate, ranked: list[Candidate], max_configs: int = 6,
                       limits=None, nbytes: tuple[int, int] | None = None) -> Candidate | None:
    """@triton.autotune on ``original`` over the configs of ``ranked`` (best first), or None when
    fewer than two distinct configs exist or the transform does not apply (the reason is logged).
    ``limits`` (a ``profile.limits.DeviceLimits``, default sm_90's) and ``nbytes`` (element sizes,
    default unknown) decide which configs cannot fit and are left out."""
    from ..transforms import get
    from ..transforms.configs import ConfigSpec

    limits = limits or limits_for_hardware(None)

    per_kernel: dict[str, list[ConfigSpec]] = {}
    names: dict[str, tuple[str, ...]] = {}
    for cand in ranked:
        for kernel, (blocks, warps, stages) in _configs_by_kernel(cand.source).items():
            spec = ConfigSpec(blocks, warps, stages)
            specs = per_kernel.setdefault(kernel, [])
            names.setdefault(kernel, tuple(n for n, _ in blocks))
            if spec not in specs and tuple(n for n, _ in blocks) == names[kernel] \
                    and len(specs) < max_configs:
                specs.append(spec)
    for kernel, (blocks, warps, stages) in _configs_by_kernel(original.source).items():
        specs = per_kernel.get(kernel, [])
        fallback = ConfigSpec(blocks, warps, stages)
        if len(specs) == 1 and fallback not in specs and tuple(n for n, _ in blocks) == names.get(kernel):
            specs.append(fallback)   # keep the original as the fallback
    for kernel, specs in per_kernel.items():
        kept, dropped = prune_specs(original.source, kernel, specs, limits, nbytes or UNKNOWN_BYTES)
        for d in dropped:
            log.info("autotune output for %s leaves out %s", kernel, d)
        per_kernel[kernel] = kept
    source = original.source
    transform = get("autotune")
    changed = False
    for kernel, specs in per_kernel.items():
        if len(specs) < 2:
            continue
        try:
            source = transform.apply(source, None, kernel=kernel, names=list(names[kernel]),
                                     configs=specs, max_configs=max_configs)
            changed = True
        except TransformError as exc:
            log.info("no autotune output for %s: %s", kernel, exc)
    if not changed:
        return None
    return Candidate(source, "emit:autotune", original.hash,
                     f"@triton.autotune over the {sum(len(s) for s in per_kernel.values())} best configs")
