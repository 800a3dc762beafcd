"""Which cases a failed verification blames, and which the original itself fails on.

Shared by the rounds (``search.loop``: a case the original cannot run as its own candidate is
dropped from the search) and the final check (``search.final_check``: the same, in a fresh process,
before a candidate is rejected for a case that cannot judge it).
"""

from __future__ import annotations

from ..model import Status, VariantResult

# cheats that name the case where the candidate's values went wrong (the others are about how it
# computes, such as no launch or a library op, and the original's run cannot excuse them)
_VALUE_CHEATS = ("rerun", "stale_output")


def blamed_cases(result: VariantResult) -> set[str]:
    """The cases a failed verification blames: where the candidate crashed, raised, computed
    other values, or changed its values on a re-run. Empty for a pass or a failure that names
    no case (then nothing is excused)."""
    if result.status is Status.OK:
        return set()
    out = set()
    if result.failure is not None and result.failure.case_id and result.status in (
            Status.CRASH, Status.RUNTIME_ERROR):
        out.add(result.failure.case_id)
    verdict = result.verdict
    if verdict is not None and result.status in (Status.MISMATCH, Status.CHEAT):
        out |= {m.case_id for m in verdict.mismatches}
        out |= {v.case_id for v in verdict.violations if v.kind in _VALUE_CHEATS and v.case_id}
        if verdict.failure is not None and verdict.failure.case_id:
            out.add(verdict.failure.case_id)
    return out


def twin_blamed(result: VariantResult) -> set[str]:
    """The cases where the original, run as its own candidate, failed: ``blamed_cases``, and the
    case where its reference run broke the context (SKIPPED naming a case)."""
    out = blamed_cases(result)
    if result.status is Status.SKIPPED and result.failure is not None and result.failure.case_id:
        out.add(result.failure.case_id)
    return out


def final_suspects(original: VariantResult, best: VariantResult) -> set[str]:
    """The cases a failed final check blames: the best's (``twin_blamed``, and each case it
    failed, since the final check keeps going past a failing case) and every case where the
    original itself failed beside it. Empty when the best passed verification (then a rejection
    is about speed, and no case is excused)."""
    if best.status is Status.OK:
        return set()
    out = twin_blamed(best) | {f.case_id for f in best.case_failures if f.case_id}
    out |= {f.case_id for f in original.case_failures if f.case_id}
    if original.failure is not None and original.failure.case_id:
        out.add(original.failure.case_id)
    return out


def judged_nothing(result: VariantResult) -> bool:
    """The verification found nothing wrong and checked nothing: on every case it ran the
    original read outside its arguments' memory, so no case defined a result to compare
    (``verify.differential``, "nothing verified"). Where the cases were a deferred tier, the
    candidate's earlier tiers stand: attention_kernel's original reads unmasked on perf-01,
    its deferred tier, and a pipelined candidate timed 1.091x there (H200 pass, engine
    c064071456aa, 2026-11-28) was dropped for it, as two more of its round's were."""
    verdict = result.verdict
    return (verdict is not None and verdict.checked == 0 and not verdict.mismatches
            and not verdict.violations and verdict.failure is not None
            and verdict.failure.status is Status.SKIPPED and result.failure is None)


def incumbent_timed_cases(incumbent: VariantResult,
                          case_ids: tuple[str, ...]) -> tuple[tuple[str, ...], set[str]]:
    """The search cases a round's candidates can be judged on, and those the incumbent failed.

    A candidate is compared with the incumbent case by case, so a case the incumbent has no
    timing for cannot judge anyone; and a case where the incumbent itself failed while timed
    (a crash breaks the context, and the cases after it go untimed for every variant) would make
    every candidate of every round "not judged on a part". attention_kernel_aligned (H100,
    2026-11-25): the original hit an illegal memory access on perf-16, one of its four search
    cases, in both rounds; pipelining at 1.159x and num_stages 4 at 1.155x were rejected for the
    missing perf-16 and perf-17. The search only ranks: the fresh-process final check still runs
    every case (and drops one only where the original fails it alone). A candidate missing a
    case the incumbent was timed on is still not judged on a part.
    Returns (cases the incumbent was timed on, in order; cases it failed)."""
    lost = {f.case_id for f in incumbent.case_failures if f.case_id in case_ids}
    if incumbent.failure is not None and incumbent.failure.case_id in case_ids:
        lost.add(incumbent.failure.case_id)
    timed = tuple(cid for cid in case_ids if cid not in lost and incumbent.timing(cid) is not None)
    return timed, lost


# how the verifier words a difference it forgave as the original's own (verify.differential):
# "<case> seed <n> <output>: <k> elements differ, the original differs from itself on <m>"
_VARIES = "the original differs from itself"
TWIN_RUNS_WHERE_IT_VARIES = 3   # twin runs on a case where a verdict saw the original vary (the
# search's rounds and the pass's re-verification alike)


def original_varies(result: VariantResult) -> set[str]:
    """The cases where the verifier saw the original differ from itself beside this result
    (a difference it forgave as the original's own run-to-run variation, in the verdict's
    notes): there its result may be undefined, so a twin that reproduced itself once proves
    little."""
    verdict = result.verdict
    if verdict is None:
        return set()
    return {note.split(" seed ", 1)[0] for note in verdict.notes
            if _VARIES in note and " seed " in note}
