"""Cheap first: the first round's likely candidates compile while the original is measured
(search side).

Before round 1 can propose, the original's baseline (8-117 s on the H100) and its Nsight Compute
profile (about 22 s) run on the timing worker, and the verification pool sits idle: on 24
TritonBench-G records with --per-kernel 120, 40-60 s passed before the first candidate was
proposed. ``CompileAhead`` proposes from the source alone (no diagnosis, no profile) with proposers
handed in for it (``Optimizer(..., ahead_proposers=...)``: instances of their own, since a
proposer may keep state between calls and the round's own proposers must not see this call), and
sends each candidate to a spare worker of the pool as a compile-only request
(``Evaluator.compile_ahead``: kernels compiled, nothing launched, no GPU lock), the spare workers
side by side, each a process of its own on the host's cores. Triton's on-disk cache is shared by
the host's workers, so round 1's verification finds the configs it proposes again compiled. It
stops (after the request in flight) when round 1 needs the workers. Nothing it does is a result:
a candidate that fails to compile here is proposed, verified and reported by round 1 as usual.
Its requests are cut at the record's cap like every other, and a record that ends before round 1
cuts those in flight: a compile-only request still builds the case's inputs, which can take
minutes.

Stopping waits ``STOP_GRACE_S`` at most for the requests in flight, then cuts them
(``Evaluator.cut_in_flight``: the worker is killed, the next request starts another): on an H100
(120 s a record, 2026-11-26) int8_quantization's round 1 waited on one compile-ahead request,
sent 45 s into the record, until the record's cap killed it 90 s later, and the record ended with
no candidate proposed. A worker's restart costs seconds; a hung request, the record.

Once the original's baseline has chosen the verification cases (``verify_from``), the spare
workers verify as well: each candidate compiled ahead, and each still to come, on round 1's first
tier, with the very request round 1 makes (``cascade.verify_request``), whose outcome the run
store keeps; round 1 then finds those answered. The profile (its Nsight Compute run takes the GPU
lock shared) runs meanwhile: 13-48 s a record on an H100 pass (120 s a record, 2026-11-26) in
which no candidate was verified, and the median record saw its first verified candidate 63 s in.
A verification waits for the baseline's timing as every request does (the exclusive lock).

Not measured on a GPU yet: a compile-only request builds its inputs on the GPU beside the
baseline's timing (whose times only choose cases) and the profile (advice).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ..model import Candidate, HardwareInfo, ProposalContext, Status, Task
from ..runtime.evaluator import Evaluator
from .cascade import variant, verify_request
from .proposer import Proposer

log = logging.getLogger(__name__)

STOP_GRACE_S = 15.0   # how long stopping waits for the compile requests in flight before cutting


@dataclass(frozen=True)
class AheadReport:
    """What compiling ahead did: candidates proposed, compile requests that ran, seconds."""
    proposed: int
    compiled: int
    seconds: float
    cut: int = 0          # requests still in flight after STOP_GRACE_S, cut
    verified: int = 0     # first-tier verification requests answered ahead (any outcome)
    # (candidate hash, time.perf_counter() when it passed): those that passed round 1's only
    # early tier ahead, so passed all of round 1's verification then
    passed_at: tuple[tuple[str, float], ...] = ()
    tier: tuple[str, ...] = ()   # the cases it verified on (round 1's first tier)
    late_tier: tuple[str, ...] = ()   # and the generated cases' tier, where it reached them

    @property
    def tiers(self) -> tuple[tuple[str, ...], ...]:
        """Round 1's early tiers verified ahead, in order."""
        return tuple(t for t in (self.tier, self.late_tier) if t)

    def note(self) -> str:
        cut = (f"; {self.cut} request(s) still running when round 1 had waited for the "
               "workers, cut" if self.cut else "")
        checked = f", {self.verified} verified on round 1's first tier" if self.verified else ""
        return (f"compiled ahead: {self.compiled} of {self.proposed} likely first candidate(s)"
                f"{checked} while the original was measured ({self.seconds:.0f} s, spare "
                f"workers{cut})")


class CompileAhead:
    """Compiles the likely first candidates on ``spare`` evaluators in background threads."""

    def __init__(self, spare: list[Evaluator], task: Task, original: Candidate,
                 proposers: list[Proposer], per_round: int, hardware: HardwareInfo,
                 case_ids: tuple[str, ...] | None = None, grace_s: float = STOP_GRACE_S):
        self.spare, self.task, self.original = spare, task, original
        self.grace_s = grace_s
        self.proposers, self.per_round, self.hardware = proposers, per_round, hardware
        self.case_ids = case_ids
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._cond = threading.Condition()
        self._queue: list[Candidate] = []
        self._unverified: list[Candidate] = []     # compiled, to verify once the tier is known
        self._tier: tuple[Task, tuple[str, ...], bool] | None = None
        # the generated cases' tier, once they are made (``verify_from``'s ``late``)
        self._late: Callable[[], tuple[Task, tuple[str, ...]] | tuple[()] | None] | None = None
        self._late_tier: tuple[Task, tuple[str, ...]] | None = None
        self._passed_first: list[Candidate] = []   # passed the first tier, the late one to come
        self._proposed = self._compiled = self._verified = 0
        self._passed_at: dict[str, float] = {}
        self._start = 0.0

    def verify_from(self, task: Task, tier: tuple[str, ...], second_pass: bool,
                    late: Callable[[], tuple[Task, tuple[str, ...]] | tuple[()] | None] | None
                    = None) -> None:
        """From now on verify instead of only compiling: on ``tier`` of ``task`` (round 1's first,
        with its ``second_pass``), the candidates compiled so far first. ``late``: where
        generated cases are still being made, round 1's second tier once they are (the task
        they join and their tier; None until then, ``()`` where they make none): a candidate
        that passed the first tier is verified there too, with round 1's own request, so that
        round 1 finds both answered.
        On two H200s (engine d1cd3a8f2e36, 2026-11-28) fused_layernorm_triton had 16 candidates
        through the first tier 50 s in, and its first verified candidate counted at 83 s: the
        generated cases had joined as a second tier, which round 1 verified after the profile."""
        with self._cond:
            if tier:
                self._tier = (task, tier, second_pass)
                self._late = None if second_pass else late
            self._cond.notify_all()

    def _late_ready(self) -> tuple[Task, tuple[str, ...]] | None:
        """The late tier, once known (asked again until it is). Holds the lock."""
        if self._late_tier is None and self._late is not None:
            try:
                got = self._late()
            except Exception as exc:  # noqa: BLE001 - verifying ahead is an optimization only
                log.info("the generated cases' tier is not known ahead: %s", exc)
                got = ()
            if got == ():           # made, and no tier of their own: nothing to wait for
                self._late = None
            else:
                self._late_tier = got
        return self._late_tier

    def _next(self) -> tuple[str, Candidate] | None:
        """(compile | verify, the candidate), or None when there is nothing left to do; a
        worker with nothing to compile waits for the tier, or the stop. Holds the lock."""
        while not self._stop.is_set():
            if self._tier is not None:
                pool = self._unverified or self._queue
                if pool:
                    return "verify", pool.pop(0)
                if self._late is None:
                    return None
                if self._passed_first and self._late_ready() is not None:
                    return "verify late", self._passed_first.pop(0)
            elif self._queue:
                return "compile", self._queue.pop(0)
            self._cond.wait(1.0)
        return None

    def propose(self) -> list[Candidate]:
        """Candidates from the source alone, each ahead proposer in turn, up to a round's."""
        ctx = ProposalContext(self.task, self.original, 1, self.hardware, budget=self.per_round)
        out: list[Candidate] = []
        for p in self.proposers:
            try:
                out += p.propose(ctx)
            except Exception as exc:  # noqa: BLE001 - compiling ahead is an optimization only
                log.info("ahead proposer %s failed: %s", getattr(p, "name", p), exc)
            if len(out) >= self.per_round:
                break
        seen: set[str] = set()
        return [c for c in out[:self.per_round] if not (c.hash in seen or seen.add(c.hash))]

    def start(self) -> None:
        """Propose, then compile on every spare worker side by side; returns at once."""
        if not self.spare or not self.proposers:
            return
        self._start = time.perf_counter()
        self._queue = self.propose()
        self._proposed = len(self._queue)
        for ev in self.spare[:max(1, len(self._queue))]:
            t = threading.Thread(target=self._work, args=(ev,), name="compile ahead", daemon=True)
            t.start()
            self._threads.append(t)

    def _work(self, ev: Evaluator) -> None:
        while True:
            with self._cond:
                job = self._next()
                tier = self._tier
            if job is None:
                return
            kind, cand = job
            if kind == "verify late":
                with self._cond:
                    late = self._late_tier
                if late is not None:
                    # as round 1 asks its second, last early tier: no bare first calls (the first
                    # tier made them), the second pass
                    got = verify_request(ev, late[0], self.original, cand, late[1], False, True)
                    if got.status is Status.OK:
                        with self._cond:
                            self._passed_at.setdefault(cand.hash, time.perf_counter())
                continue
            if kind == "verify" and tier is not None:
                task, case_ids, second_pass = tier
                got = verify_request(ev, task, self.original, cand, case_ids, True, second_pass)
                if got.status is not Status.SKIPPED:     # not cut
                    with self._cond:
                        self._verified += 1
                        if got.status is Status.OK and second_pass:
                            self._passed_at.setdefault(cand.hash, time.perf_counter())
                        elif got.status is Status.OK and self._late is not None:
                            self._passed_first.append(cand)
                            self._cond.notify_all()
                continue
            try:
                done = ev.compile_ahead(self.task, (variant(self.original, "original"),
                                                    variant(cand, "candidate")), self.case_ids)
            except Exception as exc:  # noqa: BLE001 - best effort; round 1 reports failures
                log.info("compile ahead of %s failed: %s", cand.description or cand.hash, exc)
                continue
            results = getattr(done, "results", ())
            if done is not None and not (results and all(r.status is Status.SKIPPED
                                                          for r in results)):   # not cut
                with self._cond:
                    self._compiled += 1
                    self._unverified.append(cand)
                    self._cond.notify_all()

    def stop(self, abandon: bool = False) -> AheadReport:
        """No new compile request; wait up to ``grace_s`` for those in flight (the workers are
        round 1's next), then cut those still running (``Evaluator.cut_in_flight``); or,
        ``abandon`` (the record is over before round 1: its baseline cut or failing), cut them at
        once and for good (``Evaluator.abandon``)."""
        with self._cond:
            self._stop.set()
            self._cond.notify_all()
        cut = 0
        if abandon:
            for ev, t in zip(self.spare, self._threads):
                if t.is_alive():
                    ev.abandon()
        else:
            until = time.monotonic() + self.grace_s
            for t in self._threads:
                t.join(max(0.0, until - time.monotonic()))
            for ev, t in zip(self.spare, self._threads):
                if t.is_alive():
                    ev.cut_in_flight()
                    cut += 1
        for t in self._threads:
            t.join()
        seconds = time.perf_counter() - self._start if self._start else 0.0
        late = self._late_tier[1] if self._late_tier is not None and self._passed_at else ()
        return AheadReport(self._proposed, self._compiled, seconds, cut, self._verified,
                           tuple(self._passed_at.items()),
                           self._tier[1] if self._tier is not None else (), late)
