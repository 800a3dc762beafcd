"""Verification in a cascade, on the verification pool (search side of the worker boundary).

A round's candidates are verified against the ORIGINAL tier by tier (``search.cases.
verification_tiers``): the correctness cases and the quickest performance case first, the next
tier only for those that passed, the pool's workers side by side, each taking the deepest
(tier, candidate) waiting (``verify_cascade``). A worker
runs each case of a request once per variant before it compares any, so a candidate verified on
every case at once ran its longest case even when a 1 us case already showed it wrong; here it
never reaches it. A round defers its last tier when it holds performance cases alone
(``search.cases.split_deferred``): only the candidates the arbiter accepts after the timing on
the cases that carry the original's time (``search.stages``) are verified there; every case
again for the final check's finalists, in a fresh process (``search.final_check``).

A verification's checks of the candidate as a whole run once per candidate, not once per tier:
its first calls bare, before any guard (``verify.shipped_checks.bare_first``), in its first tier,
where they are its first calls in that worker; the recheck on a fresh seed and the bare-call probe
in its last. Each costs the original's runs as well as the candidate's: bare first three of the
original's calls a case, the probe two or more. On the CPU interpreter, one verification of two
attention-sized cases spent 43% of its time in bare first calls and 12% in the probe. With
that and the original's runs kept per worker (``verify.original_runs``), the sin example's six
candidates took 8-11 s to verify on the CPU interpreter (two runs), against 18-23 s before (four).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from ..model import Candidate, Failure, Status, Task, Variant, VariantResult
from ..runtime.evaluator import Evaluator

log = logging.getLogger(__name__)


def variant(c: Candidate, name: str) -> Variant:
    return Variant(name, c.source, c.hash)


OUT_OF_TIME = "not verified: the record's time budget left no room for it before the final check"


def _out_of_time(cand: Candidate) -> VariantResult:
    return VariantResult("candidate", cand.hash, Status.SKIPPED,
                         Failure(Status.SKIPPED, OUT_OF_TIME))


def verify_request(ev: Evaluator, task: Task, original: Candidate, cand: Candidate,
                   case_ids: tuple[str, ...], first_calls: bool, second_pass: bool,
                   purpose: str = "verify") -> VariantResult:
    """One tier's verification request of ``cand``, as the cascade asks it (compiling ahead asks
    round 1's first tier the same way, so the run store answers round 1 at once); a request that
    fails is the candidate's CRASH."""
    try:
        evaluation = ev.evaluate(task, (variant(original, "original"), variant(cand, "candidate")),
                                 purpose=purpose, case_ids=case_ids, verify=True, time=False,
                                 first_calls=first_calls, second_pass=second_pass)
        return evaluation.result("candidate")
    except Exception as exc:  # noqa: BLE001 - a request's failure is the candidate's result
        log.warning("verification request for %s failed: %s", cand.hash, exc)
        return VariantResult("candidate", cand.hash, Status.CRASH,
                             Failure(Status.CRASH, f"verification request failed: {exc}"[:300]))


def verify_cascade(evaluators: list[Evaluator], task: Task, original: Candidate,
                   cands: list[Candidate], tiers: tuple[tuple[str, ...], ...],
                   on_tier: Callable[[int, int, int], None] = lambda tier, asked, passed: None,
                   in_time: Callable[[dict[str, VariantResult]], bool] = lambda got: True,
                   on_results: Callable[[int, dict[str, VariantResult]], None]
                   = lambda tier, got: None, fresh: bool = True) -> dict[str, VariantResult]:
    """``cands`` verified tier by tier: a candidate that fails a tier is never run on the next
    (its result is that failure); one that passes every tier has the last tier's result. A
    candidate the budget left unverified on a later tier is SKIPPED (``OUT_OF_TIME``).

    The tiers stream through the pool: a worker takes the deepest waiting (tier, candidate), a
    candidate that passed one tier going on to the next before a new candidate starts, in
    proposal order among equals; no tier waits for the slowest request of the one before. On an
    H100 (2026-11-26) a round of 12 candidates on 3 workers spent 43 s verifying, its requests
    1 s each and 7-9 s idle gaps between tiers while one worker compiled a rule candidate.
    ``in_time(candidates finished so far)`` is asked before each request; once it says no, the
    rest are SKIPPED, never failed. A request that ran out of memory beside other workers runs
    again alone on the first, after the pool (``verify-alone``). ``on_tier(tier index,
    candidates asked, candidates passed)`` and ``on_results(tier index, its results)`` come
    after, tier by tier. ``fresh``: the first tier is the candidates' first verification (their
    first calls are made bare there); False for a tier checked after the round's own."""
    kept = [t for t in tiers if t]
    if not kept or not cands:
        return {}
    order = {c.hash: i for i, c in enumerate(cands)}
    final: dict[str, VariantResult] = {}
    per_tier: list[dict[str, VariantResult]] = [{} for _ in kept]
    queue: list[tuple[int, Candidate]] = [(0, c) for c in cands]
    alone: list[tuple[int, Candidate]] = []
    crowded = len(evaluators) > 1 and len(cands) > 1
    cond = threading.Condition()
    busy = 0

    def settle(tier: int, cand: Candidate, result: VariantResult) -> None:
        per_tier[tier][cand.hash] = result
        if result.status is Status.OK and tier + 1 < len(kept):
            queue.append((tier + 1, cand))
        else:
            final[cand.hash] = result

    def ask(ev: Evaluator, tier: int, cand: Candidate, purpose: str) -> VariantResult:
        return verify_request(ev, task, original, cand, kept[tier], fresh and tier == 0,
                              tier == len(kept) - 1, purpose)

    def work(ev: Evaluator) -> None:
        nonlocal busy
        while True:
            with cond:
                while not queue and busy:
                    cond.wait()
                if not queue:
                    cond.notify_all()
                    return
                item = max(queue, key=lambda x: (x[0], -order[x[1].hash]))
                queue.remove(item)
                tier, cand = item
                if not in_time(final):
                    settle(tier, cand, _out_of_time(cand))
                    continue
                busy += 1
            result = ask(ev, tier, cand, "verify")
            with cond:
                busy -= 1
                if crowded and result.status is Status.OOM:
                    alone.append((tier, cand))
                else:
                    settle(tier, cand, result)
                cond.notify_all()

    threads = [threading.Thread(target=work, args=(e,)) for e in evaluators[:len(cands)]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # out of memory beside other workers says nothing of the candidate: once more, alone
    for tier, cand in sorted(alone, key=lambda x: order[x[1].hash]):
        while True:
            result = ask(evaluators[0], tier, cand, "verify-alone") if in_time(final) \
                else _out_of_time(cand)
            per_tier[tier][cand.hash] = result
            if result.status is Status.OK and tier + 1 < len(kept):
                tier += 1
                continue
            final[cand.hash] = result
            break
    for i, got in enumerate(per_tier):
        if got:
            on_tier(i, len(got), sum(1 for r in got.values() if r.status is Status.OK))
            on_results(i, got)
    return {c.hash: final[c.hash] for c in cands}
