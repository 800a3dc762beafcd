"""The driver-side facade over the worker: evaluate, remember every result.

``Evaluator.evaluate`` is what every higher part calls. Results are written to the run store
under a key made of everything that changes them (task, variants, cases, what was asked, timing
plan, device), so a run that is killed and started again finds what it already did. The device
comes from ``runtime.hardware`` (resolved once per process), turns on a shared GPU from
``runtime.gpu_lock``, the plan of a timing from ``runtime.timing_plan``.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
from time import monotonic
from collections.abc import Callable
from pathlib import Path

from ..config import Settings
from ..model import (
    DeviceInfo, Evaluation, Failure, Status, Task, Variant, VariantResult, content_hash,
)
from ..model.serialize import dumps
from ..store import RunStore
from ..verify.policy import check_source
from .worker_client import CUT_REASON, Worker, cut_evaluation, trace_progress
from .failures import WORKER_KILLERS
from .gpu_lock import gpu_lock, gpu_shared_with_other_processes, lock_mode
from .hardware import compile_threads, resolve_device
from .protocol import EvaluateRequest
from .timing import TimingPlan
from .timing_plan import timing_plan

log = logging.getLogger(__name__)

# a request is killed this many seconds before its record's cap, leaving the record time to end
# (the worker killed, the results written) by the cap itself
CUT_MARGIN_S = 3.0
# a worker's start (Python, torch, CUDA): 5-6 s on an H100, 8-12 s on a loaded host; a request
# whose worker is not running is not sent less than this long before its deadline (itself
# CUT_MARGIN_S before the cap): attention_fwd_triton3's fourth twin run started its worker 10 s
# before the cap and ended the record 3 s past it (two H200s, engine d1cd3a8f2e36, 2026-11-28)
WORKER_START_S = 12.0
# a timed request's cases aim to end this long before it would be killed: what follows the
# timing (the check of the bare call after it, 0.3-3.3 s on an H100; the results' way back)
TIMING_END_MARGIN_S = 5.0
# The verifier's fresh seeds (the first bare calls', the recheck's, the probe's) come from one
# nonce, drawn here once per driver process and sent with every request, so that all of a run's
# workers use the same seeds: a TritonBench-G performance script builds every size's inputs for a
# new seed at once, on the host, and with a nonce of each worker's own the first verification in
# each worker built them all for its own seeds, side by side (flash_decode2_phi: 21 s in the first
# verification of each of three workers, then 0.3 s; lightning_attention: 56 s, H100 pass,
# 2026-11-26). Shared, each seed's set is built once per run (``runtime.perf_inputs``). The
# nonce is as unknowable to a candidate's author as a worker's own: random, drawn at run time.
RUN_NONCE = secrets.randbits(30)
COMPILE_PASS_RUNS = 3      # compile passes per request: the first, and again without a hung candidate
# requests that compile first on any GPU, not only on one that shards share (``_compile_first``):
# the original's baseline, whose first runs otherwise compile its kernels case by case, one at a
# time, in the timing worker (H100 pass, 2026-11-26: log_softmax's took 69 s of a 120 s record,
# fused_recurrent_hgrn's first size 33 s); the compile pass compiles them side by side
# (``quick_autotune.compile_in_parallel``)
COMPILE_FIRST_PURPOSES = ("baseline",)


# quiet-starting final-check workers kept started ahead of need: a record's final phase runs up
# to a check, its twin runs and runners-up in a row, some of them a second long
QUIET_SPARES = 3


class PrestartedEvaluators:
    """Fresh evaluators for final checks, made and their workers started ahead of need.

    A final check runs in a process that never saw a candidate; it need not be one started at
    that moment. Started inside the check, under its GPU lock, the worker cost 5-6 s of each
    final check on the H100 (python, torch, CUDA; 2026-11-25), and a record may run several.
    ``prestart()`` starts workers in background threads (the optimizer calls it as a record
    begins); a call returns the oldest one waiting once started, or, with none waiting, a new
    one that starts on first use as before. A start that fails in the background is left to
    ``Worker.evaluate``, which starts it again and reports its failure as a result.

    A worker told the GPU another worker reported (``Worker.quiet_start``) starts as CPU work
    alone, its CUDA context made by its first request: it takes no GPU lock, ``wait()`` does not
    wait for it, and ``QUIET_SPARES`` of them are kept waiting, one started as each is handed
    out. On two H200s (engine c9c7cb3af1db, 2026-11-28) each fresh-process check after a
    record's first waited 7.5-8.6 s for its worker: token_softmax_llama's final check and four
    twin runs, a second or two of work each, spent 32 s in starts, and its last check then had
    no time left; one worker started as the last is handed out would still have kept each of
    them waiting most of a start. A start that asks CUDA (no worker has reported the GPU yet)
    takes the GPU lock as untimed work does, one at a time, ``wait()`` waits for it before
    anything is timed (a CUDA start beside a timed call could disturb it), and none starts on a
    handout: the check just handed out would wait for that start's lock to time."""

    def __init__(self, make: Callable[[], "Evaluator"]):
        self._make = make
        self._waiting: list[tuple["Evaluator", threading.Thread]] = []
        self._quiet = False                  # the last evaluator made starts quietly
        self.prestarted = 0                  # evaluators handed out already started

    def prestart(self) -> None:
        """Start workers ahead of need: one, or ``QUIET_SPARES`` where they start quietly."""
        while len(self._waiting) < (QUIET_SPARES if self._quiet else 1):
            evaluator = self._made()

            def start(evaluator: "Evaluator" = evaluator) -> None:
                try:
                    if evaluator.worker.quiet_start:
                        evaluator.worker.start()
                        return
                    # as untimed GPU work: never beside another shard's timing
                    with gpu_lock(lock_mode(evaluator.device == "cuda", False)):
                        evaluator.worker.start()
                except Exception as exc:  # noqa: BLE001 - evaluate() starts it again, says why
                    log.warning("final-check worker did not start ahead of need: %s", exc)

            thread = threading.Thread(target=start, name="final-check prestart", daemon=True)
            thread.start()
            self._waiting.append((evaluator, thread))

    @property
    def starts_ahead(self) -> bool:
        """Whether every fresh check finds its worker started (quiet starts, spares kept)."""
        return self._quiet

    def _made(self) -> "Evaluator":
        evaluator = self._make()
        self._quiet = evaluator.worker.quiet_start
        return evaluator

    def wait(self) -> None:
        """Return once the workers being started ahead of need have started, where their start
        asks CUDA (the optimizer calls this before it times anything, so no CUDA start overlaps
        a timed call); at once for quiet starts."""
        for evaluator, thread in list(self._waiting):
            if not evaluator.worker.quiet_start:
                thread.join()

    def _take(self) -> "Evaluator | None":
        """The oldest evaluator waiting, once its start has ended (None if none waits)."""
        if not self._waiting:
            return None
        evaluator, thread = self._waiting.pop(0)
        thread.join()
        return evaluator

    def __call__(self) -> "Evaluator":
        evaluator = self._take()
        if evaluator is None:
            evaluator = self._made()
        else:
            self.prestarted += 1
        if self._quiet:
            self.prestart()                  # the spares topped up while this one runs
        return evaluator

    def close(self) -> None:
        """Stop the workers started ahead of final checks that never came."""
        while self._waiting:
            evaluator = self._take()
            if evaluator is not None:
                evaluator.close()


def _end_by(deadline: float | None, end_within_s: float | None) -> float | None:
    """When a timed request sent now should end its timing (``monotonic()``; None: no bound):
    ``TIMING_END_MARGIN_S`` before its kill, and within ``end_within_s`` of now."""
    ends = []
    if deadline is not None:
        ends.append(deadline - TIMING_END_MARGIN_S)
    if end_within_s is not None and end_within_s != float("inf"):
        ends.append(monotonic() + max(end_within_s, 0.0))
    return min(ends) if ends else None


def original_variant(task: Task) -> Variant:
    return Variant("original", task.source, task.source_hash)


class Evaluator:
    """Owns one worker and the store; evaluates (reference, candidates...) requests."""

    def __init__(self, settings: Settings, run_dir: str | Path, store: RunStore | None = None,
                 device: str | None = None, respawn: bool = False, times: bool = True,
                 known_device: DeviceInfo | None = None):
        """``respawn``: a lost worker process is replaced at once, in the background
        (``Worker.respawn``), on a GPU: for a pool that serves record after record. ``times``:
        False for an evaluator that never times, whose worker then runs at a lower CPU priority
        (``Settings.untimed_nice``, ``runtime.priority``); every worker's compile threads do.
        ``known_device``: the GPU as another worker reported it (``Worker.quiet_start``)."""
        self.settings = settings
        self.run_dir = Path(run_dir)
        self.store = store
        self.no_compile_pass: set[str] = set()   # tasks whose compile pass killed the worker
        # seconds the current record has left before its cap (search.loop sets it for a record
        # with a budget); a request still running then is killed and not stored: None, no limit
        self.time_left: Callable[[], float] | None = None
        self.device = device or resolve_device(settings.device)
        checks = settings.verification
        self.worker = Worker(self.device, self.run_dir / "worker",
                             timeout_s=checks.case_timeout_s,
                             host_memory_limit_gb=checks.host_memory_limit_gb,
                             perf_inputs_dir=Path(settings.run_dir) / "perf-inputs",
                             respawn=respawn and self.device == "cuda",
                             nice=0 if times else settings.sharing.untimed_nice,
                             compile_nice=settings.sharing.untimed_nice,
                             known_device=known_device)

    def close(self) -> None:
        self.worker.close()

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request_key(self, request: EvaluateRequest, purpose: str) -> str:
        """What identifies a request's outcome in the run store: the cases it can run (an
        untimed request's ``case_ids`` alone: generated cases joining the task later leave a
        verification on the test section the same request; a timed one also checks a
        correctness case of the task's after timing), the variants, the flags, the plan."""
        ran = request.task.cases if request.case_ids is None or request.time else \
            tuple(c for c in request.task.cases if c.id in request.case_ids)
        parts = [purpose, self.device, request.task.source_hash, dumps(ran),
                 ",".join(v.hash for v in request.variants), str(request.case_ids),
                 str((request.verify, request.time, request.run_cases, request.keep_going)),
                 str((request.first_calls, request.second_pass)),
                 dumps(request.timing)]
        return content_hash("|".join(parts))

    def evaluate(self, task: Task, variants: tuple[Variant, ...], *, purpose: str,
                 case_ids: tuple[str, ...] | None = None, verify: bool = True,
                 time: bool = True, keep_going: bool = False, run_cases: bool = True,
                 plan: TimingPlan | None = None, use_store: bool = True,
                 first_calls: bool = True, second_pass: bool = True,
                 end_within_s: float | None = None) -> Evaluation:
        """``variants`` (the original first) evaluated in the worker; ``first_calls`` and
        ``second_pass``: which whole-candidate checks a verification makes (``EvaluateRequest``).
        A timed request's timing aims to end ``TIMING_END_MARGIN_S`` before the record's cap
        would kill it, and within ``end_within_s`` of being sent where that is given (the room
        a search round's timing leaves the final check): past the plan's minimum rounds, on
        fewer samples (``EvaluateRequest.end_by``)."""
        request = EvaluateRequest(task, variants, case_ids, verify, time,
                                  plan or timing_plan(self.settings), run_cases, keep_going,
                                  first_calls=first_calls, second_pass=second_pass,
                                  nonce=RUN_NONCE)
        key = self.request_key(request, purpose)
        if use_store and self.store is not None:
            cached = self.store.get_evaluation(key)
            if cached is not None:
                log.info("reusing stored evaluation %s (%s)", key, purpose)
                return cached
        rejected = self._policy_rejections(task, variants[1:])
        if rejected:
            request = dataclasses.replace(
                request, variants=tuple(v for v in variants if v.name not in rejected))
        mode = lock_mode(request.variants and self.device == "cuda", time)
        if mode and (gpu_shared_with_other_processes() or purpose in COMPILE_FIRST_PURPOSES) \
                and task.name not in self.no_compile_pass:
            hung = self._compile_first(request, purpose)
            if hung:
                rejected = {**rejected, **hung}
                request = dataclasses.replace(
                    request, variants=tuple(v for v in request.variants if v.name not in hung))
        if mode and request.variants and not self._room_to_start():
            # no time to start its worker: never sent, and no lock waited for
            return self._merge_rejections(task, variants, self._unsent(request), rejected)
        if mode and request.variants:
            self.worker.ensure_started()    # its start is no GPU work: not under the lock
        if mode:
            trace_progress(request, f"{purpose}: waiting for the GPU lock ({mode})")
        with gpu_lock(mode):
            if mode:
                trace_progress(request, f"{purpose}: GPU lock taken")
            deadline = self._deadline()
            if not request.variants:
                evaluation, cut = None, False
            elif deadline is not None and deadline <= monotonic():
                evaluation, cut = self._unsent(request), True      # no time: never started
            else:
                end_by = _end_by(deadline, end_within_s) if request.time else None
                if end_by is not None:
                    request = dataclasses.replace(request, end_by=end_by)
                evaluation = self.worker.evaluate(request, deadline)
                cut = self.worker.cut
        evaluation = self._merge_rejections(task, variants, evaluation, rejected)
        if self.store is not None and not cut:      # a cut request judged nothing: never reused
            self.store.put_evaluation(key, purpose, evaluation)
        return evaluation

    def _unsent(self, request: EvaluateRequest) -> Evaluation:
        """The evaluation of a request the record's cap left no time to send: every variant
        SKIPPED (``CUT_REASON``), the worker untouched (killing and restarting it for each such
        request cost seconds apiece)."""
        device = self.worker.info or DeviceInfo(self.device, self.device == "cpu")
        return cut_evaluation(request, device, f"{CUT_REASON}: not started")

    def _room_to_start(self) -> bool:
        """Whether a request may be sent now: before its deadline (``_deadline``) and, where the
        worker is not running, ``WORKER_START_S`` before it (a start that would end past the
        record's cap is not begun)."""
        deadline = self._deadline()
        if deadline is None:
            return True
        need = 0.0 if self.worker.alive() else WORKER_START_S
        return deadline - monotonic() > need

    def _deadline(self) -> float | None:
        """When a request sent now is killed (``monotonic()``): ``CUT_MARGIN_S`` before the
        record's cap (``time_left``); None without a cap; now or earlier: not sent. On an H100
        pass (2026-11-26, 120 s a record, cap 150 s) a verification request of chunked_cumsum_fwd
        hung on its 4.7 GiB case until the worker's 180 s no-progress limit: the record ended at
        271 s."""
        if self.time_left is None:
            return None
        left = self.time_left()
        if left != left or left == float("inf"):
            return None
        return monotonic() + left - CUT_MARGIN_S

    def compile_ahead(self, task: Task, variants: tuple[Variant, ...],
                      case_ids: tuple[str, ...] | None = None) -> Evaluation | None:
        """Compile, never launch, the kernels ``variants`` (the first the reference) need on
        ``case_ids``, holding no GPU lock; nothing is verified, timed or stored. Triton's on-disk
        cache, shared by every worker of the host, keeps them for the requests that follow: the
        search compiles its likely first candidates on spare workers while the timing worker runs
        the original's baseline and profile (``search.ahead``). Variants the static policy
        refuses are never imported. None when no candidate is left to compile or no time is
        left (``time_left``): cut at the record's cap like any other request."""
        rejected = self._policy_rejections(task, variants[1:])
        kept = tuple(v for v in variants if v.name not in rejected)
        if len(kept) < 2:
            return None
        request = EvaluateRequest(task, kept, case_ids, verify=False, time=False,
                                  timing=timing_plan(self.settings), run_cases=True,
                                  keep_going=True, compile_only=True,
                                  compile_threads=compile_threads(self.settings.compile_threads))
        deadline = self._deadline()
        if deadline is not None and deadline <= monotonic():
            return None                     # no time left: nothing compiled, nothing sent
        trace_progress(request, "compile ahead (no GPU lock)")
        return self.worker.evaluate(request, deadline)

    def abandon(self) -> None:
        """The record is over (thread-safe): what this evaluator is still asked comes back
        unsent, and its request in flight is cut within a poll (``Worker.interrupt``). A
        compile-ahead request builds the case's inputs: on two H200s (2026-11-26, 20 s a record)
        one of attention_fwd_triton1, whose inputs need over 24 GiB, held its record to 111 s
        after the record's baseline was cut at 22 s, waited for and uncapped."""
        self.time_left = lambda: 0.0
        self.worker.interrupt()

    def cut_in_flight(self) -> None:
        """Cut the request in flight, if any (thread-safe: ``Worker.interrupt``); unlike
        ``abandon``, later requests run as usual, on a new worker. Compiling ahead uses it for a
        request still running when round 1 needs the worker (``search.ahead``)."""
        self.worker.interrupt()

    def _compile_first(self, request: EvaluateRequest, purpose: str) -> dict[str, Failure]:
        """Compile every kernel a request of shards sharing one GPU needs before it takes the GPU
        lock, exclusive (timing) or shared (verification): its
        cases run once per variant with kernels compiled but never launched
        (``quick_autotune.compile_without_launching``; every autotune config compiled), with no
        GPU lock held, and the result is dropped. The timed request then finds them in Triton's
        on-disk cache. A kernel whose tile constexpr follows the size (max_reduction's BLOCK_N =
        next_power_of_2(N)) compiles anew for every performance size and config: one round of
        its 7 variants held the exclusive lock 272 s, most of it compiling, while two other shards
        waited; under the shared lock, its compile pass still held that lock 4 minutes, 53-123 s a
        variant on its largest case, and a waiting exclusive request held every other shard back
        (H100, 2026-11-25). Verification compiles too: int4_matmul's verification requests held
        the shared lock 1-2 minutes each, and another shard's timing waited behind them.
        Best effort: a variant that fails here fails again, as a result, in the request itself.

        Except a candidate whose compile made no progress for the worker's timeout: it would
        hang the same way under the lock, so it is returned (name -> its TIMEOUT failure) to be
        left out of the request, and the pass runs again for the variants it held up, at most
        ``COMPILE_PASS_RUNS`` times in all. max_reduction (H100, 2026-11-25): one candidate's
        64 x 16384 tile compiled for over 180 s in the pass; the timed request then compiled
        under the exclusive lock and the call ended in it. The reference (the first variant) is
        never left out: a hang there ends the passes."""
        hung: dict[str, Failure] = {}
        for _ in range(COMPILE_PASS_RUNS):
            variants = tuple(v for v in request.variants if v.name not in hung)
            warm = dataclasses.replace(request, variants=variants, verify=False, time=False,
                                       run_cases=True, keep_going=True, compile_only=True,
                                       compile_threads=compile_threads(
                                           self.settings.compile_threads))
            deadline = self._deadline()
            if deadline is not None and deadline <= monotonic():
                break                   # no time left: the request itself comes back unsent
            trace_progress(warm, f"{purpose}: compile pass (no GPU lock)")
            evaluation = self.worker.evaluate(warm, deadline)
            results = evaluation.results if evaluation else ()
            stuck = [r for r in results[1:] if r.status is Status.TIMEOUT]
            killed = [r.variant for r in results if r.status in WORKER_KILLERS]
            if stuck and len(killed) == len(stuck):
                for r in stuck:
                    reason = r.failure.reason if r.failure else "no progress"
                    hung[r.variant] = Failure(
                        Status.TIMEOUT, f"compile pass (no GPU lock): {reason}; not run under "
                        "the GPU lock", r.failure.detail if r.failure else "",
                        r.failure.case_id if r.failure else None)
                log.warning("%s: %s hung compiling in the compile pass; left out of the request",
                            request.task.name, ", ".join(r.variant for r in stuck))
                if any(r.status is Status.SKIPPED for r in results):
                    continue        # the variants it held up still need their compile pass
                break
            if killed:
                # a wrapper's torch operations on outputs no kernel wrote (indices, sizes) can
                # trip a device-side assert: the worker restarts; this task's requests then go
                # without
                self.no_compile_pass.add(request.task.name)
                log.warning("%s: the compile pass killed the worker (%s); no more compile passes "
                            "for it", request.task.name, ", ".join(killed))
            break
        return hung

    # ------------------------------------------------------------------ static policy
    def _policy_rejections(self, task: Task, candidates: tuple[Variant, ...]) -> dict[str, Failure]:
        """Candidates the static source policy refuses are never imported."""
        if not candidates:
            return {}
        rejected = {}
        for v in candidates:
            result = check_source(v.source, original=task.source)
            if not result.ok:
                rejected[v.name] = Failure(Status.POLICY_REJECTED, "; ".join(result.reasons)[:500],
                                           "\n".join(result.reasons))
        return rejected

    def _merge_rejections(self, task: Task, variants: tuple[Variant, ...],
                          evaluation: Evaluation | None, rejected: dict[str, Failure]) -> Evaluation:
        if not rejected and evaluation is not None:
            return evaluation
        by_name = {r.variant: r for r in evaluation.results} if evaluation else {}
        results = []
        for v in variants:
            if v.name in rejected:
                results.append(VariantResult(v.name, v.hash, rejected[v.name].status, rejected[v.name]))
            else:
                results.append(by_name[v.name])
        device = evaluation.device if evaluation else self.worker.info
        assert device is not None or evaluation is None
        return Evaluation(task.name, tuple(results),
                          device or DeviceInfo("not started", self.device == "cpu"),
                          evaluation.notes if evaluation else ())
