"""Verification in a cascade, on the verification pool (search side of the worker boundary).

A round's candidates are verified against the ORIGINAL tier by tier (``search.cases.
verification_tiers``): the correctness cases and the quickest performance case first, for every
candidate, side by side in the pool's workers; the next tier only for those that passed. A worker
runs each case of a request once per variant before it compares any, so a candidate verified on
every case at once ran its longest case even when a 1 us case already showed it wrong; here it
never reaches it. Then the timing on the cases that carry the original's time (``search.stages``),
and every case only for the final check's finalists (``search.final_check``).
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


def verify_pool(evaluators: list[Evaluator], task: Task, original: Candidate,
                cands: list[Candidate], case_ids: tuple[str, ...],
                in_time: Callable[[dict[str, VariantResult]], bool] = lambda got: True,
                ) -> dict[str, VariantResult]:
    """Each of ``cands`` verified against ``original`` on ``case_ids`` (candidate hash -> its
    result), one request per candidate, the pool's workers side by side. Workers side by side
    share the device's memory: a candidate that ran out of it there gets one more chance alone
    on the first worker, so that contention is never held against it. Once ``in_time(results so
    far)`` says no, no new request starts: the candidates left are SKIPPED (``OUT_OF_TIME``),
    never failed."""
    results: dict[str, VariantResult] = {}
    queue = list(cands)
    lock = threading.Lock()

    def work(ev: Evaluator) -> None:
        while True:
            with lock:
                if not queue:
                    return
                cand = queue.pop(0)
                if not in_time(results):
                    results[cand.hash] = _out_of_time(cand)
                    continue
            evaluation = ev.evaluate(task, (variant(original, "original"), variant(cand, "candidate")),
                                     purpose="verify", case_ids=case_ids, verify=True, time=False)
            with lock:
                results[cand.hash] = evaluation.result("candidate")

    threads = [threading.Thread(target=work, args=(e,)) for e in evaluators[:max(1, len(cands))]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(threads) > 1:
        for cand in cands:
            if results[cand.hash].status is Status.OOM and in_time(results):
                evaluation = evaluators[0].evaluate(
                    task, (variant(original, "original"), variant(cand, "candidate")),
                    purpose="verify-alone", case_ids=case_ids, verify=True, time=False)
                results[cand.hash] = evaluation.result("candidate")
    return results


def verify_cascade(evaluators: list[Evaluator], task: Task, original: Candidate,
                   cands: list[Candidate], tiers: tuple[tuple[str, ...], ...],
                   on_tier: Callable[[int, int, int], None] = lambda tier, asked, passed: None,
                   in_time: Callable[[dict[str, VariantResult]], bool] = lambda got: True,
                   on_results: Callable[[int, dict[str, VariantResult]], None]
                   = lambda tier, got: None) -> dict[str, VariantResult]:
    """``cands`` verified tier by tier: a candidate that fails a tier is never run on the next
    (its result is that failure); one that passes every tier has the last tier's result. A
    candidate the budget left unverified on a later tier is SKIPPED (see ``verify_pool``).
    ``on_tier(tier index, candidates asked, candidates passed)`` and ``on_results(tier index,
    its results)`` after each tier."""
    results: dict[str, VariantResult] = {}
    alive = list(cands)
    for i, tier in enumerate(t for t in tiers if t):
        if not alive:
            break
        got = verify_pool(evaluators, task, original, alive, tier, in_time)
        results.update(got)
        passed = [c for c in alive if got[c.hash].status is Status.OK]
        on_tier(i, len(alive), len(passed))
        on_results(i, got)
        alive = passed
    return results
