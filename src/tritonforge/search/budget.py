"""How long the fresh-process final check will take, so that a record's time budget covers it.

The search's budget used to buy rounds only: the final check (a new worker, every case verified,
every performance case timed for the original and the best) ran after it, unbudgeted. On the H100
(2026-11-25, one shard) a record the budget stopped ended at about its 120 s budget plus a 28-71 s
final check, so a whole run's median wall could not come under its per-kernel budget. The loop now
starts a round only if that round and this estimate both fit (``search.loop``).

The estimate has two parts:
- ``FINAL_FIXED_S``: starting the worker, importing both files, running and verifying every case.
  Measured on the H100: 5-6 s to start the worker, 6 s to import, 9-10 s to run and verify 19 cases
  (rope_embedding, fifth_order_sph_harmonics; 2026-11-25).
- the timing: what ``runtime.timing`` spends on each performance case for two variants, from the
  original's per-call time and the final check's timing plan, scaled by what the search's own
  timing requests cost against the same model (L2 flushes, host work and launches are not in the
  model; the ratio carries them).

A final check that takes longer than estimated (a second one for a size dispatch, an autotuned
best tuning with Triton's own benchmark) still runs: the budget stops search, never a check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from ..runtime.timing import TimingPlan

FINAL_FIXED_S = 20.0
MAX_RATIO = 20.0        # one hung timing request must not make every later estimate absurd
# before any timing was measured (round 1 verified nothing): the middle of the ratios 11 records
# showed on the H100 (2026-11-25), 2.7-12
DEFAULT_RATIO = 5.0


def case_timing_ms(call_ms: float, variants: int, plan: TimingPlan) -> float:
    """GPU milliseconds ``runtime.timing`` spends timing one case of ``call_ms`` per call for
    ``variants`` variants under ``plan``: each variant's warm-up, then rounds of about
    ``round_ms`` (at least one call, at most ``max_calls_per_round``) per variant, rounds past
    ``min_rounds`` cut once the case has had ``case_budget_ms``."""
    call_ms = max(call_ms, 0.0) if call_ms == call_ms else plan.round_ms   # NaN: unknown time
    per_round = max(min(plan.round_ms, plan.max_calls_per_round * call_ms), call_ms)
    rounds_ms = variants * plan.rounds * per_round
    if plan.case_budget_ms is not None:
        rounds_ms = min(rounds_ms, max(plan.case_budget_ms, variants * plan.min_rounds * per_round))
    return variants * plan.warmup_ms + rounds_ms


@dataclass
class FinalCheckEstimate:
    """Learns from the search's timing requests what timing costs here, and estimates the final
    check from it. ``call_ms``: the original's per-call time by case id (the baseline's)."""

    call_ms: Mapping[str, float]
    search_plan: TimingPlan
    final_plan: TimingPlan
    measured_s: float = 0.0
    modelled_s: float = 0.0

    def _model_s(self, case_ids: Iterable[str], variants: int, plan: TimingPlan) -> float:
        return sum(case_timing_ms(self.call_ms.get(cid, float("nan")), variants, plan)
                   for cid in case_ids) / 1000.0

    def observe(self, seconds: float, variants: int, case_ids: Iterable[str]) -> None:
        """One search timing request: ``variants`` timed on ``case_ids`` in ``seconds``."""
        model = self._model_s(case_ids, variants, self.search_plan)
        if model > 0 and seconds > 0:
            self.measured_s += seconds
            self.modelled_s += model

    @property
    def ratio(self) -> float:
        """Measured over modelled seconds of the search's timing so far (at least 1: the search
        drops slow variants early, which the final check does not)."""
        if self.modelled_s <= 0:
            return DEFAULT_RATIO
        return min(max(self.measured_s / self.modelled_s, 1.0), MAX_RATIO)

    def seconds(self, perf_ids: Iterable[str]) -> float:
        """The final check's expected seconds over the performance cases ``perf_ids``."""
        return FINAL_FIXED_S + self.ratio * self._model_s(perf_ids, 2, self.final_plan)
