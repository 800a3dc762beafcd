"""Which cases a failed verification blames, and which the original itself fails on.

Shared by the rounds (``search.loop``: a case the original cannot run as its own candidate is
dropped from the search) and the final check (``search.output``: the same, in a fresh process,
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
