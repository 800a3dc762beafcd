"""The timing plan a request follows, from Settings (driver side; ``runtime.timing`` carries it
out in the worker): the search's plan, the baseline's shorter one, and the final check's, which
times everything in full."""

from __future__ import annotations

import dataclasses

from ..config import Settings
from .timing import TimingPlan


SCREEN_REGRESSIONS = 2.0
SCREEN_TIE = 0.99


def timing_plan(settings: Settings) -> TimingPlan:
    """The search's plan, from the settings' timing section. Past its minimum rounds a case
    times on only the variants within ``SCREEN_REGRESSIONS`` times the per-case regression limit
    of the incumbent (``TimingPlan.screen_slower``: 1.10 with the 5% limit). A variant whose
    median is 10% slower there after four interleaved rounds is not made faster by six more; the
    arbiter and the final check reject it for that case whatever its other cases gain, and its
    four rounds still say where it is slower for a size split. The rounds it would have had go to
    the variants still in the race, or end the case sooner.

    A variant no faster than the incumbent there after those rounds (its median at least
    ``SCREEN_TIE`` of the incumbent's: ``TimingPlan.screen_not_faster``) is timed no further on
    that case either, and a case with no variant left in the race ends. Most candidates of a
    round are ties on most cases, and they took all ten rounds: on four H100s (120 s a record,
    engine 7dffd2b9f369, 2026-11-27) kldiv_ops timed 16 candidates for 78 s and
    fp4_to_bf16's search left its final check 3 s. Four rounds of interleaved calls (up to 800
    samples of a quick call) already tell a tie from a gain; the arbiter judges each case on
    the samples it has, and the final check times every variant in full."""
    t = settings.timing
    return TimingPlan(rounds=t.rounds, round_ms=t.round_ms, warmup_ms=t.warmup_ms,
                      max_calls_per_round=t.max_calls_per_round,
                      flush_l2=t.flush_l2, flush_mode=t.flush_mode, interleave=t.interleave,
                      pace=t.pace, cuda_graph=t.cuda_graph,
                      autotune_rep_ms=t.search_autotune_rep_ms or None,
                      screen_slower=1.0 + SCREEN_REGRESSIONS * settings.search.max_case_regression,
                      screen_not_faster=SCREEN_TIE)


def final_check_plan(settings: Settings) -> TimingPlan:
    """The final check times every variant on every case in full: its figures are the ones
    reported, and a variant dropped early there (on one noisy estimate) would lose a real
    speedup. The per-case time budget still bounds slow cases. Autotuned kernels tune with
    Triton's own benchmark there, as in the user's process, where that ends by the record's cap
    (``search.final_check.FinalCheck._plan``)."""
    return dataclasses.replace(timing_plan(settings), abandon_slower=None, screen_slower=None,
                               screen_not_faster=None, autotune_rep_ms=None)


BASELINE_ROUNDS = 3


def baseline_plan(settings: Settings) -> TimingPlan:
    """The original's baseline: the search's plan cut to ``BASELINE_ROUNDS`` rounds. Its times
    order the cases, choose the profiled one and size the budget's estimates; no speedup comes
    from them (the rounds and the final check time the original beside each candidate). With the
    search's 10 rounds it took 4-11 s of a 120 s record for 16 cases (H100 pass, 2026-11-26)."""
    return rounds_cut(timing_plan(settings), BASELINE_ROUNDS)


def rounds_cut(plan: TimingPlan, rounds: int) -> TimingPlan:
    """``plan`` with at most ``rounds`` rounds (its minimum cut to match)."""
    rounds = min(plan.rounds, rounds)
    return dataclasses.replace(plan, rounds=rounds, min_rounds=min(plan.min_rounds, rounds))
