"""The final check: what a run writes once its rounds are over (search side).

The final check (a fresh process, every case) of the accepted chain's best, then of earlier ones;
with ``emit = "auto"``, a config the final check found faster overall but slower on some size is
joined with the original by a Python size test at the launch (``search.dispatch``), else offered as
an ``@triton.autotune`` over it and the original (``search.emit``); with ``emit = "autotune"``,
the autotune over the best few. ``FinalCheck`` is an object of its own, composed by
``loop.Optimizer``: it holds the timing worker, the factory of fresh workers, the settings, the
arbiter's policy, the store and the record's ``BudgetPolicy``.

Bounded by the budget: every check runs on the final-check plan shortened to end by the record's
cap (``BudgetPolicy.fit_plan``: fewer samples per case, every case still verified and timed);
the first check runs only if even its shortest plan ends by the cap (``BudgetPolicy.first_check``);
a check after the first (a fallback along the chain, a runner-up, a size dispatch, an autotune
output) runs only if its estimate (an autotuned file's first-run tuning included) fits before the
cap, and the size probes only in the time that leaves; otherwise the best result already checked
stands.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Callable

from ..config import Settings
from ..model import Candidate, Decision, Status, Task, Variant, VariantResult
from ..runtime.evaluator import Evaluator
from ..runtime.timing_plan import final_check_plan
from ..store import RunStore
from .arbiter import ArbiterPolicy, judge
from .blame import TWIN_RUNS_WHERE_IT_VARIES, final_suspects, original_varies, twin_blamed
from .budget import (
    AUTOTUNE_CONFIG_S, AUTOTUNE_SHORT_CONFIG_S, FINAL_FIXED_S, FIT_SLACK, AutotuneCost, BudgetPolicy,
    shortest_check_s,
)
from .cases import without_cases
from .emit import autotune_candidate
from .final_dispatch import size_dispatch_check
from .finalists import Sweep
from .prune import task_element_bytes

log = logging.getLogger(__name__)

MAX_FINAL_NARROWINGS = 2   # final checks run again without cases the original fails alone
MAX_TWIN_RUNS = 6          # runs of the original as its own candidate per narrowing
OOM_RETRIES = 1            # final checks run again after an out-of-memory failure
MAX_RUNNERS_UP = 2          # fresh-process checks of round losers when every winner failed its own
# A measured final check rescales the estimate of later ones by at most this factor either way
# (``FinalCheck._expected_s``), and counts a fresh worker's start, which the first check's
# prestarted worker did not wait for.
CALIBRATION_BOUNDS = (0.5, 2.0)
FRESH_START_S = 10.0
# A size dispatch's probes: each performance case run once, untimed, in the search's worker. On
# four H100s (engine 20710a76802c, 2026-11-28) dequantize_rowwise's took 0.12-0.16 s a case.
PROBE_CASE_S = 0.3


def _kind(origin: str) -> str:
    """A candidate's family: the first word of the transform that made it (``rules:autotune_widen``
    and ``rules:autotune_blocks`` are both autotune changes; ``llm:...`` the model's)."""
    proposer, _, transform = origin.partition(":")
    return f"{proposer}:{transform.split('_')[0]}"


def _variant(c: Candidate, name: str) -> Variant:
    return Variant(name, c.source, c.hash)


class FinalCheck:
    """The final check and the output it decides (see the module docstring). ``estimate_s``:
    the expected seconds of one final check of a candidate (``search.budget``); ``budget``:
    the record's policy (None: unbounded)."""

    # first-run autotuning, from what the original's baseline tuned, and the cases the baseline did
    # not have (generated ones that joined later): both set by the loop once the baseline ran
    autotune_cost: AutotuneCost = AutotuneCost()
    new_cases: Callable[[], int] = staticmethod(lambda: 0)
    # the finalists timed on every performance case before the checks (``search.finalists``),
    # set by the loop: a finalist it found far slower on some case is not checked
    sweep: Sweep = Sweep()
    # the (task, candidate) pairs whose size dispatch was tried (``_dispatched``: once each)
    dispatch_tried: frozenset[tuple[str, str]] = frozenset()

    def __init__(self, settings: Settings, policy: ArbiterPolicy, timer: Evaluator,
                 make_final_evaluator: Callable[[], Evaluator] | None, store: RunStore | None,
                 progress: Callable[[str], None], interpreted: bool,
                 budget: BudgetPolicy | None = None,
                 estimate_s: Callable[[Candidate], float] | None = None):
        self.settings, self.policy, self.timer = settings, policy, timer
        self.make_final_evaluator, self.store, self.progress = make_final_evaluator, store, progress
        self.interpreted = interpreted
        self.budget, self.estimate_s = budget, estimate_s
        self.final_dropped: set[str] = set()   # cases the original fails alone
        self.checks = 0                        # final checks run (each narrowing counts once)
        self.fixed_base_s = FINAL_FIXED_S      # outside timing (the loop sets the record's own)

    def _expected_s(self, cand: Candidate) -> float:
        """Seconds a final check of ``cand`` is expected to take: the model (``estimate_s``),
        rescaled by what an earlier check of this record took on its full plan. The model
        counts every autotune config once per performance case; chunk_cumsum_kernel
        (``key=[]``: tuned once) ran its first check in 23 s (H100, 2026-11-26), and the model's
        larger figure refused every runner-up with 57 s of the record left."""
        static = self._model_s(cand)
        ratio = getattr(self, "calibration", None)
        if ratio is None:
            return static
        low, high = CALIBRATION_BOUNDS
        return static * min(high, max(low, ratio))

    def _model_s(self, cand: Candidate) -> float:
        """The model's seconds for a check of ``cand`` (``estimate_s``), before any rescaling."""
        estimate = getattr(self, "estimate_s", None)
        return estimate(cand) if estimate is not None else self._fixed_part()

    def _now(self) -> float:
        """The record's clock (the budget's), which the cap is reckoned on."""
        budget = getattr(self, "budget", None)
        return budget.elapsed() if budget is not None else time.perf_counter()

    def _observe(self, cand: Candidate, plan, wall_s: float) -> None:
        """Learn from a final check of ``cand`` that took ``wall_s``: only one on the full plan
        (a shortened plan says too little of a full one)."""
        if plan is None or plan != final_check_plan(self.settings):
            return
        static = self._model_s(cand)
        if static > 0:
            # a later check's worker is started ahead too where they start quietly
            # (runtime.evaluator.PrestartedEvaluators.starts_ahead): no start to count
            ahead = getattr(getattr(self, "make_final_evaluator", None), "starts_ahead", False)
            self.calibration = (wall_s + (0.0 if ahead is True else FRESH_START_S)) / static

    def _fixed_part(self) -> float:
        """The check's seconds outside timing and first-run autotuning: the record's own
        (``search.budget.final_fixed_s``, set by the loop from the baseline), else the default."""
        return getattr(self, "fixed_base_s", FINAL_FIXED_S)   # a test double may lack it

    def _budget_refuses(self, cand: Candidate, original: Candidate, perf: int) -> str | None:
        """Why a check of ``cand`` would not end by the cap (None: it fits): every check on its
        shortest plan (``BudgetPolicy.first_check``), as ``_plan`` fits it and the worker ends
        its timing by the cap on fewer samples where it must (``EvaluateRequest.end_by``). A
        later check asked room for its full plan: on an H100 pass (120 s a record, engine
        1018ceeea5af, 2026-11-27) dequantize_rowwise's chain's best passed at 1.33x with 26 s
        left, and its split config (4.4x in the search, one size slower) was never checked,
        where an earlier pass had shipped its size dispatch at 3.37x. A later check that the cap
        cuts loses nothing: the best result already checked stands."""
        budget = getattr(self, "budget", None)
        if budget is None:
            return None
        go = budget.first_check(*self._shortest(cand, original, perf))
        return None if go else go.reason

    def _fixed_s(self, cand: Candidate, original: Candidate, perf: int) -> float:
        """The part of a final check no timing plan shortens: the fixed cost and both files'
        first-run autotuning over ``perf`` performance cases with Triton's own benchmark
        (``autotune_cost``, set by the loop from what the original's baseline tuned; every
        config on every case without it)."""
        return self._fixed_part() + self._autotune_s(cand, original, perf)

    def _autotune_s(self, cand: Candidate, original: Candidate, perf: int,
                    config_s: float = AUTOTUNE_CONFIG_S) -> float:
        """Both files' first-run autotuning in a check over ``perf`` performance cases, each
        config's benchmark on each key taking ``config_s`` (default: Triton's own)."""
        new = self.new_cases()
        return (self.autotune_cost.seconds(cand.source, perf, new, config_s)
                + self.autotune_cost.seconds(original.source, perf, new, config_s))

    def _short_rep_ms(self) -> float | None:
        """The short autotune benchmark's repetitions (the search's: ``runtime.quick_autotune``),
        None where the settings time the search with Triton's own benchmark."""
        timing = getattr(self.settings, "timing", None)     # a test double may lack it
        return getattr(timing, "search_autotune_rep_ms", None) or None

    def _short_saving_s(self, cand: Candidate, original: Candidate, perf: int) -> float:
        """Seconds a check of ``cand`` saves by autotuning on the short benchmark (0 where
        neither file autotunes or there is no short benchmark)."""
        if self._short_rep_ms() is None:
            return 0.0
        return max(0.0, self._autotune_s(cand, original, perf)
                   - self._autotune_s(cand, original, perf, AUTOTUNE_SHORT_CONFIG_S))

    def _shortest(self, cand: Candidate, original: Candidate, perf: int) -> tuple[float, float]:
        """(expected seconds, the part no timing plan shortens) of the shortest check of
        ``cand`` that ``_plan`` may run: autotuning on the short benchmark where it saves time.
        The rounds reserve room for it and the first check starts on it
        (``BudgetPolicy.first_check``); ``BudgetPolicy.shortest_check_s`` then cuts its timing."""
        saving = self._short_saving_s(cand, original, perf)
        return (self._expected_s(cand) - saving,
                self._fixed_s(cand, original, perf) - saving)

    def _plan(self, task: Task, original: Candidate, cand: Candidate):
        """The final-check plan, shortened to end by the cap (``BudgetPolicy.fit_plan``); the
        fixed part, which no timing plan shortens, includes both files' first-run autotuning.

        Autotuning uses Triton's own benchmark (25 ms of warm-up and 100 ms of repetitions per
        config and key), as the user's process does, wherever the check fits before the cap with
        it on its shortest timing; where it does not, the search's short benchmark
        (``TimingPlan.autotune_rep_ms``, the same for both files), and the decision says so
        (``_final_once``). With Triton's own benchmark alone, the final checks of
        rowwise_quantization_triton (12 configs on 18 keys), swiglu_fwd and reversed_cumsum
        were expected to take 155, 87 and 107 s: on four H100s (120 s a record, engine
        1018ceeea5af, 2026-11-27) their searches stopped at 48-59 s, each with verified
        candidates never timed for want of room before the cap."""
        plan = final_check_plan(self.settings)
        budget = getattr(self, "budget", None)
        if budget is None or plan is None:
            return plan
        perf = len(task.performance_cases)
        check, fixed = self._expected_s(cand), self._fixed_s(cand, original, perf)
        saving = self._short_saving_s(cand, original, perf)
        if saving > 0 and shortest_check_s(check, fixed) > budget.left_s() - FIT_SLACK * check:
            plan = replace(plan, autotune_rep_ms=self._short_rep_ms())
            check, fixed = check - saving, fixed - saving
        return budget.fit_plan(plan, fixed, check)

    def _output(self, task: Task, original: Candidate, chain: list[Candidate], ranked: list,
                split: list, factor: float, notes: list[str], runners: list = ()
                ) -> tuple[Decision | None, Candidate]:
        """What the run writes: the final check (a fresh process, every case) of the accepted
        chain's best, then of earlier ones; or, with emit auto, a size dispatch or an autotune
        where a config is faster overall but slower on some size; or the autotune asked for;
        and when none of those holds up, the runners-up (``_runners_up``). Returns the deciding
        final check (None when nothing was checked) and the output."""
        final, best_c = self._output_chain(task, original, chain, ranked, split, factor, notes)
        if best_c is original and runners:
            final, best_c = self._runners_up(task, original, chain, runners, final, notes)
        return final, best_c

    def _runners_up(self, task: Task, original: Candidate, chain: list[Candidate], runners: list,
                    final: Decision | None, notes: list[str]) -> tuple[Decision | None, Candidate]:
        """The final check of the best ``MAX_RUNNERS_UP`` candidates the search accepted with a
        lower bound past the success threshold but that another beat in their round: the round's
        winner can fail the fresh-process check where a plainer rival would pass
        (bmm_chunk_bwd, H100: a widened autotune won at 1.142x and lost perf-03 to its own
        tuning noise; loop pipelining, 1.110x in the same round, was never checked). A rival
        made by another transform than the failed winners goes first: one of the same kind
        tends to fail the same way (the widened and the extended autotune of bmm_chunk_bwd, both
        1.14x in the search, both tuned on its small cases)."""
        checked = {c.hash for c in chain}
        failed_kinds = {_kind(c.origin) for c in chain}
        order = sorted(runners, key=lambda r: (_kind(r[2].origin) not in failed_kinds, r[0], r[1]),
                       reverse=True)
        fresh = [c for c in dict.fromkeys(c for _, _, c in order) if c.hash not in checked]
        # one the finalists' sweep vetoed costs no check, and takes no runner-up's place
        vetoed = [c for c in fresh if self.sweep.veto(c) is not None]
        fresh = [c for c in fresh if c not in vetoed][:MAX_RUNNERS_UP] + vetoed
        for cand in fresh:
            check = self._final(task, original, cand)
            if check.accepted:
                notes.append(f"runner-up {cand.description!r} passed the final check")
                return check, cand
            notes.append(f"final check rejected runner-up {cand.description!r}: {check.reason}")
        return final, original

    def _output_chain(self, task: Task, original: Candidate, chain: list[Candidate], ranked: list,
                      split: list, factor: float, notes: list[str]
                      ) -> tuple[Decision | None, Candidate]:
        """The part of ``_output`` before the runners-up: the chain's final checks, and the size
        dispatch or autotune that ``emit`` calls for.

        A config the search found faster overall than the whole accepted chain but slower on some
        size (``split``) is checked before the chain only where the chain alone is no success
        (its speedup under ``min_speedup``); else the chain first, and the split after it where
        time is left and it promises more. Checked first, a split that fails in the fresh process
        (a size slower there, a check cut at the cap) spent the time the chain's own check needed:
        on an H100 smoke (engine a98c89303aa9, 120 s a record) softmax_flaggems' split was 61.5%
        slower on one size and its chain's best was then "not checked: about 29 s needed, 24 s
        left"; layer_norm_liger's split was cut at the cap and its chain's best not checked."""
        final, best_c = None, original
        tried_split = False
        top_est, _, top = max(split, key=lambda r: (r[0], r[1])) if split else (0.0, 0, original)
        worth_split = self.split_pending(split, factor)
        if worth_split and factor < self.settings.min_speedup:
            # fp4_to_bf16, H100: BLOCK 512 -> 4096 1.16x overall, the smallest case 28% slower;
            # the chain of clean wins reached 1.035x, no success on its own
            tried_split = True
            final, best_c = self._split_output(task, original, top, split, chain, notes)
        vetoed: Candidate | None = None      # a config faster overall but slower on one size
        vetoed_by: Decision | None = None    # ... and the final check that said so
        for cand in reversed(chain[-3:] if best_c is original else []):   # the best first, then back
            early = self._dispatch_first(task, original, cand, notes)
            if early is not None:
                final, best_c = early
                break
            final = self._final(task, original, cand)
            if final.accepted:
                best_c = cand
                break
            if vetoed is None and self._vetoed_by_one_size(final):
                vetoed, vetoed_by = cand, final
            notes.append(f"final check rejected {cand.description!r}: {final.reason}")
        if worth_split and not tried_split:
            if best_c is original:
                tried_split = True
                final, best_c = self._split_output(task, original, top, split, chain, notes)
            elif final is not None and top_est > final.speedup * (1 + 2 * self.policy.min_gain):
                final, best_c = self._split_beyond(task, original, top, final, best_c, notes)
        if self.settings.emit == "autotune" and ranked:
            final, best_c = self._emit_autotune(task, original, ranked, final, best_c, notes)
        elif self.settings.emit == "auto" and best_c is original and vetoed is not None:
            # faster overall, slower on some size: let each size take the faster config, first
            # by a Python test on a size (free at run time), else by the autotuner
            joined = self._dispatched(task, original, vetoed, vetoed_by, notes)
            if joined:
                final, best_c = joined
            elif not tried_split:
                final, best_c = self._emit_autotune(task, original, [(1.0, 0, vetoed)], final,
                                                    best_c, notes, with_original=True)
        elif (self.settings.emit == "auto" and vetoed is not None and final is not None
              and final.accepted and vetoed_by.speedup > final.speedup * (1 + 2 * self.policy.min_gain)):
            # an earlier config of the chain passed, a later one was faster overall but vetoed by
            # one size: joined with the original it may beat the one that passed
            final, best_c = (self._dispatched(task, original, vetoed, vetoed_by, notes, beat=final.speedup)
                             or (final, best_c))
        return final, best_c

    def split_pending(self, split: list, factor: float) -> bool:
        """Whether the final phase will try the best split config (``_output_chain``): with emit
        auto, where its estimate beats the accepted chain's ``factor`` by the gain."""
        if self.settings.emit != "auto" or not split:
            return False
        return max(split, key=lambda r: (r[0], r[1]))[0] > factor * (1 + self.policy.min_gain)

    def dispatch_reserve_s(self, cand: Candidate, original: Candidate, perf: int) -> float:
        """Seconds the final phase needs beyond its first check for a pending split config: the
        size dispatch's probes and the joined file's check on its shortest plan. The rounds and
        the finalists' sweep leave room for it: on four H100s (engine b84f85a408d7, 120 s a
        record, 2026-11-28) layer_norm_liger's split config (several rows a program) read 1.8x
        on every case but the small ones, and its dispatch was "not tried: its probes and final
        check would not end by the record's time cap" after a second round and a sweep of four
        finalists; the 1018ceeea5af pass kept dequantize_rowwise at 1.33x where its split,
        never checked for want of time, was 3.39x as a dispatch in a later run."""
        check, fixed = self._shortest(cand, original, perf)
        return shortest_check_s(check, fixed) + PROBE_CASE_S * perf

    def _split_output(self, task: Task, original: Candidate, top: Candidate, split: list,
                      chain: list[Candidate], notes: list[str]) -> tuple[Decision | None, Candidate]:
        """The split config ``top`` where nothing checked holds up yet: its own final check, then
        the size dispatch, then an autotune over it, the chain's best and the original config;
        ``(decision, original)`` when none holds up."""
        early = self._dispatch_first(task, original, top, notes)
        if early is not None:
            return early
        check = self._final(task, original, top)
        if check.accepted:
            return check, top
        final, best_c = check, original
        if self._vetoed_by_one_size(check):
            final, best_c = self._dispatched(task, original, top, check, notes) or (final, best_c)
        if best_c is original:
            notes.append(f"final check of {top.description!r}: {check.reason}")
            final, best_c = self._emit_size_split(task, original, split, chain, notes)
        return final, best_c

    def _split_beyond(self, task: Task, original: Candidate, top: Candidate, final: Decision,
                      best_c: Candidate, notes: list[str]) -> tuple[Decision, Candidate]:
        """The split config ``top`` after the chain's best passed (``final``): kept only where
        its own check, or its size dispatch, beats that."""
        early = self._dispatch_first(task, original, top, notes, beat=final.speedup)
        if early is not None:
            return early
        check = self._final(task, original, top)
        if check.accepted and check.speedup > final.speedup:
            notes.append(f"the split config {top.description!r} beat the chain's best: "
                         f"{check.reason}")
            return check, top
        if not check.accepted and self._vetoed_by_one_size(check):
            joined = self._dispatched(task, original, top, check, notes, beat=final.speedup)
            if joined:
                return joined
        notes.append(f"final check of the split config {top.description!r}: {check.reason}")
        return final, best_c

    def _dispatch_first(self, task: Task, original: Candidate, cand: Candidate, notes: list[str],
                        beat: float | None = None) -> tuple[Decision, Candidate] | None:
        """With emit auto, where the finalists' sweep found ``cand`` faster overall but at risk
        on some case (``Sweep.risk``: slower there beyond half the per-case limit, within the
        veto), its size dispatch with the original, checked before ``cand`` itself: the dispatch
        runs the original's config where ``cand`` is slower, so it holds up where ``cand`` may
        not, and the time of ``cand``'s own check, rejected, was the time the dispatch needed
        (``search.finalists``). None where it does not apply or does not hold up (``cand``'s own
        check follows, as before)."""
        if self.settings.emit != "auto" or self.interpreted:
            return None
        risk = self.sweep.risk(cand)
        if risk is None:
            return None
        decision, case, slow = risk
        if not decision.speedup >= max(self.settings.min_speedup, beat or 0.0):
            return None
        notes.append(f"{cand.description!r} at risk on case {case} ({100 * (slow - 1):.1f}% "
                     f"slower at the lower bound on every performance case in the search's "
                     f"worker, {decision.speedup:.3f}x overall): its size dispatch is checked "
                     f"first")
        return self._dispatched(task, original, cand, decision, notes, beat=beat)

    def _dispatched(self, task: Task, original: Candidate, cand: Candidate, vetoed_by: Decision,
                    notes: list[str], beat: float | None = None) -> tuple[Decision, Candidate] | None:
        """The size dispatch of ``cand`` with the original when its final check accepts it (and
        it is faster than ``beat``), else None. Tried once per candidate and record."""
        key = (getattr(task, "name", ""), cand.hash)
        if key in self.dispatch_tried:
            return None
        self.dispatch_tried = self.dispatch_tried | {key}
        decision, joined = self._emit_dispatch(task, original, cand, vetoed_by, notes)
        if decision is not None and decision.accepted and (beat is None or decision.speedup > beat):
            return decision, joined
        return None

    def _vetoed_by_one_size(self, final: Decision | None) -> bool:
        """The final check found the best fixed config faster overall, but some case slower
        beyond the per-case limit (seen on triton_conv2d_fwd, H100: 1.25x overall, a 45 us case
        72% slower, BLOCK 128 -> 256)."""
        return (final is not None and not final.accepted and final.speedup == final.speedup
                and final.speedup >= self.settings.min_speedup
                and final.worst_case_ratio > 1 + self.policy.max_case_regression)

    def _split_worthy(self, decision: Decision) -> bool:
        """A search decision rejected only for one slower size: faster overall beyond the noise
        (the lower bound clears the gain), some case slower beyond the per-case limit."""
        return (not self.interpreted and not decision.accepted
                and decision.speedup_low == decision.speedup_low
                and decision.speedup_low > 1 + self.policy.min_gain
                and decision.worst_case_ratio > 1 + self.policy.max_case_regression)

    def _emit_size_split(self, task: Task, original: Candidate, split: list, chain: list[Candidate],
                         notes: list[str]) -> tuple[Decision | None, Candidate]:
        """@triton.autotune over the best size-split configs, the chain's best and the original's
        (each size takes its fastest), checked like any output; ``(None, original)`` when it cannot
        be built or does not hold up, so the accepted chain is checked next."""
        top = [c for _, _, c in sorted(split, key=lambda r: (r[0], r[1]), reverse=True)][:4]
        if chain:
            top.append(chain[-1])
        ranked = [(float(len(top) - i), 0, c) for i, c in enumerate(top)]
        return self._emit_autotune(task, original, ranked, None, original, notes, with_original=True)

    def _emit_dispatch(self, task: Task, original: Candidate, cand: Candidate, vetoed_by: Decision,
                       notes: list[str]) -> tuple[Decision | None, Candidate]:
        """The original and ``cand`` joined by a size test, checked (``search.final_dispatch``)."""
        return size_dispatch_check(self, task, original, cand, vetoed_by, notes)

    def _emit_autotune(self, task: Task, original: Candidate, ranked: list, final: Decision | None,
                       best: Candidate, notes: list[str],
                       with_original: bool = False) -> tuple[Decision | None, Candidate]:
        """Offer @triton.autotune over the best configs (and the original's, ``with_original``);
        keep it if it holds up as well."""
        top = [c for _, _, c in sorted(ranked, key=lambda r: (r[0], r[1]), reverse=True)]
        if with_original:
            top = top[:5] + [original]
        auto = autotune_candidate(original, top[:6], nbytes=task_element_bytes(task))
        if auto is None:
            notes.append("autotune output not possible here (fewer than two configs, or the "
                         "transform does not apply): the best fixed config is written")
            return final, best
        if self.store:
            self.store.put_candidate(task.name, auto)
        decision = self._final(task, original, auto)
        fixed_ok = final is not None and final.accepted
        if decision.accepted and (not fixed_ok or self.interpreted
                                  or decision.speedup >= 0.97 * final.speedup):
            notes.append(f"autotune output kept: {decision.reason}")
            return decision, auto
        notes.append(f"autotune output not kept ({decision.reason}); the best fixed config is written")
        return final, best

    def _final(self, task: Task, original: Candidate, best: Candidate) -> Decision:
        """Re-verify and re-time the best against the original, all cases, in a fresh process.

        A best that fails a case is rejected, unless the original itself fails that case when
        run as its own candidate in a fresh process (``_final_twin``): then the case cannot judge
        anything (BENCHMARK.md: performance cases are the sizes at which the original runs), it is
        dropped from every later final check of the run, and the check runs again without it
        (at most ``MAX_FINAL_NARROWINGS`` times). The decision's reason names the cases dropped.
        Seen on the H100 (2026-11-25): int4_matmul's original hit an illegal memory access on
        perf-04 in the final check, after the search had accepted a 1.067x candidate; and
        attention_kernel's pipelined best crashed on perf-14, a case whose perf-script tile
        reads past its 16-row tensors."""
        veto = self.sweep.veto(best)
        if veto is not None:
            log.info("%s: final check of %s not run: %s", getattr(task, "name", "?"),
                     best.description or best.hash, veto.reason)
            if self.store:
                self.store.put_decision(task.name, 0, veto)
            return veto
        refused = self._budget_refuses(best, original, len(task.performance_cases))
        if refused is not None:
            log.info("%s: final check of %s not run: %s", getattr(task, "name", "?"),
                     best.description or best.hash, refused)
            return Decision(best.hash, False, float("nan"), float("nan"), float("nan"),
                            float("nan"), f"not checked: {refused}")
        self.checks = getattr(self, "checks", 0) + 1
        dropped: set[str] = self.final_dropped
        for _ in range(MAX_FINAL_NARROWINGS + 1):
            narrowed = without_cases(task, dropped)
            original_r, best_r, decision = self._final_once(narrowed, original, best)
            suspects = final_suspects(original_r, best_r) - dropped
            if decision.accepted or self.interpreted or not suspects:
                break
            room = self._another_check(best, original, len(task.performance_cases))
            if not room:
                # the twin runs and a check again would end past the cap: the rejection stands
                log.info("%s: final check not narrowed: %s", task.name, room.reason)
                break
            unsafe = self._final_unsafe(narrowed, original)
            unsafe |= self._final_unsafe_again(narrowed, original, best,
                                               (suspects & original_varies(best_r)) - unsafe)
            if not unsafe:
                break
            dropped |= unsafe
            self.progress(f"{task.name}: final check: case(s) {', '.join(sorted(unsafe))} "
                          "dropped (the original fails there as its own candidate); checking again")
            if not without_cases(task, dropped).performance_cases:
                break
        gone = sorted(c.id for c in task.cases if c.id in dropped)
        if gone:
            decision = replace(decision, reason=f"{decision.reason} [without {', '.join(gone)}: "
                                                "the original fails there as its own candidate]")
        if self.store:
            self.store.put_decision(task.name, 0, decision)
        return decision

    def _final_once(self, task: Task, original: Candidate,
                    best: Candidate) -> tuple[VariantResult, VariantResult, Decision]:
        """One fresh-process final check: (original's result, best's result, decision).

        A check where either side ran out of memory runs once more, when the budget leaves room:
        device memory is shared with the verification pool of the same GPU, so the failure says
        nothing about the candidate (on an H100, 2026-11-25, a 28.9x add_example candidate was
        lost to a CUDA out-of-memory beside four pool workers holding 18 GiB each)."""
        perf = tuple(c.id for c in task.performance_cases)
        for attempt in range(1 + OOM_RETRIES):
            plan = self._plan(task, original, best)
            start = self._now()
            evaluation = self._fresh_evaluate(
                task, (_variant(original, "original"), _variant(best, "best")), purpose="final",
                verify=True, time=True, keep_going=True, plan=plan)
            wall_s = self._now() - start
            shortest, _ = self._shortest(best, original, len(perf))
            # the estimate against the wall, in the run's log: what a calibration of the
            # estimate learns from (its verification part is modelled from the baseline alone)
            self.progress(f"{task.name}: final check of {best.description or best.hash} took "
                          f"{wall_s:.0f} s (expected {self._expected_s(best):.0f} s on the full "
                          f"plan, {shortest:.0f} s on the shortest; "
                          f"{'full' if plan == final_check_plan(self.settings) else 'fitted'} plan)")
            original_r, best_r = evaluation.result("original"), evaluation.result("best")
            decision = judge(original_r, best_r, perf, interpreted=self.interpreted,
                             policy=self.policy)
            decision = _short_autotune_noted(decision, plan, original, best)
            if decision.speedup == decision.speedup:      # timed through: a full check's wall
                self._observe(best, plan, wall_s)
            if decision.accepted or not _out_of_memory(original_r, best_r) \
                    or attempt == OOM_RETRIES:
                break
            room = self._another_check(best, original, len(perf))
            if not room:
                break
            self.progress(f"{task.name}: final check ran out of memory; checking again")
        return original_r, best_r, decision

    def _final_unsafe(self, task: Task, original: Candidate) -> set[str]:
        """Every case of ``task`` where the original fails as its own candidate: the twin stops at
        its first failure, so it runs again without the cases found, up to ``MAX_TWIN_RUNS``
        times (attention_kernel, H100, 2026-11-25: its perf script's tiles overrun the tensors on
        five cases, found one full final check at a time before)."""
        found: set[str] = set()
        for _ in range(MAX_TWIN_RUNS):
            rest = without_cases(task, found)
            if not rest.performance_cases:
                break
            new = twin_blamed(self._final_twin(rest, original)) - found
            if not new:
                break
            found |= new
        return found

    def _final_unsafe_again(self, task: Task, original: Candidate, best: Candidate,
                            varies: set[str]) -> set[str]:
        """The cases of ``varies`` (suspects where the check's verdict saw the original differ
        from itself) that the twin fails on runs after the first, up to
        ``TWIN_RUNS_WHERE_IT_VARIES`` runs in all and while the budget leaves room for another
        check: there one reproducing twin proves little, as in the search's rounds and the
        pass's re-verification (``search.blame``)."""
        found: set[str] = set()
        for _ in range(TWIN_RUNS_WHERE_IT_VARIES - 1):
            if not varies - found or not self._another_check(best, original,
                                                             len(task.performance_cases)):
                break
            found |= self._final_unsafe(task, original) & varies
        return found

    def _another_check(self, best: Candidate, original: Candidate, perf: int):
        """Whether the budget leaves room for one more check of ``best`` on its shortest plan
        (``BudgetPolicy.another_check``: a falsy answer carries the reason); True without a
        budget."""
        budget = getattr(self, "budget", None)
        if budget is None:
            return True
        return budget.another_check(self._fixed_part() + self._shortest(best, original, perf)[0])

    def _final_twin(self, task: Task, original: Candidate) -> VariantResult:
        """The original verified against itself over every case, in a fresh process, exactly as
        a best is in the final check (nothing timed); its result as the candidate."""
        twin = Candidate(original.source, "original", description="the original, as a candidate")
        evaluation = self._fresh_evaluate(
            task, (_variant(original, "original"), _variant(twin, "best")), purpose="final-twin",
            verify=True, time=False, use_store=False)
        return evaluation.result("best")

    def _fresh_evaluate(self, task: Task, variants: tuple[Variant, ...], **kwargs):
        """One request in a fresh worker process (``make_final_evaluator``), closed after; the
        timing worker where there is no such factory (tests)."""
        ev = self.make_final_evaluator() if self.make_final_evaluator else self.timer
        budget = getattr(self, "budget", None)
        if ev is not self.timer and budget is not None and budget.budget_s is not None:
            ev.time_left = budget.left_s        # killed at the record's cap, like the pool's
        try:
            return ev.evaluate(task, variants, **kwargs)
        finally:
            if ev is not self.timer:
                ev.close()


def _short_autotune_noted(decision: Decision, plan, original: Candidate,
                          best: Candidate) -> Decision:
    """``decision`` with its reason saying the check autotuned on the short benchmark, where its
    plan did and either file autotunes: its figures are those of the configs that benchmark
    picked, which Triton's own may not pick in the user's process."""
    rep = getattr(plan, "autotune_rep_ms", None)
    if not rep or not any("autotune" in c.source for c in (original, best)):
        return decision
    return replace(decision, reason=f"{decision.reason} [autotuned on a {rep:g} ms benchmark "
                                    "per config and key, not Triton's own 125 ms: that would "
                                    "not have ended by the record's cap]")


def _out_of_memory(*results: VariantResult) -> bool:
    """Either side of a check failed for want of host or device memory."""
    return any(r.status is Status.OOM or any(f.status is Status.OOM for f in
                                             ((r.failure,) if r.failure else ()) + r.case_failures)
               for r in results)
