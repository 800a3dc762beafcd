"""The timing plan a request follows, from Settings (driver side; ``runtime.timing`` carries it
out in the worker): the search's plan, and the final check's, which times everything in full."""

from __future__ import annotations

import dataclasses

from ..config import Settings
from .timing import TimingPlan


def timing_plan(settings: Settings) -> TimingPlan:
    return TimingPlan(rounds=settings.timing_rounds, round_ms=settings.timing_round_ms,
                      warmup_ms=settings.timing_warmup_ms, flush_l2=settings.flush_l2,
                      flush_mode=settings.flush_mode, interleave=settings.timing_interleave,
                      pace=settings.timing_pace,
                      cuda_graph=settings.cuda_graph,
                      autotune_rep_ms=settings.search_autotune_rep_ms or None)


def final_check_plan(settings: Settings) -> TimingPlan:
    """The final check times every variant on every case in full: its figures are the ones
    reported, and a variant dropped early there (on one noisy estimate) would lose a real
    speedup. The per-case time budget still bounds slow cases. Autotuned kernels tune with
    Triton's own benchmark there, as in the user's process."""
    return dataclasses.replace(timing_plan(settings), abandon_slower=None, autotune_rep_ms=None)
