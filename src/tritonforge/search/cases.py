"""Which cases the search runs where, chosen from the original's baseline run (search side).

The search verifies on the cheap cases, times on the few that carry the original's time, profiles
the one nearest a millisecond, and leaves every case to the fresh-process final check. Kept apart
from the stages that use them so that a case-selection rule (a flag on generated cases, a new
ordering) changes here only.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

from ..model import (
    CaseRole, Diagnosis, PerfScriptCall, Profile, SpecCall, Task, VariantResult,
)
from ..model.task import spec_elements
from ..profile.diagnose import Thresholds, kernel_share
from ..profile.rules import OUTSIDE_DOMINANT

INTERPRETER_MAX_ELEMENTS = 1 << 16
INTERPRETER_MAX_SCRIPT_ELEMENTS = 1 << 26
INTERPRETER_MAX_ROUNDS = 2
INTERPRETER_MAX_CANDIDATES = 3


def interpreter_cases(task: Task) -> tuple[Task, list[str]]:
    """On the CPU interpreter: GPU-sized performance cases would take hours there and their
    timings mean nothing, so only small ones are kept (as correctness checks): spec cases and
    performance-script inputs whose tensors hold at most ``INTERPRETER_MAX_ELEMENTS`` elements."""

    # a performance script builds every input at once, on the host: only a script whose inputs
    # all fit in a few hundred MB is run, even for its small ones
    script_elements: dict[str, int] = {}
    for case in task.performance_cases:
        if isinstance(case.recipe, PerfScriptCall):
            n = case.recipe.elements
            script_elements[case.recipe.script] = (script_elements.get(case.recipe.script, 0)
                                                   + (n if n is not None else 1 << 62))
    kept, notes = [], []
    for case in task.cases:
        if case.role is CaseRole.CORRECTNESS:
            kept.append(case)
        elif isinstance(case.recipe, SpecCall) and spec_elements(
                (case.recipe.args, tuple(v for _, v in case.recipe.kwargs))) <= INTERPRETER_MAX_ELEMENTS:
            kept.append(replace(case, role=CaseRole.CORRECTNESS))
        elif (isinstance(case.recipe, PerfScriptCall) and case.recipe.elements is not None
              and case.recipe.elements <= INTERPRETER_MAX_ELEMENTS
              and script_elements[case.recipe.script] <= INTERPRETER_MAX_SCRIPT_ELEMENTS):
            kept.append(replace(case, role=CaseRole.CORRECTNESS))
        else:
            notes.append(f"case {case.id} skipped on the CPU interpreter (GPU-sized)")
    return replace(task, cases=tuple(kept)), notes


BASELINE_RETRIES = 2     # baseline runs again after a crash lost every timing of one


def without_cases(task: Task, dropped: set[str]) -> Task:
    """``task`` less the cases in ``dropped``."""
    if not dropped:
        return task
    return replace(task, cases=tuple(c for c in task.cases if c.id not in dropped))


def timings_lost_to_a_crash(result: VariantResult) -> set[str]:
    """The cases whose failure took the baseline's every timing with it: a run that kept going
    past failing cases still has timings, and one whose worker broke (a sticky CUDA error) has
    none, only the case that broke it."""
    if result.timings:
        return set()
    return {f.case_id for f in result.case_failures if f.case_id}


def baseline_without_crashes(task: Task, result: VariantResult,
                             run: Callable[[Task], VariantResult],
                             retries: int = BASELINE_RETRIES) -> tuple[VariantResult, list[str]]:
    """``result`` (the original's baseline on ``task``), or, where a crash lost every timing
    (``timings_lost_to_a_crash``), the baseline run again by ``run`` without the cases that
    crashed, up to ``retries`` times; the crashed cases stay among its case failures, so that
    ``restrict_to_runnable`` drops them. An original that crashed on one large size (an illegal
    address: decay_cumsum's perf-04, attention_kernel's perf-14, attention_kernel_aligned's
    perf-15, 3 of a pass's first 20 records, two H200s, 2026-11-28) lost the times of every
    other case: the profile timed them all again (11-20 s) and the search chose its cases
    without times, the failing large ones among them."""
    lost: list = []
    for _ in range(retries):
        crashed = timings_lost_to_a_crash(result)
        if not crashed:
            break
        lost += [f for f in result.case_failures if f.case_id in crashed]
        left = without_cases(task, {f.case_id for f in lost})
        if not left.performance_cases:
            break
        result = run(left)
    if not lost:
        return result, []
    known = {f.case_id for f in result.case_failures}
    result = replace(result, case_failures=tuple(result.case_failures)
                     + tuple(f for f in lost if f.case_id not in known))
    ids = ", ".join(sorted({f.case_id for f in lost}))
    return result, [f"the original's baseline lost every timing to a crash on {ids}: "
                    f"timed again without {'it' if len(lost) == 1 else 'them'}"]


def restrict_to_runnable(task: Task, baseline: VariantResult) -> tuple[Task, list[str]]:
    """Drop the cases on which the original itself fails: they cannot judge a candidate."""
    notes = [f"case {f.case_id} dropped: the original fails there ({f.reason[:80]})"
             for f in baseline.case_failures]
    return without_cases(task, {f.case_id for f in baseline.case_failures}), notes


def search_verification_cases(task: Task, baseline: VariantResult, count: int = 2) -> tuple[str, ...]:
    """Correctness cases plus the ``count`` quickest performance cases.

    Verifying every large performance case in every round dominated the search (110-260 s per
    TritonBench-G record on an H200, 2026-11-22); the large ones are all checked in the final
    check instead, and a best candidate that fails there falls back along the accepted chain.
    """
    times = {t.case_id: t.median_ms for t in baseline.timings}
    perf = sorted((c.id for c in task.performance_cases), key=lambda cid: times.get(cid, float("inf")))
    return tuple(c.id for c in task.correctness_cases) + tuple(perf[:count])


def largest_performance_case(task: Task, baseline: VariantResult,
                             chosen: tuple[str, ...]) -> tuple[str, ...]:
    """The performance case where the original takes longest, where ``chosen`` lacks it: the
    cascade's last tier, so that a candidate the search accepts and builds on has been verified
    at the largest size too (a K loop capped at 512 or a grid capped at 8192 elements is right on
    every small case). Empty without timings (the CPU interpreter)."""
    timed = [(t.median_ms, t.case_id) for t in baseline.timings
             if t.median_ms and t.case_id in {c.id for c in task.performance_cases}]
    if not timed:
        return ()
    largest = max(timed)[1]
    return () if largest in chosen else (largest,)


PROFILE_TARGET_MS = 1.0


def profile_case(search_ids: tuple[str, ...], baseline: VariantResult) -> str | None:
    """The search case to profile: the one whose time is nearest ~1 ms (on a log scale).

    Nsight Compute replays the kernel once per metric pass: on the largest case of
    attention_forward_triton (350 ms a call) profiling took 45 s of a 185 s budget (H100,
    2026-11-23). A 1 ms call shows the same bottleneck at a fraction of the cost.
    """
    times = {t.case_id: t.median_ms for t in baseline.timings if t.median_ms}
    timed = [cid for cid in search_ids if cid in times]
    if not timed:
        return search_ids[0] if search_ids else None
    return min(timed, key=lambda cid: abs(math.log(times[cid] / PROFILE_TARGET_MS)))


AHEAD_PERF_CASES = 5      # performance cases a candidate compiled ahead compiles for, at most


def ahead_cases(task: Task) -> tuple[str, ...] | None:
    """The cases a candidate compiled ahead of round 1 compiles for (``search.ahead``; None: all):
    where the task has more than ``AHEAD_PERF_CASES`` performance cases, its correctness cases
    and five performance cases spread over its range, in the perf scripts' order (their sizes
    ascend): the two first (round 1 verifies on the quickest), the middle one and the two last
    (the search times the longest, the quickest and the middle: ``representative_cases``). A
    kernel whose tile follows the size compiles anew for every size: max_reduction's candidates
    compiled 47 kernels in 44-47 s each, and 2 of 16 were compiled ahead in the 76 s before
    round 1 (H200 pass, engine c064071456aa, 2026-11-28). A case guessed wrong compiles where
    it first runs, as every case did before."""
    perf = [c.id for c in task.performance_cases]
    if len(perf) <= AHEAD_PERF_CASES:
        return None
    picked = {perf[0], perf[1], perf[len(perf) // 2], perf[-2], perf[-1]}
    return tuple(c.id for c in task.cases if c.role is not CaseRole.PERFORMANCE or c.id in picked)


def representative_cases(task: Task, baseline: VariantResult, count: int = 2) -> tuple[str, ...]:
    """The ``count`` performance cases where the original takes longest (they dominate the
    speedup's sum), then the quickest case and the one nearest the geometric middle of the range.

    The final check rejects a candidate for any case more than 5% slower, so the search must see
    small cases too: timing only the three longest, the search accepted a config 1.39x faster
    there and 11.6% slower on a 12 us case (fused_layernorm_triton), and one 1.30x faster and 72%
    slower on a 45 us case (triton_conv2d_fwd), both thrown away by the final check (H100,
    2026-11-23). Small cases cost little to time.
    """
    timed = sorted(((t.median_ms, t.case_id) for t in baseline.timings if t.median_ms), reverse=True)
    if not timed:
        return tuple(c.id for c in task.performance_cases[-(count + 1):])
    ids = [cid for _, cid in timed[:count]]
    rest = [(ms, cid) for ms, cid in timed if cid not in ids]
    if rest:
        quickest_ms, quickest = rest[-1]
        middle_ms = math.sqrt(timed[0][0] * quickest_ms)
        between = rest[:-1]
        if between:
            ids.append(min(between, key=lambda r: abs(math.log(r[0] / middle_ms)))[1])
        ids.append(quickest)
    return tuple(ids)


SLIVER_RETIMED = "not a sliver after all: "    # a note's opening (bench.optimize.held_back)


def _sliver_retimed(profile: Profile | None, incumbent: VariantResult) -> str | None:
    """A note where the search's own timing of the profiled case puts the Triton kernels at a
    quarter or more of it, though the diagnosis (on the stored baseline time) found them a
    sliver; None otherwise. One stored time can be an outlier: apply_penalty's perf-06 read
    46.7 us in the baseline sweep beside 4.8-20.4 us for its other sizes, which put its 4.1 us
    kernel at 9% of the case and cut its search to one round (H100, 2026-11-25)."""
    if profile is None or profile.case_id is None:
        return None
    fresh = [t.median_ms for t in incumbent.timings
             if t.case_id == profile.case_id and t.samples_ms]
    if not fresh or not fresh[0] > 0:
        return None
    share = kernel_share(profile, fresh[0] * 1e3)
    if share is None or share < Thresholds().kernel_share_dominant:
        return None
    stored = profile.roofline.time_us if profile.roofline is not None else None
    was = f" (the stored time was {stored:,.1f} us)" if stored else ""
    return (f"{SLIVER_RETIMED}round 1 timed case {profile.case_id} at {fresh[0] * 1e3:,.1f} us"
            f"{was}, of which the Triton kernels run {share:.0%}: the search goes on past a "
            "round without gain")


def _kernels_a_sliver(diagnosis: Diagnosis | None) -> bool:
    """The diagnosis finds the Triton kernels running under a quarter of the profiled case
    (``profile.rules.outside_kernels`` at its dominant priority). On the H100 stores (2026-11-25)
    that was apply_penalty, dequantize_matmul, l2_norm_bwd, matrix_reduction and
    max_reduction: no candidate of theirs reached 1.05x in 1-5 rounds, and they took 72-366 s
    each."""
    return diagnosis is not None and any(
        h.kind == "outside_kernels" and h.priority >= OUTSIDE_DOMINANT for h in diagnosis.hints)


COSTLY_RUN_S = 1.0       # a correctness case whose one run takes this long, and
COSTLY_RATIO = 10.0      # this many times the quickest performance case's, is checked late


def costly_cases(task: Task, baseline: VariantResult) -> set[str]:
    """The task's own correctness cases whose one run in the baseline took at least
    ``COSTLY_RUN_S`` and ``COSTLY_RATIO`` times the quickest performance case's run. A
    verification runs a case about ten times (first calls, three seeds, the recheck, the probe),
    so such a case sets the price of every candidate's first tier: destindex_copy's test section
    builds 50M-element inputs on the host, 3.9-4.2 s a run, and one candidate's verification
    there took 50 s, which no candidate of its round outlasted (H100, engine 1018ceeea5af,
    2026-11-27). Relative to the quickest performance case, so that the interpreter, where every
    case is slow alike, keeps its tiers."""
    runs = dict(baseline.run_s)
    perf = [runs[c.id] for c in task.performance_cases if c.id in runs]
    if not perf:
        return set()
    floor = max(COSTLY_RUN_S, COSTLY_RATIO * min(perf))
    return {c.id for c in task.cases if c.role is not CaseRole.PERFORMANCE and not c.generated
            and runs.get(c.id, 0.0) >= floor}


def verification_tiers(task: Task, verify_ids: tuple[str, ...],
                       baseline: VariantResult) -> tuple[tuple[str, ...], ...]:
    """``verify_ids`` split into the cascade's tiers, cheapest first: the task's own correctness
    cases and the quickest performance case; then the generated cases (``testgen.augment``:
    several per task, odd sizes among them); then the other performance cases, quickest first,
    with the own correctness cases too costly for the first tier (``costly_cases``): that last
    tier is the one a round defers (``split_deferred``). An H100 pass (2026-11-25) ran every
    generated case of a record in the first tier: a candidate that failed the test section
    still paid for seven generated cases first.

    A worker runs every case of a request once per variant before it compares any (compile
    errors, crashes), in the task's order: a candidate whose values are wrong on a 1 us case
    still ran its 10 ms performance case first. Verified tier by tier, it never reaches that case
    (``search.cascade``). One tier when the split would leave a tier empty."""
    times = {t.case_id: t.median_ms for t in baseline.timings}
    perf_ids = {c.id for c in task.performance_cases}
    generated = {c.id for c in task.cases if c.generated}
    costly = costly_cases(task, baseline)
    own = [cid for cid in verify_ids if cid not in perf_ids and cid not in generated]
    made = [cid for cid in verify_ids if cid not in perf_ids and cid in generated]
    perf = sorted((cid for cid in verify_ids if cid in perf_ids),
                  key=lambda cid: times.get(cid) or float("inf"))
    cheap = [cid for cid in own if cid not in costly]
    late = perf[1:] + [cid for cid in own if cid in costly]
    tiers = (tuple(cheap + perf[:1]), tuple(made), tuple(late))
    kept = tuple(t for t in tiers if t)
    return kept if len(kept) > 1 else (tuple(verify_ids),)


def split_deferred(task: Task, tiers: tuple[tuple[str, ...], ...]
                   ) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """(the tiers every candidate of a round is verified on, the tier only a candidate the
    arbiter accepts is): the last tier when a tier comes before it and it holds no generated case
    (``verification_tiers`` puts there the other performance cases and the own correctness cases
    too costly for the first tier, never the generated ones); else nothing is deferred. On an
    H100 pass (engine 310957ee7859) that tier cost an attention kernel's candidates 10-24 s each
    (attention_forward_triton: 7 requests on perf-01 and perf-07, 99 s of its pool's time),
    while few of them were then timed faster than the incumbent. A candidate is timed on the
    search cases before it is checked on them; the incumbent of the next round has passed every
    tier, and the final check still verifies every case in a fresh process."""
    kept = tuple(t for t in tiers if t)
    generated = {c.id for c in task.cases if c.generated}
    if len(kept) < 2 or set(kept[-1]) & generated:
        return kept, ()
    return kept[:-1], kept[-1]
