"""One round of the search as a function of its state (search side).

``run_round(state, env)`` -> ``RoundOutcome``: propose from the incumbent (in a branch round, from
the near miss ``state.branch``: ``search.branch``), prune, verify in the
cascade (its last tier, performance cases alone, deferred: ``cases.split_deferred``), drop the
cases the original itself cannot run, time the verified ones beside the incumbent, arbitrate,
and verify the accepted ones on the deferred tier, best first, until one passes; then repair the
failed ones with the time left and judge the fixes the same way (first, where nothing verified);
the next ``SearchState`` (or a stop reason) comes back. Nothing of the
search's progress lives anywhere else, so a round can be tested with fake stages and evaluators.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

from ..model import (
    Candidate, Decision, HardwareInfo, HistoryEntry, ProposalContext, Status, VariantResult,
)
from ..runtime.gpu_lock import gpu_blocked_s
from .arbiter import ArbiterPolicy, judge
from .blame import blamed_cases, incumbent_timed_cases, judged_nothing
from .branch import branched_from
from .budget import FinalCheckEstimate
from .cases import _sliver_retimed, split_deferred
from .phases import PhaseClock
from .stages import RoundStages
from .state import SearchState


@dataclass(frozen=True)
class RoundOutcome:
    """The state after a round, and why the search stops there (None: it goes on)."""
    state: SearchState
    stop: str | None = None


@dataclass
class RoundEnv:
    """What a round uses besides its state: the stages, the arbiter, the clock of phases, the
    final-check estimate it teaches, the hardware, how a decision is split-worthy
    (``FinalCheck._split_worthy``), and where its events go."""
    stages: RoundStages
    policy: ArbiterPolicy
    clock: PhaseClock
    estimate: FinalCheckEstimate
    hardware: HardwareInfo
    split_worthy: Callable[[Decision], bool]
    emit: Callable[..., None]            # emit(phase, **ProgressEvent fields)
    min_speedup: float
    settings_patience: int
    final_worker_started: Callable[[], None] = lambda: None
    in_time: Callable[[], bool] = lambda: True   # more work still leaves the final check room
    elapsed: Callable[[], float] = lambda: 0.0   # seconds since the search started
    within_budget: Callable[[], bool] = lambda: True   # before the budget (not its cap) is spent
    timing_room_s: Callable[[], float] = lambda: float("inf")   # timing that leaves a final check
    in_budget: Callable[[], bool] = lambda: True   # more work leaves the final check room in the budget
    timing_room_in_budget_s: Callable[[], float] = lambda: float("inf")   # the same, before the budget
    # verifying an accepted candidate on the deferred tier still leaves the final check its room
    # before the cap (``search.loop``: the final check's fixed part, which verifies every case)
    deferred_room: Callable[[], bool] = lambda: True
    # candidate hash -> seconds since the search started at which it passed all of round 1's
    # verification before round 1 began (verified ahead, search.ahead)
    verified_before: Mapping[str, float] = field(default_factory=dict)


# a candidate with one of these never had a kernel compiled
_NOT_COMPILED = (Status.POLICY_REJECTED, Status.IMPORT_ERROR, Status.COMPILE_ERROR, Status.PRUNED,
                 Status.SKIPPED)


def counts(state: SearchState) -> dict[str, int]:
    """The run's cumulative candidate counts for a ``ProgressEvent``, from the history: those
    timed (they passed verification), those that failed it (pruned ones are not counted), and
    those whose kernels compiled (all but policy, import, compile failures, pruned, skipped)."""
    timed = sum(1 for h in state.history if h.status is Status.OK)
    failed = sum(1 for h in state.history if h.status not in (Status.OK, Status.PRUNED))
    compiled = sum(1 for h in state.history if h.status not in _NOT_COMPILED)
    return {"compiled": compiled, "verified": timed, "timed": timed, "failed": failed}


def _verify_while(env: RoundEnv, round_: int, search_ids: tuple[str, ...] = ()
                  ) -> Callable[[dict], bool]:
    """When a verification request may start: in round 1 while the final check keeps its room
    before the cap, and also until one candidate has passed (without one the record's baseline
    and profile bought nothing, and the final check has nothing to check), but never once the
    budget itself is spent: on an H100 pass at 120 s a record (2026-11-25), round 1 of three
    attention kernels whose candidates all failed went on verifying to 161-175 s (1.46x the
    budget). A later round, which starts with room for part of a round only
    (``BudgetPolicy.start_round``), while the final check keeps its room in the budget.

    Once a candidate has passed, a request starts only while timing those passed and one more
    beside the incumbent on ``search_ids`` (``FinalCheckEstimate.timing_s``) still fits that room:
    verified candidates that are never timed bought nothing. On an H100 pass (120 s a record,
    engine a98c89303aa9, 2026-11-27) attn_fwd_causal verified 14 candidates in round 1 to 147 s
    and timed none; attention_forward_triton left 8 verified untimed, layer_norm_ops 10."""
    def timing_fits(got: dict) -> bool:
        passed = sum(1 for r in got.values() if r.status is Status.OK)
        if not passed:
            return True
        room = env.timing_room_s() if round_ == 1 else env.timing_room_in_budget_s()
        return env.estimate.timing_s(search_ids, 2 + passed) <= room

    def in_time(got: dict) -> bool:
        if round_ > 1:
            return env.in_time() and env.in_budget() and timing_fits(got)
        if env.in_time() and timing_fits(got):
            return True
        return env.within_budget() \
            and not any(r.status is Status.OK for r in got.values())
    return in_time


CRASH_PAUSE_AFTER = 2    # candidates crashed blaming one case before the wave pauses for the twin
RETIME_WITHOUT_LOST = 3  # a round's timing sent again without the cases its incumbent failed first


class CrashPause:
    """A verification wave pauses once ``CRASH_PAUSE_AFTER`` candidates crashed blaming the same
    case whose twin verdict is not known yet (``RoundStages._cases_the_original_crashes``): the
    twin then says whether the ORIGINAL crashes there, and the paused candidates (SKIPPED, out of
    time) are verified on without it, or as they were. A crash kills the worker, and every
    candidate went on to crash on the original's case one by one: on an H100 (120 s a record,
    2026-11-26) softmax_reducev spent 77 s verifying 14 candidates, 15 crashes, before the twin
    dropped perf-00; fused_rotary_embedding's 10 all crashed. Pauses once a wave."""

    def __init__(self, known: dict[str, bool]):
        self.known = known
        self.case: str | None = None

    def __call__(self, got: dict[str, VariantResult]) -> bool:
        """True: send no more requests in this wave."""
        if self.case is not None:
            return True
        crashes: dict[str, int] = {}
        for r in got.values():
            f = r.failure
            if r.status in (Status.CRASH, Status.SKIPPED) and f is not None and f.case_id:
                crashes[f.case_id] = crashes.get(f.case_id, 0) + 1
        for case_id, n in crashes.items():
            if n >= CRASH_PAUSE_AFTER and case_id not in self.known:
                self.case = case_id
                return True
        return False

    def paused(self, cands: list[Candidate], verified: dict[str, VariantResult]) -> list[Candidate]:
        """The candidates the pause left unsent (SKIPPED naming no case)."""
        if self.case is None:
            return []
        return [c for c in cands if verified[c.hash].status is Status.SKIPPED
                and (verified[c.hash].failure is None or not verified[c.hash].failure.case_id)]


def _busy_s(since: float, blocked_since: float) -> float:
    """Seconds since ``since``, less those queued for a GPU other processes share."""
    return time.perf_counter() - since - (gpu_blocked_s() - blocked_since)


def run_round(state: SearchState, env: RoundEnv) -> RoundOutcome:
    """Round ``state.round + 1`` (see the module docstring)."""
    st, clock = env.stages, env.clock
    round_ = state.round + 1
    start, blocked0 = time.perf_counter(), gpu_blocked_s()
    history, notes = list(state.history), list(state.notes)
    base = state.branch or state.incumbent      # a branch round proposes from a near miss
    ctx = ProposalContext(state.task, base, round_, env.hardware,
                          history=tuple(history), budget=st.per_round,
                          diagnosis=state.diagnosis, profile=st.profile,
                          config_search_only=state.config_search,
                          branch=state.branch is not None)
    env.emit("propose", round=round_)
    with clock.phase("propose"):
        proposed = st._propose(ctx)
        if state.branch is not None:
            proposed = branched_from(state.branch, proposed,
                                     [state.original, state.incumbent, *state.chain])
        cands = st._prune(state.task, base, proposed, env.hardware, history, notes)
    state = replace(state, history=tuple(history), notes=tuple(notes),
                    config_search_done=state.config_search_done or state.config_search,
                    open_round_done=state.open_round_done or not state.config_search,
                    config_search=False, branch=None)
    if not cands:
        return RoundOutcome(state, "no new candidates")
    state = replace(state, round=round_)
    if st.store:
        for c in cands:
            st.store.put_candidate(state.task.name, c)
    in_time = _verify_while(env, round_, state.search_ids)
    pause = CrashPause(st.__dict__.setdefault("_twin_fails", {}))
    env.emit("verify", round=round_, message=f"{len(cands)} candidate(s)")
    early, _ = split_deferred(state.task, state.verify_tiers)
    with clock.phase("verify"):
        verified = st.verify(state.task, state.original, cands, early,
                             lambda got: not pause(got) and in_time(got))
        # the original's twin runs judge cases, not candidates: none once the budget is spent
        # (past it no candidate is verified again or timed)
        unsafe = st._cases_the_original_crashes(state.task, state.original, cands, verified,
                                                state.verify_ids) \
            if env.in_time() or env.within_budget() else set()
    if unsafe:
        state = state.without_cases(unsafe)
        notes += [f"case {cid} dropped: the original itself fails there (it crashes as the "
                  "reference, or run after itself as a candidate is it crashes or does not "
                  "reproduce its own result): it cannot judge a candidate" for cid in sorted(unsafe)]
        st.progress(f"{state.task.name}: {notes[-1]}")
        again = [c for c in cands if verified[c.hash].status in (Status.CRASH, Status.SKIPPED)
                 or blamed_cases(verified[c.hash]) & unsafe]
    else:
        again = pause.paused(cands, verified)    # the crashes were the candidates' own
    if pause.case is not None:
        notes.append(f"round {round_}: verification paused after {CRASH_PAUSE_AFTER} crashes on "
                     f"case {pause.case}, for the original's twin: "
                     + ("the original crashes there too" if pause.case in unsafe
                        else "the original runs it, the crashes are the candidates'"))
    if state.verify_ids and again:
        with clock.phase("verify"):
            verified.update(st.verify(state.task, state.original, again,
                                      split_deferred(state.task, state.verify_tiers)[0],
                                      in_time))
    good = [c for c in cands if verified[c.hash].status is Status.OK]
    for c in cands:
        r = verified[c.hash]
        if r.status is not Status.OK:
            reason = r.failure.one_line() if r.failure else (r.verdict.summary() if r.verdict else "")
            history.append(HistoryEntry(c.hash, c.origin, c.description, r.status, None, reason))
    state = replace(state, history=tuple(history), notes=tuple(notes), tried=state.tried + len(cands))
    repair_tiers = tuple(cid for tier in split_deferred(state.task, state.verify_tiers)[0]
                         for cid in tier)
    if good:
        if state.first_verified_s is None:
            # a candidate verified ahead, while the original was measured, passed then, not now
            ahead = [env.verified_before[c.hash] for c in good if c.hash in env.verified_before]
            state = replace(state, first_verified_s=round(min(ahead + [env.elapsed()]), 1))
        state = _time_and_judge(state, env, good, in_time)
        # then the repairs, with the time the timing left: the fixes of failed candidates are
        # a round's long shot, and timed first, the verified ones are judged by then
        state = _repair_and_judge(state, env, cands, verified, ctx, repair_tiers, in_time)
    else:
        state = _repair_and_judge(state, env, cands, verified, ctx, repair_tiers, in_time,
                                  first=True)
    state = replace(state, last_round_s=_busy_s(start, blocked0))
    if state.stale == 0:
        return RoundOutcome(state)
    st.progress(f"{state.task.name} round {round_}: no candidate accepted "
                f"({len(good)}/{len(cands)} verified)")
    if state.stale >= state.patience:
        return RoundOutcome(state, f"no gain for {state.stale} rounds")
    return RoundOutcome(state)


def _repair_and_judge(state: SearchState, env: RoundEnv, cands: list[Candidate],
                      verified: Mapping[str, VariantResult], ctx: ProposalContext,
                      case_ids: tuple[str, ...], in_time: Callable[[dict], bool],
                      first: bool = False) -> SearchState:
    """The round's failed candidates repaired (``RoundStages._repair_failed``, on the tiers every
    candidate of the round was verified on, while the round may still start work), and the
    fixes that verify timed and judged beside the incumbent. After the round's own timing where
    it had verified candidates; ``first`` where it had none (the fixes are then all there is to
    time, and a round without an accepted one counts towards patience once). A repair took 33 s
    of attention_llama's record before its verified candidates were timed (four H200s, engine
    b5d2db76c1e1, 2026-11-28); a fix verified on every case, the deferred tier's large ones
    too, took 38 s of it before (engine c064071456aa), and its 1.063x best then found 4 s left
    for its final check."""
    if not env.in_time():
        return state if not first else replace(state, stale=state.stale + 1)
    round_, history = state.round, list(state.history)
    env.emit("repair", round=round_, **counts(state))
    with env.clock.phase("repair"):
        fixed = env.stages._repair_failed(state.task, state.original, cands, dict(verified),
                                          case_ids, ctx, history, env.in_time)
    state = replace(state, history=tuple(history))
    if not fixed:
        return state if not first else replace(state, stale=state.stale + 1)
    if first and state.first_verified_s is None:
        state = replace(state, first_verified_s=round(env.elapsed(), 1))
    if not env.in_time():      # the repairs took the time: the fixes stay untimed
        return state if not first else replace(state, stale=state.stale + 1)
    stale, incumbent = state.stale, state.incumbent
    state = _time_and_judge(state, env, fixed, in_time)
    if not first and state.incumbent is incumbent:
        state = replace(state, stale=stale)   # the round's own timing counted it already
    return state


def _timing_room(env: RoundEnv, round_: int) -> float:
    """Seconds a round's timing may take and leave the first final check its room: before the
    cap in round 1, before the budget after it (infinite without a budget)."""
    room = env.timing_room_s()
    if round_ > 1:
        room = min(room, env.timing_room_in_budget_s())
    return room


def _fit_timing(good: list[Candidate], env: RoundEnv, search_ids: tuple[str, ...],
                round_: int = 1) -> tuple[list[Candidate], list[Candidate]]:
    """(those timed, those left untimed): the longest prefix of ``good`` (in proposal order,
    the cost model's best first) whose timing leaves the first final check room before the cap
    on its shortest plan; at least one. Round 1 verifies until one candidate passes, so it can
    end near the budget with many verified: on an H100 (120 s a record, 2026-11-26) attn_fwd_causal
    timed 21 after round 1 and reached the 150 s cap with no room left for its final check. A
    later round, which starts with room for part of a round (``BudgetPolicy.start_round``),
    leaves that room before the budget itself: the cap stays the bound of the final check."""
    room = _timing_room(env, round_)
    if room == float("inf") or len(good) <= 1:
        return good, []
    k = len(good)
    while k > 1 and env.estimate.timing_s(search_ids, 1 + k) > room:
        k -= 1
    return good[:k], good[k:]


def _timed_again_without(state: SearchState, env: RoundEnv, good: list[Candidate],
                         search_ids: tuple[str, ...], lost: set[str], timing, inc, notes: list[str]):
    """The round's timing once more, on the search cases the incumbent did not fail, where it
    failed while timed before any case was timed (a crash breaks the worker's context, and no
    variant is timed after it) and the room allows: else every candidate verified this round
    is judged on nothing. On an H100 pass (120 s a record, engine 1018ceeea5af, 2026-11-27)
    attention_kernel's original hit an illegal memory access on perf-15, the first of its search
    cases, and all 12 candidates of round 1 ended "no timings to compare". Up to
    ``RETIME_WITHOUT_LOST`` times while the incumbent keeps failing first: token_softmax_llama's
    original (out-of-bounds reads in the perf script's layout) failed on perf-07 and, timed
    again, on perf-08 (H200 pass, engine c064071456aa, 2026-11-28), and its 10 verified
    candidates were judged on nothing.
    Returns (timing, incumbent's result, judged cases, lost cases)."""
    judged: tuple[str, ...] = ()
    for _ in range(RETIME_WITHOUT_LOST):
        rest = tuple(i for i in search_ids if i not in lost)
        room = _timing_room(env, state.round)
        if not rest or room != float("inf") and env.estimate.timing_s(rest, 1 + len(good)) > room:
            break
        notes.append(f"round {state.round}: timed again without case(s) {', '.join(sorted(lost))}, "
                     "where the incumbent failed before anything was timed")
        env.stages.progress(f"{state.task.name}: {notes[-1]}")
        timed_at, timed_blocked = time.perf_counter(), gpu_blocked_s()
        timing = env.stages._time(state.task, state.incumbent, good, rest,
                                  end_within_s=None if room == float("inf") else room)
        env.estimate.observe(_busy_s(timed_at, timed_blocked), 1 + len(good), rest)
        inc = timing.result("incumbent")
        judged, more = incumbent_timed_cases(inc, rest)
        lost = lost | more
        if judged or not more:
            break
    return timing, inc, judged, lost


def _time_and_judge(state: SearchState, env: RoundEnv, good: list[Candidate],
                    in_time: Callable[[dict], bool] = lambda got: True) -> SearchState:
    """Time ``good`` beside the incumbent on the search cases and let the arbiter choose; the
    accepted ones, best first, are verified on the deferred tier (``cases.split_deferred``)
    until one passes: the new incumbent. One that fails there is recorded as that failure.

    Not where that verification would leave the final check no room before the cap
    (``RoundEnv.deferred_room``): the best accepted becomes the incumbent on its earlier tiers,
    the others runners-up as usual, and the final check verifies them on every case. On two H200s (engine c9c7cb3af1db, 120 s a record, 2026-11-28)
    fast_ce_loss accepted a 1.40x candidate at 110 s; its deferred tier (perf-00 and perf-13,
    8 GiB of logits) took 30 s, 25 s of it the fresh-seed recheck of perf-13, and the final
    check, about 32 s, then had 7 s left."""
    st, round_ = env.stages, state.round
    notes, history = list(state.notes), list(state.history)
    good, untimed = _fit_timing(good, env, state.search_ids, round_)
    if untimed:
        notes.append(f"round {round_}: {len(untimed)} verified candidate(s) not timed: timing "
                     "them would leave the final check no room before the "
                     + ("cap" if round_ == 1 else "budget"))
    env.emit("time", round=round_, message=f"{len(good)} verified", **counts(state))
    with env.clock.phase("time"):
        env.final_worker_started()
        timed_at, timed_blocked = time.perf_counter(), gpu_blocked_s()
        # the estimate chose how many to time; the request itself ends within the room on
        # fewer samples where the estimate fell short (runtime.worker_evaluate.case_plan)
        room = _timing_room(env, round_)
        timing = st._time(state.task, state.incumbent, good, state.search_ids,
                          end_within_s=None if room == float("inf") else room)
        env.estimate.observe(_busy_s(timed_at, timed_blocked), 1 + len(good), state.search_ids)
    inc = timing.result("incumbent")
    patience, sliver_cut, search_ids = state.patience, state.sliver_cut, state.search_ids
    retimed = _sliver_retimed(st.profile, inc) if sliver_cut else None
    if retimed:
        patience, sliver_cut = env.settings_patience, False
        notes.append(retimed)
        st.progress(f"{state.task.name}: {retimed}")
    judged_ids, lost = incumbent_timed_cases(inc, search_ids)
    if lost and not judged_ids:
        timing, inc, judged_ids, lost = _timed_again_without(state, env, good, search_ids, lost,
                                                             timing, inc, notes)
    if lost:
        search_ids = tuple(i for i in search_ids if i not in lost) or search_ids
        notes.append(f"case(s) {', '.join(sorted(lost))} left out of the search's timing: the "
                     "incumbent failed there while timed (the final check still runs every case)")
        st.progress(f"{state.task.name}: {notes[-1]}")
    ranked, split, runners = list(state.ranked), list(state.split), list(state.runners)
    clean: list[tuple[float, Decision, Candidate]] = []
    best: tuple[Decision, Candidate] | None = None
    factor = state.factor
    for i, c in enumerate(good):
        decision = judge(inc, timing.result(f"c{i}"), judged_ids, interpreted=st.interpreted,
                         policy=env.policy)
        if st.store:
            st.store.put_decision(state.task.name, round_, decision)
        history.append(HistoryEntry(c.hash, c.origin, c.description, Status.OK,
                                    decision.speedup, decision.reason))
        est = factor * decision.speedup if decision.speedup == decision.speedup else 0.0
        if decision.accepted or est > 0:
            ranked.append((est if not st.interpreted else 1.0, -len(ranked), c))
        if env.split_worthy(decision):
            split.append((est, -len(split), c))
        if decision.accepted:
            clean.append((est, decision, c))
        if decision.accepted and (best is None or st.interpreted is False
                                  and decision.speedup > best[0].speedup):
            best = (decision, c)
    _, late = split_deferred(state.task, state.verify_tiers)
    unchecked: set[str] = set()
    if late and best is not None and not env.deferred_room():
        # the final check verifies every case in a fresh process: checked first, the deferred
        # tier would leave it no room, for an incumbent no later round has time to build on
        notes.append(f"round {round_}: {best[1].description or best[1].hash[:12]} accepted on "
                     f"its earlier tiers; the performance cases checked once accepted "
                     f"({', '.join(late)}) are left to the final check, which verifies every "
                     "case: checked first, they would leave it no room before the cap")
        st.progress(f"{state.task.name}: {notes[-1]}")
    elif late and best is not None:
        best, failed, unchecked, unsafe = _verify_deferred(state, env, clean, late, in_time,
                                                           history)
        if unsafe:
            state = state.without_cases(unsafe)
            search_ids = tuple(i for i in search_ids if i not in unsafe) or search_ids
            notes += [f"case {cid} dropped: the original itself fails there (run after itself as "
                      "a candidate it crashes or does not reproduce its own result): it cannot "
                      "judge a candidate" for cid in sorted(unsafe)]
        if failed:
            gone = lambda c: c.hash in failed  # noqa: E731
            ranked = [x for x in ranked if not gone(x[2])]
            split = [x for x in split if not gone(x[2])]
            clean = [x for x in clean if not gone(x[2])]
    runners += [(est, -len(runners) - i, c) for i, (est, d, c) in enumerate(clean)
                if best is not None and c is not best[1] and d.speedup_low >= env.min_speedup]
    # accepted but left unchecked on the deferred tier by the budget: the final check's
    # runners-up, which it verifies on every case
    runners += [(est, -len(runners) - i, c) for i, (est, d, c) in enumerate(clean)
                if best is None and c.hash in unchecked and d.speedup_low >= env.min_speedup]
    state = replace(state, notes=tuple(notes), history=tuple(history), ranked=tuple(ranked),
                    split=tuple(split), runners=tuple(runners), patience=patience,
                    sliver_cut=sliver_cut, search_ids=search_ids)
    if best is None:
        return replace(state, stale=state.stale + 1)
    if best[0].speedup == best[0].speedup:
        factor *= best[0].speedup
    d = best[0]
    measured = not st.interpreted and d.speedup == d.speedup and d.speedup_low == d.speedup_low
    env.emit("time", round=round_, **counts(state),
             best_speedup=factor if measured else None,
             best_low=factor / d.speedup * d.speedup_low if measured else None,
             message=f"{state.task.name} round {round_}: accepted {best[1].description} "
                     f"({d.reason})")
    return replace(state, incumbent=best[1], chain=state.chain + (best[1],), factor=factor, stale=0)



def _verify_deferred(state: SearchState, env: RoundEnv,
                     clean: list[tuple[float, Decision, Candidate]], late: tuple[str, ...],
                     in_time: Callable[[dict], bool], history: list[HistoryEntry]
                     ) -> tuple[tuple[Decision, Candidate] | None, set[str], set[str], set[str]]:
    """(the best accepted candidate that passes the deferred tier, or None; the hashes of
    those that failed it; of those the budget left unchecked there; the cases found unsafe).
    Tried best first (proposal order on the interpreter). A failure first asks, as the round's
    own verification does, whether the original itself fails the cases it blames
    (``RoundStages._cases_the_original_crashes``): those cases leave the tier, and the
    candidate is verified again on the rest (attention_kernel_aligned's perf-16, H100: an illegal
    memory access of the original's own). A failure that stands replaces its history entry; one
    left unchecked stays ranked for the final check (which verifies every case) but is not the
    incumbent."""
    st = env.stages
    order = list(clean) if st.interpreted else sorted(
        clean, key=lambda x: -(x[1].speedup if x[1].speedup == x[1].speedup else 0.0))
    failed: set[str] = set()
    unchecked: set[str] = set()
    unsafe: set[str] = set()
    with env.clock.phase("verify"):
        for _, decision, c in order:
            got = st.verify(state.task, state.original, [c], (late,), in_time,
                            fresh=False).get(c.hash)
            found = set() if got is None or got.status in (Status.OK, Status.SKIPPED) else \
                st._cases_the_original_crashes(state.task, state.original, [c], {c.hash: got},
                                               late)
            if found:
                unsafe |= found
                late = tuple(cid for cid in late if cid not in unsafe)
                got = st.verify(state.task, state.original, [c], (late,), in_time,
                                fresh=False).get(c.hash) \
                    if late else VariantResult("candidate", c.hash, Status.OK)
            if got is not None and (got.status is Status.OK or judged_nothing(got)):
                if got.status is not Status.OK:
                    st.progress(f"{state.task.name}: {c.description}: the performance cases "
                                f"checked once accepted ({', '.join(late)}) define no result of "
                                "the original's (it reads outside its arguments): its earlier "
                                "tiers stand")
                return (decision, c), failed, unchecked, unsafe
            if got is None or got.status is Status.SKIPPED:
                unchecked.add(c.hash)
                continue
            failed.add(c.hash)
            why = got.failure.one_line() if got.failure else (
                got.verdict.summary() if got.verdict else got.status.value)
            entry = HistoryEntry(c.hash, c.origin, c.description, got.status, None,
                                 f"timed {decision.speedup:.3f}x, then failed the performance "
                                 f"cases checked once accepted ({', '.join(late)}): {why}")
            history[:] = [entry if h.candidate == c.hash and h.status is Status.OK else h
                          for h in history]
            st.progress(f"{state.task.name}: {c.description}: {entry.reason}")
    return None, failed, unchecked, unsafe
