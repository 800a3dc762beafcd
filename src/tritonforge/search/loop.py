"""The optimization loop: a pipeline of typed stages over one ``SearchState``.

Stages, cheap first and expensive last: the static setup (cases the interpreter can run), the
original's baseline (skipped with a known baseline) and its profile, then rounds (``search.rounds``:
propose -> prune -> verify in a cascade -> repair -> time -> arbitrate, each a function of the
state), then the fresh-process final check (``search.final_check``). One ``BudgetPolicy``
(``search.budget``) decides whether a round starts and bounds the final check; the near-the-roofline
rule (``search.roofline``) is judged on the cases that carry the time and still buys one round of
configuration search. Every stage boundary is reported to ``events`` (a ``ProgressSink``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..analyze import analyze_source
from ..config import Settings
from ..model import Candidate, Case, Decision, HardwareInfo, HistoryEntry, Task, VariantResult
from ..model.progress import ProgressEvent, ProgressSink
from ..runtime.autotune_picks import MAX_PICKS
from ..runtime.evaluator import Evaluator
from ..runtime.gpu_lock import gpu_blocked_s
from ..runtime.timing_plan import baseline_plan, final_check_plan, timing_plan
from ..runtime.worker_client import CUT_REASON
from ..store import RunStore
from .arbiter import ArbiterPolicy
from .branch import near_miss
from .budget import (
    AutotuneCost, BudgetPolicy, FinalCheckEstimate, final_fixed_s, first_runs_s, tuned_keys,
)
from .cascade import variant as _variant
from .cases import (  # noqa: F401 - re-exported: callers and tests import them from here
    INTERPRETER_MAX_CANDIDATES, INTERPRETER_MAX_ELEMENTS, INTERPRETER_MAX_ROUNDS,
    SLIVER_RETIMED, _kernels_a_sliver, _sliver_retimed, ahead_cases, baseline_without_crashes,
    interpreter_cases,
    largest_performance_case, profile_case,
    representative_cases, restrict_to_runnable, search_verification_cases, split_deferred,
    verification_tiers,
)
from .ahead import CompileAhead
from .final_check import FinalCheck
from .finalists import Sweep, finalists, sweep, sweep_plan
from .phases import PhaseClock, PhaseTime
from .proposer import Proposer
from .roofline import roofline_call
from .rounds import RoundEnv, counts, run_round
from .stages import RoundStages
from .state import SearchState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GeneratedCounts:
    """What generated cases (``testgen.augment``) did for one record: the cases added, those the
    original failed (dropped), the seconds making them took, and the mean seconds a candidate's
    verification request on them took (the cascade's generated tier; None: none ran there)."""
    added: int = 0
    dropped: int = 0
    seconds: float = 0.0
    verify_s_per_candidate: float | None = None


@dataclass(frozen=True)
class OptimizeResult:
    task: str
    original: Candidate
    best: Candidate
    final: Decision | None
    rounds: int
    stop_reason: str
    wall_s: float
    tried: int
    history: tuple[HistoryEntry, ...] = ()
    search_cases: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    blocked_s: float = 0.0     # of wall_s, waiting on other processes for a shared GPU
    phases: tuple[PhaseTime, ...] = ()   # wall_s split by phase (search.phases)
    verified: int = 0          # candidates that passed verification (and were timed)
    first_verified_s: float | None = None   # from the start to the first of them
    generated: "GeneratedCounts" = field(default_factory=lambda: GeneratedCounts())

    @property
    def improved(self) -> bool:
        return self.best.hash != self.original.hash and self.final is not None and self.final.accepted


GPU_PER_ROUND = 16          # candidates a round on a GPU, where most fail or pass in seconds
SPARE_SHARE = 0.5           # a search out of patience with more of its budget left, or with
                            # nothing accepted: an extra round (Optimizer._spare_time)
BANK_AT = 2.0               # with a budget, a round that leaves the incumbent this many times
# faster than the original on the search's cases ends the search, and the final check follows at
# once, with no finalists' sweep: on four H100s (engine 190e1f012654, 2026-11-27) add_example's
# BLOCK_SIZE 4 -> 1024 read 26x in round 1; a second round and a 29 s sweep of four finalists
# followed, and its final check was killed at the record's cap (the 1018ceeea5af pass lost the
# same win the same way, killed at the cap timing its perf-08)
BANKED = "a decisive win banked"
INTERPRETED_PER_ROUND = 6   # on the interpreter, where each candidate runs for tens of seconds


def auto_per_round(settings: Settings, interpreted: bool) -> int:
    """Candidates a round: ``settings.search.candidates_per_round``, or by device when 0.

    Six a round searched too little on the GPU: run once at 120 s a record on an H100
    (2026-11-25), seven TritonBench-G records each stopped after one round of six, three of them
    "candidates verified but not faster"; the config search took half of each round (three
    configs). The cascade (``search.cascade``) stops a failing candidate on its cheapest tier and
    the budget policy stops verification when the final check needs the time, so a wider round
    costs little when its candidates fail."""
    asked = settings.search.candidates_per_round
    if asked > 0:
        return asked
    return INTERPRETED_PER_ROUND if interpreted else GPU_PER_ROUND


class Optimizer:
    """Runs the search for one task; ``evaluators`` are the verification pool, the first also
    times. ``progress`` receives a ``ProgressEvent`` at each stage boundary, and each text note
    as an event's ``message`` (``model.progress``)."""

    def __init__(self, task: Task, settings: Settings, evaluators: list[Evaluator],
                 proposers: list[Proposer], store: RunStore | None,
                 progress: ProgressSink | None = None,
                 policy: ArbiterPolicy | None = None, candidates_per_round: int | None = None,
                 make_final_evaluator: Callable[[], Evaluator] | None = None,
                 known_baseline: VariantResult | None = None,
                 ahead_proposers: list[Proposer] | None = None,
                 late_cases: Callable[[], tuple[Case, ...]] | None = None):
        """``known_baseline``: the original's per-case times from a baseline sweep of the same
        task on this kind of GPU; the search's first step (timing the original on every case,
        96-101 s for dequantize_matmul and bmm_optimized on the H100, most of their budget) is
        then skipped. It only chooses cases and sizes the profile: every figure the run reports
        still comes from timing the original beside the candidate.

        ``ahead_proposers``: proposers of their own (not those of ``proposers``: a proposer may
        keep state between calls) whose candidates from the source alone compile on the spare
        workers of the pool while the original's baseline and profile run (``search.ahead``);
        None or a pool of one worker: nothing is compiled ahead.

        ``late_cases``: correctness cases being made while the original is measured (generated
        cases, made on the pool's last worker: ``compose``); calling it waits for them, and they
        join the task's verification as the cascade's generated tier. With a ``ready()``
        attribute that says False once the profile is done, round 1 starts without them on the
        other workers, and they join at the first round boundary where they are ready, or, at
        the latest, before the final check, which verifies the best on them like every case
        (``_join_late``). On an H200 (120 s a record, 2026-11-26) three records' round 1
        waited 5-24 s after the profile for cases still being validated."""
        self.task = task
        self.settings = settings
        self.evaluators = evaluators
        self.timer = evaluators[0]
        self.proposers = proposers
        self.store = store
        self.progress = progress
        self._event = ProgressEvent("baseline")
        self._budget_s: float | None = None
        self.policy = policy or ArbiterPolicy(max_case_regression=settings.search.max_case_regression)
        self.ahead_proposers = list(ahead_proposers or ())
        self.late_cases = late_cases
        self.make_final_evaluator = make_final_evaluator
        self.interpreted = self.timer.device == "cpu"
        self.known_baseline = None if self.interpreted else known_baseline
        per_round = candidates_per_round or auto_per_round(settings, self.interpreted)
        self.stages = RoundStages(task, settings, evaluators, proposers, store, self._say,
                                  per_round, self.interpreted)
        self.final_check = FinalCheck(settings, self.policy, self.timer, make_final_evaluator,
                                      store, self._say, self.interpreted)
        self._started = time.perf_counter()

    @property
    def profile(self):
        return self.stages.profile

    def _emit(self, phase: str | None = None, message: str = "", **fields) -> None:
        """Hand the progress sink where the run stands: ``phase`` (None: the current one), a
        text ``message``, and any other ``ProgressEvent`` field that changed (round, counts,
        best speedup); the fields not given keep their last values."""
        if getattr(self, "progress", None) is None:
            return
        elapsed = time.perf_counter() - self._started
        budget = getattr(self.final_check, "budget", None)
        busy = budget.elapsed() if budget is not None else elapsed
        left = None if self._budget_s is None else max(0.0, self._budget_s - busy)
        self._event = replace(self._event, phase=phase or self._event.phase, message=message,
                              elapsed_s=max(elapsed, self._event.elapsed_s), budget_left_s=left,
                              **fields)
        try:
            self.progress(self._event)
        except Exception as exc:  # noqa: BLE001 - a display's bug must not end the run
            log.warning("progress sink failed: %s", exc)

    def _say(self, text: str) -> None:
        """A stage's text note, as an event's message in the current phase."""
        self._emit(message=text)

    def _final_worker_started(self) -> None:
        """Wait for a final-check worker being started ahead of need (``PrestartedEvaluators``)
        to be up: its CUDA start must not overlap a timed call."""
        wait = getattr(self.make_final_evaluator, "wait", None)
        if callable(wait):
            wait()

    # ------------------------------------------------------------------ the pipeline
    @property
    def per_round(self) -> int:
        """Candidates verified per round: the stages' own count (capped on the interpreter)."""
        return self.stages.per_round

    def run(self, budget_s: float | None = None) -> OptimizeResult:
        start = self._started = time.perf_counter()
        blocked0 = gpu_blocked_s()
        self._budget_s = budget_s
        clock = PhaseClock()
        budget = BudgetPolicy(budget_s, lambda: time.perf_counter() - start - (gpu_blocked_s() - blocked0))
        self.final_check.budget = budget
        original = Candidate(self.task.source, "original")
        if self.store:
            self.store.put_task(self.task)
            self.store.put_candidate(self.task.name, original)
        task, notes = self.task, []
        max_rounds = self.settings.search.max_rounds
        if self.interpreted:
            task, notes = interpreter_cases(task)
            # accepting by correctness alone, more rounds only show the same loop again, slowly
            max_rounds = min(max_rounds, INTERPRETER_MAX_ROUNDS)
            self.stages.per_round = min(self.per_round, INTERPRETER_MAX_CANDIDATES)
            notes.append(f"CPU interpreter: at most {max_rounds} rounds of "
                         f"{self.per_round} candidates, accepted by correctness only")

        # every request of the record, the pool's and the final check's, is killed at the cap
        # (runtime.evaluator.Evaluator.time_left): a hung one cannot carry the record past it
        capped = budget.left_s if budget_s is not None else None
        for ev in self.evaluators:
            ev.time_left = capped
        ahead = self._compile_ahead(task, original)
        try:
            return self._pipeline(task, original, notes, max_rounds, clock, budget, ahead,
                                  start, blocked0)
        finally:
            if ahead is not None:
                ahead.stop(abandon=True)    # stopped already unless the record ended early
            for ev in self.evaluators:
                ev.time_left = None

    def _compile_ahead(self, task: Task, original: Candidate) -> CompileAhead | None:
        """Compiling ahead started on the pool's spare workers (None: no spare worker, no ahead
        proposer, or the CPU interpreter, where nothing compiles)."""
        # the pool's last worker makes the late cases meanwhile (compose): not a spare one
        late = getattr(self, "late_cases", None)
        spare = self.evaluators[1:-1] if late is not None else self.evaluators[1:]
        if not spare or not self.ahead_proposers or self.interpreted:
            return None
        ahead = CompileAhead(spare, task, original, self.ahead_proposers, self.per_round,
                             HardwareInfo(self.timer.device, False), ahead_cases(task))
        self._emit("compile", message="compiling likely first candidates ahead")
        ahead.start()
        return ahead

    def _pipeline(self, task: Task, original: Candidate, notes: list[str], max_rounds: int,
                  clock: PhaseClock, budget: BudgetPolicy, ahead: CompileAhead | None,
                  start: float, blocked0: float) -> OptimizeResult:
        """The stages after the static setup (see the module docstring)."""
        def early(stop: str, base_notes=None) -> OptimizeResult:
            self._emit("done", f"{task.name}: {stop}")
            return OptimizeResult(task.name, original, original, None, 0, stop,
                                  time.perf_counter() - start, 0,
                                  notes=tuple(notes if base_notes is None else base_notes),
                                  phases=clock.times())

        base, base_notes = self._baseline(task, original, clock, notes)
        if base.failure is not None and CUT_REASON in base.failure.reason:
            # cut at the record's cap (runtime.evaluator): out of time, not a failing original
            return early(f"time budget spent before the original's baseline ended: "
                         f"{base.failure.one_line()}", [])
        if base.failure is not None:
            return early(f"the original fails: {base.failure.one_line()}", [])
        task, dropped = restrict_to_runnable(task, base)
        notes += dropped
        if not task.cases:
            return early("no case left that the original runs: nothing to verify a candidate on")
        if not task.performance_cases and not self.interpreted:
            return early("the original runs on no performance case")
        search_ids = representative_cases(task, base)
        verify_ids = search_verification_cases(task, base)
        verify_ids += largest_performance_case(task, base, verify_ids)
        fixed_s = final_fixed_s(first_runs_s(base_notes))
        estimate = FinalCheckEstimate({t.case_id: t.median_ms for t in base.timings},
                                      timing_plan(self.settings), final_check_plan(self.settings),
                                      fixed_s=fixed_s)
        self.final_check.fixed_base_s = fixed_s
        perf_ids = lambda: tuple(c.id for c in state.task.performance_cases)  # noqa: E731
        cost = self._autotune_cost(original, base_notes)
        base_ids = {c.id for c in task.cases}
        new_cases = lambda: sum(c.id not in base_ids for c in state.task.cases)  # noqa: E731
        self.final_check.autotune_cost = cost
        self.final_check.new_cases = new_cases
        self.final_check.estimate_s = lambda cand: (
            estimate.seconds(perf_ids())
            + cost.seconds(cand.source, len(perf_ids()), new_cases())
            + cost.seconds(original.source, len(perf_ids()), new_cases()))
        if ahead is not None:
            first, last = _first_tier(task, verify_ids, base,
                                      generated_coming=self.late_cases is not None)
            ahead.verify_from(task, first, last, late=None if self.late_cases is None else
                              _late_tier(task, verify_ids, base, first, self.late_cases))
        hardware = self._hardware()
        prestart = getattr(self.make_final_evaluator, "prestart", None)
        if callable(prestart):
            prestart()      # the final check's fresh worker starts while nothing is timed
        self._emit("profile")
        with clock.phase("profile"):
            profiled = budget.profile_go()
            if profiled:
                diagnosis = self.stages._diagnose(original, profile_case(search_ids, base), notes,
                                                  base, hardware, budget.profile_timeout_s(),
                                                  budget.static_timeout_s())
            else:
                notes.append(profiled.reason)
                self.stages.profile = diagnosis = None
        self._late = self.late_cases
        waiting = self._late is not None and not _late_ready(self._late)
        if waiting:
            # the last worker is still making them: the rounds verify on the others meanwhile
            self.stages.evaluators = self.evaluators[:-1] or self.evaluators
            notes.append("generated cases still being made after the profile: the search starts "
                         "without them; they join once made, before the final check at the latest")
        state = SearchState(task, original, original, search_ids,
                            verification_tiers(task, verify_ids, base), diagnosis,
                            patience=self.settings.search.patience, notes=tuple(notes))
        if not waiting:
            state = self._join_late(state, base, clock, wait=True)
        state = self._stop_rules(state, base)
        verified_before: dict[str, float] = {}
        if ahead is not None:
            report = ahead.stop()
            state = state.noted(report.note())
            self._emit("compile", compiled=report.compiled, message=report.note())
            early = [t for t in split_deferred(state.task, state.verify_tiers)[0] if t]
            if early == list(report.tiers):   # what passed ahead passed all of round 1's tiers
                verified_before = {h: at - start for h, at in report.passed_at}
        # the final check the rounds leave room for: its shortest (``FinalCheck._shortest``)
        # plus, while a split config is pending, its size dispatch (``_dispatch_reserve``)
        self._reserve_s = 0.0
        shortest = lambda: _plus(self.final_check._shortest(  # noqa: E731
            original, original, len(perf_ids())), self._reserve_s)
        env = RoundEnv(self.stages, self.policy, clock, estimate, hardware,
                       self.final_check._split_worthy, self._emit, self.settings.search.min_speedup,
                       self.settings.search.patience, self._final_worker_started,
                       lambda: budget.room_for(shortest()[0]),
                       lambda: time.perf_counter() - start,
                       lambda: budget.budget_s is None or budget.elapsed() < budget.budget_s,
                       lambda: budget.timing_room_s(*shortest()),
                       in_budget=lambda: budget.room_in_budget(*shortest()),
                       timing_room_in_budget_s=lambda: budget.timing_room_in_budget_s(
                           *shortest()),
                       deferred_room=lambda: budget.timing_room_s(*shortest())
                       >= self.final_check._fixed_part(),
                       verified_before=verified_before)
        state, stop = self._rounds(state, env, budget, max_rounds, base)
        state = self._join_late(state, base, clock, wait=True)
        self._reserve_s = self._dispatch_reserve(state, len(perf_ids()))   # the last round's split
        self._emit("final-check", f"{state.task.name}: final check in a fresh process",
                   round=state.round, **counts(state))
        with clock.phase("final check"):
            notes = list(state.notes)
            self.final_check.sweep = Sweep() if stop == BANKED else self._sweep(
                state, original, estimate, lambda: budget.timing_room_in_budget_s(*shortest()))
            if self.final_check.sweep.decisions:
                notes.append(self.final_check.sweep.note())
            final, best_c = self.final_check._output(state.task, original, list(state.chain),
                                                     list(state.ranked), list(state.split),
                                                     state.factor, notes,
                                                     runners=list(state.runners))
        notes += [f"case {cid} dropped from the final check: the original fails there when run as "
                  "its own candidate in a fresh process" for cid in sorted(self.final_check.final_dropped)]
        best = {}
        if final is not None and final.accepted and final.speedup == final.speedup:
            best = {"best_speedup": final.speedup, "best_low": final.speedup_low}
        self._emit("done", f"{self.task.name}: {final.reason if final is not None else stop}",
                   round=state.round, **counts(state), **best)
        return OptimizeResult(self.task.name, original, best_c, final, state.round, stop,
                              time.perf_counter() - start, len(state.history), state.history,
                              state.search_ids, tuple(notes), gpu_blocked_s() - blocked0,
                              clock.times(), counts(state)["verified"], state.first_verified_s,
                              GeneratedCounts(verify_s_per_candidate=self.stages.generated_tier_s()))

    def _sweep(self, state: SearchState, original: Candidate, estimate: FinalCheckEstimate,
               room_s: Callable[[], float]) -> Sweep:
        """The finalists timed on every performance case (``search.finalists``), where the
        search did not time them all and ``room_s()`` (the timing the final check's shortest plan
        leaves room for before the budget: the cap's margin is the final check's, never the
        sweep's) holds the sweep's estimate; else an empty sweep. On two H200s (engine
        c9c7cb3af1db, 2026-11-28) attention_llama swept three finalists for 12 s from 130 s of its
        120 s budget, on the room before the cap, and its final check was cut at the cap. A
        single finalist is not swept: the sweep chooses which finalists the final check skips,
        and the check of the only one times it on every case anyway (on four H100s, engine
        7dffd2b9f369, kldiv_ops swept its one finalist for 17 s and left its final check 13 s:
        killed at the cap)."""
        perf = tuple(c.id for c in state.task.performance_cases)
        cands = finalists(list(state.chain), list(state.split), list(state.runners), original)
        if self.interpreted or len(cands) < 2 or set(perf) <= set(state.search_ids):
            return Sweep()
        plan = sweep_plan(timing_plan(self.settings))
        room = room_s()
        need = estimate.timing_s(perf, 1 + len(cands), plan)
        if need > room:
            log.info("%s: finalists not swept: about %.0f s needed, %.0f s of room", state.task.name,
                     need, room)
            return Sweep()
        self._emit("final-check", f"{state.task.name}: timing {len(cands)} finalist(s) on every "
                                  "performance case")
        return sweep(self.stages._time, state.task, original, cands, plan, self.policy,
                     end_within_s=room if room != float("inf") else None)

    def _join_late(self, state: SearchState, base: VariantResult, clock: PhaseClock,
                   wait: bool) -> SearchState:
        """The late cases joined to ``state``'s task and its verification tiers, once they are
        made (``wait``: waiting for them); the whole pool verifies again from then on. A state
        with nothing pending comes back as it is."""
        late_cases = getattr(self, "_late", None)
        if late_cases is None or (not wait and not _late_ready(late_cases)):
            return state
        self._late = None
        with clock.phase("cases"):
            have = {c.id for c in state.task.cases}
            late = tuple(c for c in late_cases() if c.id not in have)
        self.stages.evaluators = self.evaluators
        if not late:
            return state
        task = replace(state.task, cases=state.task.cases + late)
        ids = state.verify_ids + tuple(c.id for c in late)
        state = replace(state, task=task, verify_tiers=verification_tiers(task, ids, base))
        return state.noted(f"{len(late)} generated case(s) joined the verification after round "
                           f"{state.round}") if state.round else state

    def _baseline(self, task: Task, original: Candidate, clock: PhaseClock,
                  notes: list[str]) -> tuple[VariantResult, tuple[str, ...] | None]:
        """The original's per-case times and the run's notes (None: no run, the known
        baseline's times): the known baseline's, or one short run of it now
        (``runtime.timing_plan.baseline_plan``)."""
        if self.known_baseline is not None:
            notes.append("the original's case times come from the baseline sweep (not timed again)")
            return self.known_baseline, None
        self._emit("baseline", f"{task.name}: timing the original")
        runs = []

        def run(cases: Task):
            runs.append(self.timer.evaluate(cases, (_variant(original, "original"),),
                                            purpose="baseline", verify=False, time=True,
                                            keep_going=True, plan=baseline_plan(self.settings)))
            return runs[-1].results[0]

        with clock.phase("baseline"):
            result, retried = baseline_without_crashes(task, run(task), run)
        notes.extend(retried)
        return result, tuple(runs[-1].notes)

    @staticmethod
    def _autotune_cost(original: Candidate, run_notes: tuple[str, ...] | None) -> AutotuneCost:
        """What first-run autotuning costs a fresh process, from what the original's baseline
        run tuned (``search.budget.AutotuneCost``); every config on every case without a run."""
        if run_notes is None or "autotune" not in original.source:
            return AutotuneCost()
        try:
            autotuned = [k for k in analyze_source(original.source).kernels
                         if k.autotune is not None]
        except Exception:  # noqa: BLE001 - an odd file: the worst case
            return AutotuneCost()
        return AutotuneCost(tuned_keys(run_notes, MAX_PICKS),
                            {k.name: tuple(k.autotune.key) for k in autotuned})

    def _hardware(self) -> HardwareInfo:
        if self.timer.worker.info is None:
            self.timer.worker.start()      # no baseline run started it (a known baseline)
        info = self.timer.worker.info
        return HardwareInfo(info.name if info else self.timer.device, self.interpreted,
                            sm_count=info.sm_count if info else 0,
                            capability=getattr(info, "capability", "") if info else "")

    def _stop_rules(self, state: SearchState, base: VariantResult) -> SearchState:
        """The diagnosis' say on how long to search: near the roofline on the cases that carry
        the time (``search.roofline``), one round without gain ends it, and that round asks for
        a configuration search; where the kernels are a sliver of the case, the same (re-judged
        on round 1's own timing of the case: ``cases._sliver_retimed``)."""
        diagnosis = state.diagnosis
        if self.interpreted or diagnosis is None:
            return state
        if diagnosis.near_roofline:
            call = roofline_call(self.stages.profile, state.task, base, state.search_ids)
            if call.near or call.fraction is None and call.covered == 0.0:
                # no roofline to weigh (a diagnosis near another peak): it stands as it is
                return replace(state.noted(f"near the roofline ({call.note}): one round of "
                                           "configuration search, and one round without gain "
                                           "ends the search"), patience=1, config_search=True)
            return state.noted(f"the profiled case is near the roofline, the cases that carry the "
                               f"time are not judged so ({call.note}): the search goes on")
        if _kernels_a_sliver(diagnosis):
            return replace(state.noted("most of the time is outside the Triton kernels: one round "
                                       "without gain ends the search"), patience=1, sliver_cut=True)
        return state

    def _rounds(self, state: SearchState, env: RoundEnv, budget: BudgetPolicy,
                max_rounds: int, base: VariantResult | None = None) -> tuple[SearchState, str]:
        """Rounds until a stop rule or the budget says stop; (last state, stop reason). A search
        with nothing new to propose asks once for a configuration search, if time is left; one
        that would stop (nothing new, out of patience) with time to spare proposes from a near
        miss (``search.branch``).
        Late cases made by then join before each round (``base``: the original's baseline, which
        orders their tier)."""
        while state.round < max_rounds:
            if base is not None:
                state = self._join_late(state, base, env.clock, wait=False)
            check = getattr(self, "final_check", None)
            perf = len(state.task.performance_cases)
            if check is not None and check.estimate_s is not None:
                self._reserve_s = self._dispatch_reserve(state, perf)
                final_s, fixed_s = _plus(check._shortest(state.incumbent, state.original, perf),
                                         self._reserve_s)
            else:
                final_s = env.estimate.seconds(c.id for c in state.task.performance_cases)
                fixed_s = None
            go = budget.start_round(state.round + 1, state.last_round_s, final_s, fixed_s)
            if not go:
                return state.noted(go.reason), "time budget spent"
            outcome = run_round(state, env)
            state = outcome.state
            if outcome.stop is None and state.stale == 0 and state.factor >= BANK_AT \
                    and budget.budget_s is not None:
                return state.noted(
                    f"round {state.round}: the incumbent reads {state.factor:.2f}x on the "
                    f"search's cases at {budget.elapsed():.0f} s: banked, the final check "
                    "follows at once (no more rounds, no finalists' sweep)"), BANKED
            if outcome.stop == "no new candidates" and not state.config_search_done \
                    and not self.interpreted:
                state = replace(state.noted("nothing new proposed: one round of configuration "
                                            "search"), config_search=True)
                continue
            if outcome.stop == "no new candidates" and self._open_round_due(state, budget):
                state = replace(state.noted(
                    f"configuration search spent at {budget.elapsed():.0f} s of a "
                    f"{budget.budget_s:.0f} s budget, no other proposer asked yet: one round of "
                    "every proposer"), patience=state.stale + 1)
                continue
            if (outcome.stop or "").startswith("no gain") and self._time_to_spare(state, budget):
                state = replace(state.noted(
                    f"no gain for {state.stale} round(s) at {budget.elapsed():.0f} s of a "
                    f"{budget.budget_s:.0f} s budget: one more round of configuration search"),
                    config_search=True, spare_round=True, patience=state.stale + 1)
                continue
            if outcome.stop and self._branch_due(outcome.stop, state, budget):
                base = near_miss(state)
                if base is not None:
                    state = replace(state.noted(
                        f"{outcome.stop} at {budget.elapsed():.0f} s of a "
                        f"{budget.budget_s:.0f} s budget: one round from the near miss "
                        f"'{base.description or base.hash[:12]}'"),
                        branch=base, branched=state.branched + (base.hash,),
                        patience=state.stale + 1)
                    continue
            if outcome.stop:
                return state, outcome.stop
        return state, "max rounds reached"

    def _dispatch_reserve(self, state: SearchState, perf: int) -> float:
        """Seconds the rounds and the finalists' sweep leave the final phase beyond its first
        check: a size dispatch's (``FinalCheck.dispatch_reserve_s``) while a split config the
        final phase will try is pending, else 0."""
        check = self.final_check
        if not check.split_pending(list(state.split), state.factor):
            return 0.0
        return check.dispatch_reserve_s(state.incumbent, state.original, perf)

    def _spare_time(self, state: SearchState, budget: BudgetPolicy) -> bool:
        """Whether a search that would stop may run an extra round (a spare configuration round,
        a branch, the open round): on a GPU with a budget, with more than ``SPARE_SHARE`` of it
        left, or at any time while it has accepted nothing, nor left an accepted candidate to
        the final check (``RoundEnv.deferred_room``): it has nothing found to lose, and the
        round's own start, ``BudgetPolicy.start_round``, says whether the round and the final
        check fit. On two and four H200s (120 s a record, engine c064071456aa, 2026-11-28) 19 of
        87 records ended unimproved, "no gain" or "no new candidates", at 30-94 s of their
        budget, 13 of them past half of it and so with no extra round."""
        return not self.interpreted and budget.budget_s is not None \
            and (budget.elapsed() < SPARE_SHARE * budget.budget_s
                 or not (state.chain or state.runners))

    def _branch_due(self, stop: str, state: SearchState, budget: BudgetPolicy) -> bool:
        """Whether a search that would stop (nothing new, or out of patience) runs a round from
        a near miss instead (``search.branch``), where ``_spare_time`` allows. Any other stop
        (the budget, max rounds) stands."""
        return (stop == "no new candidates" or stop.startswith("no gain")) \
            and self._spare_time(state, budget)

    def _open_round_due(self, state: SearchState, budget: BudgetPolicy) -> bool:
        """Whether a search whose rounds were configuration search alone (near the roofline:
        ``_stop_rules``), now out of configurations, runs one round of every proposer: once,
        where ``_spare_time`` allows. The roofline is judged on the cases that carry most of
        the time; the rest may be launch-bound, where a rule's change (several rows a program, no
        zero fill) gains. On four H100s (120 s a record, engine 1018ceeea5af, 2026-11-27)
        rms_norm_triton ended "no new candidates" at 27 s, its four configurations tried, its
        rules never asked."""
        return state.config_search_done and not state.open_round_done \
            and self._spare_time(state, budget)

    def _time_to_spare(self, state: SearchState, budget: BudgetPolicy) -> bool:
        """Whether a search stopped for want of gain runs one more round of configuration search
        (once), where ``_spare_time`` allows. Near the roofline one round without gain ends a
        search; on an H100 pass (120 s a record, engine f421d501e87f, 2026-11-26) 15 such
        records ended under 80 s, rms_norm_triton at 28 s with 4 candidates tried, leaving the
        rest of their budget unused."""
        return not state.spare_round and self._spare_time(state, budget)


def _plus(check: tuple[float, float], extra_s: float) -> tuple[float, float]:
    """A shortest check's (expected seconds, the part no plan shortens) with ``extra_s`` more
    work after it that no plan shortens either."""
    return check[0] + extra_s, check[1] + extra_s


def _late_ready(late_cases: Callable[[], tuple[Case, ...]]) -> bool:
    """Whether calling ``late_cases`` returns at once: its ``ready()``, else True (a plain
    callable is waited for where the profile ends)."""
    ready = getattr(late_cases, "ready", None)
    return True if ready is None else bool(ready())


def make_evaluators(settings: Settings, run_dir: Path, store: RunStore | None, jobs: int,
                    device: str) -> list[Evaluator]:
    return [Evaluator(settings, run_dir / f"w{i}", store, device=device, respawn=True)
            for i in range(max(1, jobs))]


def _first_tier(task: Task, verify_ids: tuple[str, ...], base: VariantResult,
                generated_coming: bool) -> tuple[tuple[str, ...], bool]:
    """(round 1's first verification tier, whether it is the last of round 1's tiers: its
    ``second_pass``) as the baseline leaves them, for verifying ahead (``search.ahead``). Generated
    cases still being made join as a tier of their own before round 1 (``Optimizer._join_late``),
    so the first tier is then not the last."""
    early = [t for t in split_deferred(task, verification_tiers(task, verify_ids, base))[0] if t]
    if not early:
        return (), False
    return early[0], len(early) == 1 and not generated_coming


def _late_tier(task: Task, verify_ids: tuple[str, ...], base: VariantResult,
               first: tuple[str, ...], late_cases: Callable[[], tuple[Case, ...]]
               ) -> Callable[[], tuple[Task, tuple[str, ...]] | tuple[()] | None]:
    """For verifying ahead: once ``late_cases`` are made, (the task they join, round 1's second
    tier), exactly as ``Optimizer._join_late`` will make them where they are made before round
    1 (so that round 1's requests are those already answered); None before they are made;
    ``()`` where they would not make ``first`` and one tier of their own round 1's early tiers."""
    def late() -> tuple[Task, tuple[str, ...]] | tuple[()] | None:
        if not _late_ready(late_cases):
            return None
        have = {c.id for c in task.cases}
        made = tuple(c for c in late_cases() if c.id not in have)
        if not made:
            return ()
        joined = replace(task, cases=task.cases + made)
        ids = tuple(cid for tier in verification_tiers(task, verify_ids, base) for cid in tier) \
            + tuple(c.id for c in made)
        early = [t for t in split_deferred(joined, verification_tiers(joined, ids, base))[0] if t]
        return (joined, early[1]) if len(early) == 2 and early[0] == first else ()
    return late


from ..model.serialize import register as _register  # noqa: E402

_register(OptimizeResult)
_register(GeneratedCounts)
