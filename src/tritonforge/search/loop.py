"""The optimization loop: baseline, rounds of propose -> verify -> time -> arbitrate, final check.

One round: every proposer suggests candidates from the incumbent; each is verified against the
ORIGINAL (the oracle) in a pool of workers side by side (compilation is CPU-bound, correctness
does not care about contention); the verified ones are timed together with the incumbent,
interleaved, alone on the device, on a few representative performance cases; the arbiter accepts
the best one that is faster beyond the noise. Failed candidates go to fault-aware repair. The loop
stops after ``max_rounds``, after ``patience`` rounds without gain, when the budget runs out, or
when nothing new is proposed. The final check runs the best candidate against the original in a
NEW worker process on every case, and only a speedup reproduced there counts.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..config import Settings
from ..model import (
    Candidate, CaseRole, Decision, Evaluation, HardwareInfo, HistoryEntry, ProposalContext,
    Status, Task, Variant, VariantResult,
)
from ..runtime.service import Evaluator
from ..store import RunStore
from .arbiter import ArbiterPolicy, judge
from .proposer import Proposer

log = logging.getLogger(__name__)


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

    @property
    def improved(self) -> bool:
        return self.best.hash != self.original.hash and self.final is not None and self.final.accepted


def _variant(c: Candidate, name: str) -> Variant:
    return Variant(name, c.source, c.hash)


def restrict_to_runnable(task: Task, baseline: VariantResult) -> tuple[Task, list[str]]:
    """Drop the cases on which the original itself fails: they cannot judge a candidate."""
    bad = {f.case_id for f in baseline.case_failures}
    notes = [f"case {f.case_id} dropped: the original fails there ({f.reason[:80]})"
             for f in baseline.case_failures]
    return replace(task, cases=tuple(c for c in task.cases if c.id not in bad)), notes


def search_verification_cases(task: Task, baseline: VariantResult, count: int = 2) -> tuple[str, ...]:
    """Correctness cases plus the ``count`` quickest performance cases.

    Verifying every large performance case in every round dominated the search (110-260 s per
    TritonBench-G record on an H200, 2026-11-22); the large ones are all checked in the final
    check instead, and a best candidate that fails there falls back along the accepted chain.
    """
    times = {t.case_id: t.median_ms for t in baseline.timings}
    perf = sorted((c.id for c in task.performance_cases), key=lambda cid: times.get(cid, float("inf")))
    return tuple(c.id for c in task.correctness_cases) + tuple(perf[:count])


def representative_cases(task: Task, baseline: VariantResult, count: int = 3) -> tuple[str, ...]:
    """The ``count`` performance cases where the original takes longest: they dominate the sum."""
    timed = [(t.median_ms, t.case_id) for t in baseline.timings]
    timed.sort(reverse=True)
    ids = tuple(cid for _, cid in timed[:count])
    return ids or tuple(c.id for c in task.performance_cases[-count:])


class Optimizer:
    """Runs the loop for one task; ``evaluators`` are the verification pool, the first also times."""

    def __init__(self, task: Task, settings: Settings, evaluators: list[Evaluator],
                 proposers: list[Proposer], store: RunStore | None,
                 progress: Callable[[str], None] = lambda s: None,
                 policy: ArbiterPolicy | None = None, candidates_per_round: int = 6,
                 make_final_evaluator: Callable[[], Evaluator] | None = None):
        self.task = task
        self.settings = settings
        self.evaluators = evaluators
        self.timer = evaluators[0]
        self.proposers = proposers
        self.store = store
        self.progress = progress
        self.policy = policy or ArbiterPolicy(max_case_regression=settings.max_case_regression)
        self.per_round = candidates_per_round
        self.make_final_evaluator = make_final_evaluator
        self.interpreted = self.timer.device == "cpu"

    # ------------------------------------------------------------------ steps
    def _verify_all(self, task: Task, original: Candidate, cands: list[Candidate],
                    case_ids: tuple[str, ...]) -> dict[str, VariantResult]:
        results: dict[str, VariantResult] = {}
        queue = list(cands)
        lock = threading.Lock()

        def work(ev: Evaluator) -> None:
            while True:
                with lock:
                    if not queue:
                        return
                    cand = queue.pop(0)
                evaluation = ev.evaluate(task, (_variant(original, "original"), _variant(cand, "candidate")),
                                         purpose="verify", case_ids=case_ids, verify=True, time=False)
                with lock:
                    results[cand.hash] = evaluation.result("candidate")

        threads = [threading.Thread(target=work, args=(e,)) for e in self.evaluators[:max(1, len(cands))]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # Workers side by side share the device's memory: a candidate that ran out of it there
        # gets one more chance alone, so that contention is never held against it.
        if len(threads) > 1:
            for cand in cands:
                if results[cand.hash].status is Status.OOM:
                    evaluation = self.timer.evaluate(
                        task, (_variant(original, "original"), _variant(cand, "candidate")),
                        purpose="verify-alone", case_ids=case_ids, verify=True, time=False)
                    results[cand.hash] = evaluation.result("candidate")
        return results

    def _time(self, task: Task, incumbent: Candidate, cands: list[Candidate],
              case_ids: tuple[str, ...]) -> Evaluation:
        variants = (_variant(incumbent, "incumbent"),) + tuple(
            _variant(c, f"c{i}") for i, c in enumerate(cands))
        return self.timer.evaluate(task, variants, purpose="time", case_ids=case_ids, verify=False,
                                   time=True, run_cases=False, keep_going=True)

    # ------------------------------------------------------------------ the loop
    def run(self, budget_s: float | None = None) -> OptimizeResult:
        start = time.perf_counter()
        original = Candidate(self.task.source, "original")
        if self.store:
            self.store.put_task(self.task)
            self.store.put_candidate(self.task.name, original)
        base = self.timer.evaluate(self.task, (_variant(original, "original"),), purpose="baseline",
                                   verify=False, time=True, keep_going=True).results[0]
        if base.failure is not None:
            return OptimizeResult(self.task.name, original, original, None, 0,
                                  f"the original fails: {base.failure.one_line()}",
                                  time.perf_counter() - start, 0)
        task, notes = restrict_to_runnable(self.task, base)
        if not task.performance_cases:
            return OptimizeResult(task.name, original, original, None, 0,
                                  "the original runs on no performance case",
                                  time.perf_counter() - start, 0, notes=tuple(notes))
        search_ids = representative_cases(task, base)
        verify_ids = search_verification_cases(task, base)
        info = self.timer.worker.info
        hardware = HardwareInfo(info.name if info else self.timer.device, self.interpreted,
                                sm_count=info.sm_count if info else 0)
        incumbent, history = original, []
        chain: list[Candidate] = []          # every accepted incumbent, oldest first
        stale, round_, stop = 0, 0, "max rounds reached"
        for round_ in range(1, self.settings.max_rounds + 1):
            if budget_s is not None and time.perf_counter() - start > budget_s:
                stop = "time budget spent"
                round_ -= 1
                break
            ctx = ProposalContext(task, incumbent, round_, hardware, history=tuple(history),
                                  budget=self.per_round)
            cands: list[Candidate] = []
            for p in self.proposers:
                try:
                    cands += p.propose(replace(ctx, budget=self.per_round - len(cands)))
                except Exception as exc:  # noqa: BLE001 - a proposer's bug must not end the run
                    log.warning("proposer %s failed: %s", p.name, exc)
                if len(cands) >= self.per_round:
                    break
            if not cands:
                stop = "no new candidates"
                round_ -= 1
                break
            for c in cands:
                if self.store:
                    self.store.put_candidate(task.name, c)
            verified = self._verify_all(task, original, cands, verify_ids)
            good = [c for c in cands if verified[c.hash].status is Status.OK]
            for c in cands:
                r = verified[c.hash]
                if r.status is not Status.OK:
                    reason = r.failure.one_line() if r.failure else (r.verdict.summary() if r.verdict else "")
                    history.append(HistoryEntry(c.hash, c.origin, c.description, r.status, None, reason))
            best: tuple[Decision, Candidate] | None = None
            if good:
                timing = self._time(task, incumbent, good, search_ids)
                inc = timing.result("incumbent")
                for i, c in enumerate(good):
                    decision = judge(inc, timing.result(f"c{i}"), search_ids,
                                     interpreted=self.interpreted, policy=self.policy)
                    if self.store:
                        self.store.put_decision(task.name, round_, decision)
                    history.append(HistoryEntry(c.hash, c.origin, c.description,
                                                Status.OK, decision.speedup, decision.reason))
                    if decision.accepted and (best is None or self.interpreted is False and
                                              decision.speedup > best[0].speedup):
                        best = (decision, c)
            if best is not None:
                incumbent, stale = best[1], 0
                chain.append(incumbent)
                self.progress(f"{task.name} round {round_}: accepted {best[1].description} "
                              f"({best[0].reason})")
            else:
                stale += 1
                self.progress(f"{task.name} round {round_}: no candidate accepted "
                              f"({len(good)}/{len(cands)} verified)")
                if stale >= self.settings.patience:
                    stop = f"no gain for {stale} rounds"
                    break
        final, best_c = None, original
        for cand in reversed(chain[-3:]):    # the best first, then back along the accepted chain
            final = self._final(task, original, cand)
            if final.accepted:
                best_c = cand
                break
            notes.append(f"final check rejected {cand.description!r}: {final.reason}")
        return OptimizeResult(task.name, original, best_c, final, round_, stop,
                              time.perf_counter() - start, len(history), tuple(history),
                              search_ids, tuple(notes))

    def _final(self, task: Task, original: Candidate, best: Candidate) -> Decision:
        """Re-verify and re-time the best against the original, all cases, in a fresh process."""
        ev = self.make_final_evaluator() if self.make_final_evaluator else self.timer
        try:
            evaluation = ev.evaluate(task, (_variant(original, "original"), _variant(best, "best")),
                                     purpose="final", verify=True, time=True, keep_going=True)
        finally:
            if ev is not self.timer:
                ev.close()
        perf = tuple(c.id for c in task.performance_cases)
        decision = judge(evaluation.result("original"), evaluation.result("best"), perf,
                         interpreted=self.interpreted, policy=self.policy)
        if self.store:
            self.store.put_decision(task.name, 0, decision)
        return decision


def make_evaluators(settings: Settings, run_dir: Path, store: RunStore | None, jobs: int,
                    device: str) -> list[Evaluator]:
    return [Evaluator(settings, run_dir / f"w{i}", store, device=device) for i in range(max(1, jobs))]


from ..model.serialize import register as _register  # noqa: E402

_register(OptimizeResult)
