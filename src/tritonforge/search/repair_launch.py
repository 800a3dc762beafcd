"""Rule repairs that write a launch option the failed source does not have (driver side).

``search.repair``'s rules edit literals that are already there. A kernel launched without
``num_stages=`` compiles with Triton's default of 3 stages, which multi-buffers every loop over
loads in shared memory; when that is what overflows the device (OutOfResources: shared memory),
no literal exists to lower. This repair writes ``num_stages=2`` (two thirds of the default's
buffers) at each launch site that takes it: not autotuned, options not from
``@triton.heuristics`` or ``*args``, kernel looping over loads (elsewhere stages change no code). The edit goes through ``transforms.launch_params``, as the rules' own moves do.
"""

from __future__ import annotations

import logging

from ..analyze import analyze_source
from ..errors import TransformError
from ..model import Candidate
from .rules import _may_pipeline

log = logging.getLogger(__name__)


def stages_at_launches(candidate: Candidate, stages: int) -> Candidate | None:
    """``candidate`` with ``num_stages=stages`` written at every launch site that does not set
    it and whose kernel loops over loads; None when there is none (or libcst is missing)."""
    try:
        from ..transforms import get   # needs libcst, which the GPU image lacks
    except Exception as exc:  # noqa: BLE001 - no libcst (the GPU image): no such repair
        log.debug("no launch-option repair: %s", exc)
        return None
    source = candidate.source
    try:
        analysis = analyze_source(source)
    except Exception:  # noqa: BLE001 - a source that does not parse has no launches to edit
        return None
    sites = [k.site for k in analysis.knobs
             if not k.autotuned and not k.num_stages_given and analysis.has_kernel(k.kernel)
             and _may_pipeline(analysis, k.kernel)]
    if not sites:
        return None
    transform = get("launch_params")
    done = []
    for site in sites:
        analysis = analyze_source(source)
        if not transform.applies(analysis, num_stages=stages, site=site):
            continue
        try:
            source = transform.apply(source, analysis, num_stages=stages, site=site)
        except TransformError as exc:
            log.debug("num_stages=%d at launch %d: %s", stages, site, exc)
            continue
        done.append(site)
    if not done:
        return None
    where = ", ".join(str(s) for s in done)
    return Candidate(source, "repair:rules:fewer-stages", candidate.hash,
                     f"shared memory exceeded: num_stages={stages} written at launch {where} "
                     "(Triton's default is 3)")


__all__ = ["stages_at_launches"]
