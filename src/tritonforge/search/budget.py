"""How long the fresh-process final check will take, so that a record's time budget covers it.

The search's budget used to buy rounds only: the final check (a new worker, every case verified,
every performance case timed for the original and the best) ran after it, unbudgeted. On the H100
(one shard) a record the budget stopped ended at about its 120 s budget plus a 28-71 s
final check, so a whole run's median wall could not come under its per-kernel budget. The loop now
starts a round only if that round and this estimate both fit (``search.loop``).

The estimate has two parts:
- the fixed part (``final_fixed_s``, from the baseline's first runs; ``FINAL_FIXED_S`` without
  them): importing both files, their first runs (compile, autotune) and verifying every
  case, in a worker started ahead of need. Measured on four H100s (engine ec0277a5535e,
  2026-11-27), the seven final checks of 16 records spent 4.7-14.3 s (median 5.9 s) in their
  worker outside timing, and about 1 s around it; it was 20 s when the worker's 5-6 s start
  and a 6 s import were part of every check (2026-11-25).
- the timing: what ``runtime.timing`` spends on each performance case for two variants, from the
  original's per-call time and the final check's timing plan, scaled by what the search's own
  timing requests cost against the same model (L2 flushes, host work and launches are not in the
  model; the ratio carries them).

``BudgetPolicy`` is the one place that decides what the time left buys: whether a round starts,
whether the first final check must run on a shorter timing plan to end under the record's cap
(``overrun`` times the budget, final check included), and whether a second final check (a fallback
along the chain, a runner-up, a size dispatch's probes and check, an autotune output) still fits;
when it does not, the best result already verified stands. On the H100 (24 TritonBench-G records,
--per-kernel 120) 6 walls ran over 1.5x the budget, up to 420 s: an autotuned int8 matmul whose
final check alone took 207 s, its first-run autotune never estimated.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping

from ..analyze import analyze_source
from ..runtime.timing import TimingPlan

FINAL_FIXED_S = 15.0
# The fixed part from the record's own baseline, where its run says how long the original's
# first runs of every case took (``first_runs_s``): the check runs both variants once a case,
# then verifies each case on two seeds with the bare-call probe. On four H100s (engine
# 1018ceeea5af, 2026-11-27) nine final checks spent 1.2-19.4 s outside timing, 2.8-39 times
# their baseline's first runs (0.1-4.0 s), median 5.2: 15 s reserved 11 s too much for a
# 3.9 s check and 4.4 s too little for add_example's 19.4 s (2.8 s of first runs).
FIXED_OVERHEAD_S = 2.0       # the prestarted worker's import and the results' way back
FIXED_PER_FIRST_RUN = 5.0    # seconds of the check's fixed part per second of first runs
FIXED_FLOOR_S = 5.0
_FIRST_RUNS = re.compile(r"first runs \(compile, autotune\) ([0-9.]+)")


def first_runs_s(notes: Iterable[str] | None) -> float | None:
    """Seconds the original's baseline run spent in its first runs of every case (its worker's
    ``phase_note``); None where no note says."""
    for note in notes or ():
        if note.startswith("worker seconds"):
            m = _FIRST_RUNS.search(note)
            if m:
                return float(m.group(1))
    return None


def final_fixed_s(first_runs: float | None) -> float:
    """The final check's expected seconds outside timing and first-run autotuning:
    ``FIXED_PER_FIRST_RUN`` times the baseline's first runs, plus ``FIXED_OVERHEAD_S``, at least
    ``FIXED_FLOOR_S``; ``FINAL_FIXED_S`` where they are not known."""
    if first_runs is None:
        return FINAL_FIXED_S
    return max(FIXED_FLOOR_S, FIXED_OVERHEAD_S + FIXED_PER_FIRST_RUN * first_runs)
MAX_RATIO = 20.0        # one hung timing request must not make every later estimate absurd
MIN_SEARCH_RATIO = 0.2  # nor one request that screened every variant off at once
# What a timed call costs beyond the original's own GPU time (the L2 flush before it, the pacing
# sleep, the input variation, the host's launch), in ``case_timing_ms``'s model, where it is paid
# by every call of a round. Fitted with ``scripts/timing_model_fit.py`` to the timing requests
# (search rounds and final checks) of paced engines: measured over modelled time had a median of
# 0.88 (range 0.48-1.93) over 20 requests on four H100s (engine b84f85a408d7, 2026-11-28) and
# 1.25 (0.35-5.51, the top ones autotuned records) over 25 on two H200s (engine c064071456aa)
# with 0.3 ms a call; with the 0.1 ms fitted before pacing, medians of 1.98 and 2.34. The H100s
# fit 0.25 ms best and the H200s 0.4 ms.
CALL_OVERHEAD_MS = 0.3
# before any timing was measured (round 1 verified nothing): above the ratios of most of those
# requests (the ones above are autotuned records, whose tuning the final check's estimate counts
# apart); the 3.0 of the 0.1 ms model, whose figures were about half these, allowed about as much
DEFAULT_RATIO = 2.0


def case_timing_ms(call_ms: float, variants: int, plan: TimingPlan,
                   overhead_ms: float = 0.0) -> float:
    """Milliseconds ``runtime.timing`` spends timing one case of ``call_ms`` (GPU time) per call
    for ``variants`` variants under ``plan``, as its loop does: each variant's warm-up, then
    rounds of ``round_ms / call_ms`` calls per variant (at least one, at most
    ``max_calls_per_round``), each call costing ``overhead_ms`` besides its own time (the flush,
    the pacing sleep, the input variation, the launch: ``CALL_OVERHEAD_MS``), rounds past
    ``min_rounds`` cut once the case has had ``case_budget_ms`` of call time. A quick call's
    round is its calls' overhead, not ``round_ms``: 200 paced calls of a 5 us kernel took 76-128
    ms a round for a plan of 8 ms (two H200s, engine c064071456aa, 2026-11-28)."""
    call_ms = max(call_ms, 0.0) if call_ms == call_ms else plan.round_ms   # NaN: unknown time
    calls = max(1, min(plan.max_calls_per_round, int(plan.round_ms / max(call_ms, 1e-6))))
    rounds = float(plan.rounds)
    call_time_per_round = variants * calls * call_ms
    if plan.case_budget_ms is not None and call_time_per_round > 0:
        rounds = min(rounds, max(float(plan.min_rounds), plan.case_budget_ms / call_time_per_round))
    return variants * plan.warmup_ms + variants * rounds * calls * (call_ms + overhead_ms)


@dataclass
class FinalCheckEstimate:
    """Learns from the search's timing requests what timing costs here, and estimates the final
    check from it. ``call_ms``: the original's per-call time by case id (the baseline's)."""

    call_ms: Mapping[str, float]
    search_plan: TimingPlan
    final_plan: TimingPlan
    measured_s: float = 0.0
    modelled_s: float = 0.0
    fixed_s: float = FINAL_FIXED_S      # the check outside timing (``final_fixed_s``)

    def _model_s(self, case_ids: Iterable[str], variants: int, plan: TimingPlan) -> float:
        return sum(case_timing_ms(self.call_ms.get(cid, float("nan")), variants, plan,
                                  CALL_OVERHEAD_MS)
                   for cid in case_ids) / 1000.0

    def observe(self, seconds: float, variants: int, case_ids: Iterable[str]) -> None:
        """One search timing request: ``variants`` timed on ``case_ids`` in ``seconds``."""
        model = self._model_s(case_ids, variants, self.search_plan)
        if model > 0 and seconds > 0:
            self.measured_s += seconds
            self.modelled_s += model

    @property
    def search_ratio(self) -> float:
        """Measured over modelled seconds of the search's timing so far, below 1 too: the model
        gives every variant all its rounds, and the search's plan screens ties and slow variants
        off a case after the minimum rounds (``runtime.timing_plan.timing_plan``), so its rounds
        cost less than the model says. ``ratio`` keeps at least 1 for the final check, which
        screens nothing."""
        return self._measured_over_model(MIN_SEARCH_RATIO)

    def _measured_over_model(self, floor: float) -> float:
        """Measured over modelled seconds, within [``floor``, ``MAX_RATIO``]; ``DEFAULT_RATIO``
        before anything was measured."""
        if self.modelled_s <= 0:
            return DEFAULT_RATIO
        return min(max(self.measured_s / self.modelled_s, floor), MAX_RATIO)

    @property
    def ratio(self) -> float:
        """Measured over modelled seconds of the search's timing so far (at least 1: the search
        drops slow variants early, which the final check does not)."""
        return self._measured_over_model(1.0)

    def timing_s(self, case_ids: Iterable[str], variants: int,
                 plan: TimingPlan | None = None) -> float:
        """The search's expected seconds timing ``variants`` (the incumbent included) on
        ``case_ids`` with ``plan`` (None: the search's), as its timing requests so far went:
        on the search's own plan, scaled by what they measured against the model however low
        (``search_ratio``); on another plan (a sweep, which drops no variant), by ``ratio``."""
        if plan is None or plan == self.search_plan:
            return self.search_ratio * self._model_s(case_ids, variants, self.search_plan)
        return self.ratio * self._model_s(case_ids, variants, plan)

    def seconds(self, perf_ids: Iterable[str]) -> float:
        """The final check's expected seconds over the performance cases ``perf_ids``."""
        return self.fixed_s + self.ratio * self._model_s(perf_ids, 2, self.final_plan)


# Triton's own autotune benchmark per config per distinct key, in the final check's fresh process:
# do_bench's 25 ms warm-up and 100 ms of repetitions, plus an L2 flush before each repetition and
# the config's first compile or cache load. On an H200 (2026-11-26) a 13-config batched matmul
# (bmm_optimized, a new key per performance case) ran 3 s per case in its final check: 0.23 s a
# config; its 12-config original 0.13 s a config in the baseline.
AUTOTUNE_CONFIG_S = 0.25
# The same with the search's short benchmark (``runtime.quick_autotune.short_bench``, 10 ms of
# repetitions), which a final check uses where Triton's own would not end by the record's cap
# (``FinalCheck._plan``). On four H100s (engine 1018ceeea5af, 2026-11-27) the baselines of three
# autotuned records, which tune that way, spent 0.026-0.032 s per config and key in their first
# runs (every case's first run included): rowwise_quantization_triton 5.6 s for 12 configs on 18
# keys, reversed_cumsum 3.7 s for 9 on 13, swiglu_fwd 3.2 s for 6 on 18.
AUTOTUNE_SHORT_CONFIG_S = 0.04
_CONFIG = re.compile(r"triton\.Config\s*\(")


def autotune_first_run_s(source: str, perf_cases: int,
                         config_s: float = AUTOTUNE_CONFIG_S) -> float:
    """Seconds a fresh process spends tuning ``source``'s ``@triton.autotune`` configs on its
    first runs: every config benchmarked once per performance case (each case taken as its own
    key, the worst case), ``config_s`` each. 0 for a file without autotune."""
    configs = len(_CONFIG.findall(source)) if "autotune" in source else 0
    return configs * perf_cases * config_s


PICK = re.compile(r"^autotune pick original: (\S+) (.*) -> ")


def tuned_keys(notes: Iterable[str], max_lines: int) -> dict[str, int] | None:
    """Kernel -> the distinct keys its autotuner tuned, from the autotune-pick notes of the
    original's baseline run (``runtime.autotune_picks``: one line per kernel and key, the cases
    all run in one process); None when the lines may have been cut at ``max_lines``."""
    keys: dict[str, set[str]] = {}
    lines = 0
    for note in notes:
        m = PICK.match(note)
        if m:
            lines += 1
            keys.setdefault(m.group(1), set()).add(m.group(2))
    if lines >= max_lines:
        return None
    return {k: len(v) for k, v in keys.items()}


@dataclass(frozen=True)
class AutotuneCost:
    """Seconds a fresh process spends tuning a file's ``@triton.autotune`` kernels on its first
    runs, from what the original's baseline run tuned (``keys``: kernel -> distinct keys; None:
    not known, every config of the file counted on every performance case).

    A kernel the original autotuned costs its configs (in the file at hand: a candidate may list
    more) times the keys it tuned; one the original's run never tuned (an autotuned backward
    kernel the entry does not launch) costs nothing; one the original does not autotune at all
    (a candidate that adds ``@triton.autotune``) the worst case, a key per performance case.
    Counting every ``triton.Config`` of the file, softmax_flaggems (12 configs, all of backward
    kernels its forward entry never launches, 16 performance cases) expected 96 s of tuning in
    a final check that tunes nothing, and its search stopped at 48 s of its 120 s with one
    candidate verified (H100 pass, engine f421d501e87f, 2026-11-26); most autotuned records of
    that pass ended "time budget spent" with one verified candidate."""

    keys: Mapping[str, int] | None = None
    # every kernel the original autotunes -> its autotune key: a candidate keyed on more names
    # (``autotune_blocks`` adds the sizes a key leaves out) tunes on keys the original's run never
    # saw, a key per performance case at worst (chunk_cumsum_kernel's key=[] tuned once; keyed on
    # T, once a case)
    original_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def seconds(self, source: str, perf_cases: int, new_cases: int = 0,
                config_s: float = AUTOTUNE_CONFIG_S) -> float:
        """``new_cases``: cases the original's baseline run did not have (generated cases that
        joined later), each a possible new key of every kernel the original tuned; ``config_s``:
        one config's benchmark on one key (``AUTOTUNE_SHORT_CONFIG_S`` on the short one)."""
        if "autotune" not in source:
            return 0.0
        if self.keys is None:
            return autotune_first_run_s(source, perf_cases, config_s)
        try:
            analysis = _analysis(source)
        except Exception:  # noqa: BLE001 - an odd file: the worst case
            return autotune_first_run_s(source, perf_cases, config_s)
        runs = 0
        for k in analysis.kernels:
            if k.autotune is None:
                continue
            configs = len(k.autotune.configs) if k.autotune.configs_extendable \
                else len(_CONFIG.findall(source))
            if k.name not in self.original_keys or \
                    set(k.autotune.key) - set(self.original_keys[k.name]):
                keys = perf_cases
            else:
                tuned = self.keys.get(k.name, 0)
                keys = tuned + new_cases if tuned else 0
            runs += configs * keys
        return runs * config_s


@functools.lru_cache(maxsize=64)
def _analysis(source: str):
    """``analyze_source`` of ``source``, remembered for the few files a record estimates again
    and again (the original and its candidates)."""
    return analyze_source(source)


# a round after the first starts when a quarter of the last round's cost fits beside the final
# check: it verifies what its room allows (``BudgetPolicy.room_in_budget``), the best first
ROUND_MIN_SHARE = 0.25

MIN_PLAN_FRACTION = 0.25     # the final check's timing is never cut below a quarter of its plan
PROFILE_SKIP_SHARE = 0.3     # past this share of the budget before the profile, none is run
# A final check starts where its shortest plan is expected to take up to this many times the
# time left before the cap (``BudgetPolicy.first_check``). The estimate is a model: timing
# requests read 0.6-2.5 times it (``CALL_OVERHEAD_MS``), final checks spent 2.8-39 times their
# first runs outside timing (``FIXED_PER_FIRST_RUN``). On four H100s (120 s a record, engine
# 1018ceeea5af, 2026-11-27) two bests went unchecked for a few seconds: chunk_cumsum_kernel's,
# 3x faster than the original on three of its four search cases ("about 44 s needed at the
# shortest, 39 s left before the 150 s cap"), and bmm_chunk_bwd's ("28 s needed, 27 s left").
# The record's cap still bounds its wall: a check it kills ends the record unimproved, as an
# unchecked best does.
FIRST_CHECK_STRETCH = 1.5
FIT_SLACK = 0.15             # a shortened final check aims this share of its estimate before the cap


def shortest_check_s(check_s: float, fixed_s: float) -> float:
    """A final check expected to take ``check_s`` on its full plan, on its shortest one
    (``BudgetPolicy.fit_plan``): ``fixed_s`` uncut, the timing cut to ``MIN_PLAN_FRACTION``."""
    return fixed_s + MIN_PLAN_FRACTION * max(check_s - fixed_s, 0.0)


@dataclass(frozen=True)
class Go:
    """A policy decision: ``go`` or not, and why not (a note for the record)."""
    go: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.go


class BudgetPolicy:
    """The record's time budget: the stop rule of the rounds and the bound of the final check.

    ``elapsed()`` is the record's busy seconds so far (wall less time queued for a GPU shared with
    other processes: the budget buys work, not waiting); ``budget_s`` None means no budget (every
    decision says go). The cap is ``overrun`` times the budget: rounds aim to end with the final
    check inside the budget, the checks after the first stop at the cap."""

    def __init__(self, budget_s: float | None, elapsed: Callable[[], float],
                 overrun: float = 1.25):
        self.budget_s, self.elapsed, self.overrun = budget_s, elapsed, overrun

    @property
    def cap_s(self) -> float | None:
        return None if self.budget_s is None else self.overrun * self.budget_s

    def left_s(self) -> float:
        """Seconds left before the cap (infinite without a budget)."""
        return float("inf") if self.cap_s is None else self.cap_s - self.elapsed()

    def start_round(self, round_: int, last_round_s: float, final_s: float,
                    fixed_s: float | None = None) -> Go:
        """Whether round ``round_`` starts: when ``ROUND_MIN_SHARE`` of the last round's cost
        (``last_round_s``) and the final check (``final_s``; on its shortest plan where its
        ``fixed_s`` is given, as ``first_check`` runs it) both fit the budget. Reserving the
        full plan stopped 5 of 16 records after round 1 with over 40 s of their 120 s left on
        four H100s (engine ec0277a5535e, 2026-11-27): logsumexp_fwd reserved 67 s at 62 s
        spent. The first final check shortens its timing to end by the cap. A later round
        does not need room for a whole round: it stops sending verification requests once the
        final check's room in the budget is gone (``room_in_budget``), and times only what
        leaves it room there (``timing_room_in_budget_s``). Asking room for a whole
        round left budget unused: on four H100s (120 s a record, 2026-11-26) 15 records ended
        after round 1 with "time budget spent" at 48-98 s of wall. The first round runs unless
        the fixed cost (baseline, profile) already took the whole budget: without a round that
        cost buys nothing."""
        if self.budget_s is None:
            return Go(True)
        elapsed = self.elapsed()
        if round_ <= 1:
            if elapsed > self.budget_s:
                return Go(False, f"no round started: {elapsed:.0f} s spent before the first, "
                                 f"past the {self.budget_s:.0f} s budget")
            return Go(True)
        least_s = ROUND_MIN_SHARE * last_round_s
        if fixed_s is not None:
            final_s = shortest_check_s(final_s, fixed_s)
        if elapsed + least_s + final_s > self.budget_s:
            return Go(False, f"round {round_} not started: {elapsed:.0f} s spent, a useful round "
                             f"needs about {least_s:.0f} s (the last took {last_round_s:.0f} s) "
                             f"and the final check about {final_s:.0f} s"
                             f"{' on its shortest plan' if fixed_s is not None else ''}, past the "
                             f"{self.budget_s:.0f} s budget")
        return Go(True)

    def budget_left_s(self) -> float:
        """Seconds left before the budget itself (infinite without one)."""
        return float("inf") if self.budget_s is None else self.budget_s - self.elapsed()

    def room_in_budget(self, final_s: float, fixed_s: float | None = None) -> bool:
        """Whether a round after the first may send another verification request: the final
        check (``final_s``; on its shortest plan where ``fixed_s`` is given, as in
        ``start_round``) still fits before the budget itself (round 1 works to the cap's
        room, ``room_for``: without one verified candidate the fixed cost bought nothing)."""
        if fixed_s is not None:
            final_s = shortest_check_s(final_s, fixed_s)
        return final_s <= self.budget_left_s()

    def timing_room_s(self, check_s: float, fixed_s: float) -> float:
        """Seconds a round's timing may take and still leave the first final check (``check_s``,
        ``fixed_s`` of it unshortened) room before the cap on its shortest plan (infinite
        without a budget)."""
        return self.left_s() - shortest_check_s(check_s, fixed_s)

    def timing_room_in_budget_s(self, check_s: float, fixed_s: float) -> float:
        """``timing_room_s`` before the budget rather than the cap: a round after the first times
        only what leaves the first final check room there (infinite without a budget)."""
        return self.budget_left_s() - shortest_check_s(check_s, fixed_s)

    def room_for(self, final_s: float) -> bool:
        """Whether more work may start now and still leave the final check (``final_s``) room
        before the cap: a round stops sending verification requests once it does not."""
        return final_s <= self.left_s()

    def profile_go(self) -> Go:
        """Whether the original is profiled: not where the time spent before the profile (the
        original's baseline, its compile pass above all) is past ``PROFILE_SKIP_SHARE`` of the
        budget. The profile is advice and costs 13-61 s; on four H100s (120 s a record, engine
        1018ceeea5af, 2026-11-27) the 21 of 110 records whose baseline took over 36 s all ended
        unimproved, 18 of them with at most two candidates verified (matmul_dequant_int4: a
        51 s baseline, a 61 s profile, no round started)."""
        if self.budget_s is None:
            return Go(True)
        elapsed = self.elapsed()
        if elapsed <= PROFILE_SKIP_SHARE * self.budget_s:
            return Go(True)
        return Go(False, f"not profiled: {elapsed:.0f} s of the {self.budget_s:.0f} s budget "
                         f"spent before the profile (over {PROFILE_SKIP_SHARE:.0%}); the "
                         "proposers work from the source alone")

    def profile_timeout_s(self, most_s: float = 120.0, least_s: float = 30.0) -> float:
        """How long Nsight Compute may take: ``most_s``, but no more than a quarter of the budget
        (never under ``least_s``: on the H100 a profile took about 22 s)."""
        if self.budget_s is None:
            return most_s
        return max(least_s, min(most_s, 0.25 * self.budget_s))

    def static_timeout_s(self, most_s: float = 120.0, least_s: float = 10.0) -> float:
        """How long the profile's static compile may take: an eighth of the budget (never under
        ``least_s``, never over ``most_s``). Its stats (registers, spills, shared memory) refine a
        diagnosis that Nsight Compute's metrics make without them, and it sits before round 1:
        at its 30 s bound, the bound of the ncu run, lightning_attention, attn_fwd_causal and
        parallel_attention spent 34-90 s compiling (H200 pass, engine c064071456aa, 2026-11-28,
        then with no bound that held), int8_quantization 14 s, the median record 5 s."""
        if self.budget_s is None:
            return most_s
        return max(least_s, min(most_s, 0.125 * self.budget_s))

    def first_check(self, check_s: float, fixed_s: float) -> Go:
        """Whether a final check may start: its shortest plan (``fit_plan`` cuts the timing,
        ``check_s - fixed_s``, to ``MIN_PLAN_FRACTION`` at most; ``fixed_s``, starting, running,
        verifying and autotuning, is not cut) expected to take at most ``FIRST_CHECK_STRETCH``
        times the time left before the cap. A check that would need more is not run: the record
        ends unimproved within its cap rather than accepted past it (on an H200, 2026-11-26, 120 s
        a record, an autotuned batched matmul started its final check at 138 s and ended at
        258 s, 2.2x the budget, for a 1.04x candidate). Within the stretch it runs, and the
        record's cap kills it where the estimate was short: the record then ends as it would
        have unchecked, a little later."""
        left = self.left_s()
        shortest = shortest_check_s(check_s, fixed_s)
        if shortest <= FIRST_CHECK_STRETCH * left:
            return Go(True)
        return Go(False, f"about {shortest:.0f} s needed at the shortest, {max(left, 0):.0f} s "
                         f"left before the {self.cap_s:.0f} s cap")

    def another_check(self, check_s: float) -> Go:
        """Whether a final check after the first (``check_s`` expected) still ends by the cap."""
        left = self.left_s()
        if check_s <= left:
            return Go(True)
        return Go(False, f"about {check_s:.0f} s needed, {max(left, 0):.0f} s left before the "
                         f"{self.cap_s:.0f} s cap: the best result already checked stands")

    def probe_budget_s(self, most_s: float, check_s: float) -> float:
        """Seconds a size dispatch's probes may take: ``most_s`` at most, and no more than what
        leaves its final check (``check_s``) room before the cap (0: skip the probes)."""
        return max(0.0, min(most_s, self.left_s() - check_s))

    def fit_plan(self, plan: TimingPlan, fixed_s: float, check_s: float) -> TimingPlan:
        """``plan`` (the final check's), shortened so that a check expected to take ``check_s``
        (``fixed_s`` of it not timing) ends by the cap: fewer rounds past the minimum and a
        smaller per-case budget, never under ``MIN_PLAN_FRACTION`` of them. Every case is still
        verified and timed; only the samples per case are fewer. It aims ``FIT_SLACK`` of the
        check's own estimate before the cap: on an H100 pass (120 s a record, engine
        a98c89303aa9, 2026-11-27) layer_norm_ops' final check, planned to end at 148 s of its
        150 s cap, was killed at the cap while timing its last cases, and the record's one
        accepted candidate was lost."""
        left = self.left_s() - FIT_SLACK * check_s
        timing_s = check_s - fixed_s
        if left >= check_s or timing_s <= 0:
            return plan
        fraction = max(MIN_PLAN_FRACTION, (left - fixed_s) / timing_s)
        if fraction >= 1.0:
            return plan
        rounds = max(plan.min_rounds, int(plan.rounds * fraction))
        case_ms = None if plan.case_budget_ms is None else plan.case_budget_ms * fraction
        return replace(plan, rounds=rounds, case_budget_ms=case_ms)
