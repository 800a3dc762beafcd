"""The driver's side of the worker: start it, send requests, survive whatever the variant does.

A candidate can crash the CUDA context, hang, or eat memory. The worker runs in its own process
(and process group); the driver watches it while a request is in flight:

- no message for ``timeout_s``            -> the process group is killed: TIMEOUT
- a candidate's run of a case silent for ``STEP_TIMEOUT_FACTOR`` times the reference's run of
  it in the same request (at least ``STEP_TIMEOUT_FLOOR_S``) -> the same (``step_timeout_s``)
- its resident memory over the host limit -> killed: OOM
- the pipe closes (segfault, abort)       -> CRASH, with the exit status and the log's tail
- a sticky CUDA error reported by itself  -> it exits; the next request starts a new worker
- the request's ``deadline`` passes        -> killed: every variant SKIPPED (``CUT_REASON``), the
                                             request cut, not judged (``Worker.cut``)
- ``interrupt()`` from another thread      -> the same, within a poll (the record is over)

The variant that was in flight (from the worker's progress messages) gets the failure; the others
in the same request are marked SKIPPED. The driver itself never dies of a candidate.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..config import env_name, env_settings
from ..errors import WorkerError
from ..model import DeviceInfo, Evaluation, Failure, Status, VariantResult
from .priority import COMPILE_NICE_ENV, WORKER_NICE_ENV
from .protocol import (
    KNOWN_DEVICE_ENV, Done, EvaluateRequest, Progress, Ready, Shutdown, device_to_env, receive,
    send,
)

log = logging.getLogger(__name__)

PROGRESS_LOG_ENV = env_name("progress_log")          # Settings.progress_log

# a request killed at its deadline: the record's time ran out, nothing was judged (no case_id,
# so nothing reads it as a case the original breaks)
CUT_REASON = "the record's time cap was reached"

# how long ``Worker.kill`` waits for the killed process to exit before a reaper thread takes over:
# the process group is SIGKILLed, so it does exit, but a process holding many GiB of host and GPU
# memory can take longer to be torn down, and the caller (a record at its cap) must not wait
KILL_WAIT_S = 5.0

# A candidate's first run of a case (``Progress("run", ...)``: its inputs built, its call, a
# synchronisation; compiled beforehand by the request's compile pass) is killed once silent for
# this many times the reference's run of the same case in the same request, and at least the
# floor: a hung kernel is a recorded TIMEOUT well before ``timeout_s`` (180 s, longer than a
# 120 s record), which let one hung int8_quantization candidate hold its verification worker
# (and slow its neighbour's on the same GPU) for 94 s, to the record's cap, where the
# original's run of that case took milliseconds (four H200s, engine c064071456aa, 2026-11-28).
STEP_TIMEOUT_FACTOR = 20.0
STEP_TIMEOUT_FLOOR_S = 20.0
_TIMED_STEPS = frozenset({"run"})
# A candidate's kernel compiled at its first run of a case (``Progress("compile at first run")``,
# sent as each of its kernels starts compiling) is killed once silent this long: a TIMEOUT of
# the candidate's, where the round's other requests would otherwise wait for it. On two H200s
# (engine c9c7cb3af1db, 2026-11-28) two max_reduction candidates compiled one kernel for a
# generated odd row length (its tile is next_power_of_2 of the row) for 29 s and for 70 s, the
# second until the record's cap, with round 1 waiting for it and nothing ever timed; every other
# candidate kernel of that run compiled in under 23 s, most in under 3 s.
# Where this process saw the original itself compile a kernel at its first run for longer (the
# generated cases' runs of it, a fresh worker's first verification), the limit is
# ``COMPILE_STEP_FACTOR`` times its slowest such compile: a kernel slow to compile stays so.
COMPILE_STEP_LIMIT_S = 40.0
COMPILE_STEP_FACTOR = 3.0
_COMPILE_STEP = "compile at first run"
# task source hash -> the slowest compile at first run of a request's first variant (the
# original, or the incumbent of a timing) this process has seen (driver side, every worker)
_reference_compile_s: dict[str, float] = {}

_dying: set[threading.Thread] = set()
_dying_lock = threading.Lock()


def step_timeout_s(last: Progress, reference: str | None,
                   reference_s: dict[tuple[str, str | None], float], timeout_s: float,
                   reference_compile_s: float = 0.0) -> float:
    """How long the worker may stay silent after ``last``: ``timeout_s``, or, for a variant's
    run of a case the reference ran before it in this request (``reference_s``: the seconds the
    reference's step took, to its next message), ``STEP_TIMEOUT_FACTOR`` times that, at least
    ``STEP_TIMEOUT_FLOOR_S``, at most ``timeout_s``; for a variant's kernel compiling at its first
    run of a case, ``COMPILE_STEP_LIMIT_S`` or ``COMPILE_STEP_FACTOR`` times the reference's
    slowest (``reference_compile_s``), whichever is longer."""
    if last.stage == _COMPILE_STEP and last.variant != reference:
        return min(timeout_s, max(COMPILE_STEP_LIMIT_S, COMPILE_STEP_FACTOR * reference_compile_s))
    known = reference_s.get((last.stage, last.case_id))
    if last.stage not in _TIMED_STEPS or last.variant == reference or known is None:
        return timeout_s
    return min(timeout_s, max(STEP_TIMEOUT_FLOOR_S, STEP_TIMEOUT_FACTOR * known))


def _reap_later(process: subprocess.Popen) -> None:
    """Wait for a killed ``process`` in a daemon thread (``wait_for_dying`` joins them)."""
    def reap() -> None:
        try:
            process.wait()
        finally:
            with _dying_lock:
                _dying.discard(threading.current_thread())

    thread = threading.Thread(target=reap, name=f"reap {process.pid}", daemon=True)
    with _dying_lock:
        _dying.add(thread)
    thread.start()


def wait_for_dying(timeout_s: float) -> tuple[int, float]:
    """Wait up to ``timeout_s`` for killed workers still exiting (``KILL_WAIT_S``); returns
    (how many were still exiting, seconds waited). A pass waits between records so that the next
    record does not start beside a dying process's memory."""
    start = time.monotonic()
    with _dying_lock:
        threads = list(_dying)
    for t in threads:
        t.join(max(0.0, timeout_s - (time.monotonic() - start)))
    return len(threads), time.monotonic() - start


def trace_progress(request: EvaluateRequest, message: Progress | str, path: str | None = None,
                   worker: int | None = None) -> None:
    """Append ``message`` with the wall time to the file ``path`` names (default:
    ``Settings.progress_log`` of ``config.env_settings()``, $TRITONFORGE_PROGRESS_LOG), when set:
    a timeline of every request's stages (which variant compiled, autotuned, verified or was timed
    on which case, and when), to find where a GPU call's minutes went. A line is written
    whole, so several shards may share the file. The time has milliseconds and a worker's line
    names its process (``pid DRIVER/wWORKER``): requests of a pool run side by side, and without
    them the gaps between one worker's requests could not be told from another's work."""
    if path is None:
        path = env_settings().sharing.progress_log
    if not path:
        return
    if isinstance(message, Progress):
        what = " ".join(p for p in (message.stage, message.variant, message.case_id) if p)
    else:
        what = message
    now = time.time()
    who = f"{os.getpid()}/w{worker}" if worker else str(os.getpid())
    line = (f"{time.strftime('%H:%M:%S', time.localtime(now))}.{int(now * 1000) % 1000:03d} "
            f"pid {who} {request.task.name} "
            f"({len(request.variants)} variants, time={request.time}): {what}\n")
    try:
        with open(path, "a") as fh:
            fh.write(line)
    except OSError:       # a trace never stops a run
        pass

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss_bytes(pid: int) -> int:
    """The worker's own resident memory: anonymous pages plus shared memory, not the file-backed
    pages it maps. Memory-mapped performance inputs (``runtime.perf_inputs``) are page cache the
    kernel can drop at any time; counting them (as ``statm``'s resident field does) killed
    destindex_copy's timing worker "over 16 GiB" with 8 GiB of its own (H100, 2026-11-23)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
        if "RssAnon" in fields:
            return sum(int(fields[k].split()[0]) * 1024 for k in ("RssAnon", "RssShmem") if k in fields)
        with open(f"/proc/{pid}/statm") as fh:          # kernels before 4.5 lack RssAnon
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def cut_evaluation(request: EvaluateRequest, device: DeviceInfo, reason: str) -> Evaluation:
    """A request the record's cap cut, killed or never sent: every variant SKIPPED for
    ``reason``, no case named."""
    return Evaluation(request.task.name,
                      tuple(VariantResult(v.name, v.hash, Status.SKIPPED,
                                          Failure(Status.SKIPPED, reason))
                            for v in request.variants), device, (reason,))


class Worker:
    """One worker process on one device ("cuda" or "cpu" through the Triton interpreter)."""

    def __init__(self, device: str, work_dir: Path, *, timeout_s: float = 180.0,
                 host_memory_limit_gb: float = 16.0, startup_timeout_s: float = 300.0,
                 perf_inputs_dir: Path | None = None, respawn: bool = False,
                 nice: int = 0, compile_nice: int = 0, known_device: DeviceInfo | None = None):
        """``nice``: the worker process's priority drop, for one that never times;
        ``compile_nice``: its compile threads' (``runtime.priority``); ``known_device``: the GPU
        as another worker of the host reported it, so this one starts without asking CUDA
        (``quiet_start``)."""
        if device not in ("cuda", "cpu"):
            raise WorkerError(f"worker device must be 'cuda' or 'cpu', not {device!r}")
        self.device = device
        self.work_dir = Path(work_dir)
        self.timeout_s = timeout_s
        self.memory_limit = int(host_memory_limit_gb * 2**30)
        self.startup_timeout_s = startup_timeout_s
        self.perf_inputs_dir = perf_inputs_dir     # shared by a run's workers (runtime.perf_inputs)
        self.nice, self.compile_nice = nice, compile_nice
        self.known_device = known_device if device == "cuda" else None
        self.process: subprocess.Popen | None = None
        self.info: DeviceInfo | None = None
        self._to_child = self._from_child = -1
        self.restarts = 0
        self.cut = False        # the last request was killed at its deadline
        self._state = threading.Lock()
        self._in_flight = False
        self._interrupted = threading.Event()
        # a process lost to a crash, a cut, a hang or its memory limit is replaced at once, in the
        # background (``_replace_soon``), not when the next request comes: a Python + torch +
        # CUDA start took 8-12 s, and a third of an H100 pass's records (2026-11-26) began by
        # waiting for the timing worker that the record before had lost
        self.respawn = respawn
        self._spawner: threading.Thread | None = None
        self._closing = False       # close() was called: a replacement being started is not kept

    # ------------------------------------------------------------------ lifecycle
    @property
    def log_path(self) -> Path:
        return self.work_dir / "worker.log"

    def start(self) -> DeviceInfo:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        child_in_r, parent_w = os.pipe()
        parent_r, child_out_w = os.pipe()
        env = dict(os.environ)
        if self.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if self.perf_inputs_dir is not None:
            env["TRITONFORGE_PERF_INPUTS_DIR"] = str(self.perf_inputs_dir)
        env[WORKER_NICE_ENV], env[COMPILE_NICE_ENV] = str(self.nice), str(self.compile_nice)
        env.pop(KNOWN_DEVICE_ENV, None)
        if self.known_device is not None:
            env[KNOWN_DEVICE_ENV] = device_to_env(self.known_device)
        src_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = src_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tritonforge.runtime.worker_main",
                 str(child_in_r), str(child_out_w), str(self.work_dir / "modules")],
                pass_fds=(child_in_r, child_out_w), env=env, stdout=log_file,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        os.close(child_in_r)
        os.close(child_out_w)
        self._to_child, self._from_child = parent_w, parent_r
        message = self._wait_message(self.startup_timeout_s)
        if not isinstance(message, Ready):
            tail = self.log_tail()
            self.kill()
            raise WorkerError(f"the {self.device} worker did not start", hint=f"its log ends with:\n{tail}")
        self.info = message.device
        log.info("worker %s started on %s", message.pid, message.device.name)
        return message.device

    @property
    def quiet_start(self) -> bool:
        """Whether this GPU worker's start is CPU work alone (python, torch, triton imported; no
        CUDA context made before its first request): one told its GPU (``known_device``). Such a
        start may run beside another process's timed call."""
        return self.known_device is not None

    def _replace_soon(self) -> None:
        """Start the next process now, in a background thread (``respawn``); a start that fails
        there is made again, in the foreground, by the next request."""
        if not self.respawn or self._spawner is not None:
            return

        def spawn() -> None:
            if self._closing:
                return
            try:
                self.start()
                self.restarts += 1
            except Exception as exc:  # noqa: BLE001 - the next request starts one itself
                log.info("the %s worker's replacement did not start: %s", self.device, exc)
            if self._closing:       # closed meanwhile: the process it started goes too
                self.kill()
        self._closing = False
        self._spawner = threading.Thread(target=spawn, name="worker respawn", daemon=True)
        self._spawner.start()

    def _replaced(self, evaluation: Evaluation) -> Evaluation:
        """``evaluation`` (made first: it reads the lost process's log, which the next process
        writes to as well), the replacement started."""
        self._replace_soon()
        return evaluation

    def _spawned(self) -> None:
        """Wait for a replacement started by ``_replace_soon``, if any."""
        spawner, self._spawner = self._spawner, None
        if spawner is not None:
            spawner.join()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
            try:
                self.process.wait(timeout=KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                log.info("worker %s still exiting %.0f s after SIGKILL: reaped in the background",
                         self.process.pid, KILL_WAIT_S)
                _reap_later(self.process)
        for fd in (self._to_child, self._from_child):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_child = self._from_child = -1

    def close(self) -> None:
        """Shut the process down; a replacement still starting is killed, not waited for (it
        kills what it started itself if that comes after this returns)."""
        self._closing = True
        spawner, self._spawner = self._spawner, None
        if spawner is not None:
            self.kill()
            spawner.join(timeout=1.0)
            self.kill()             # one it had not yet spawned at the first kill
        if self.alive():
            try:
                send(self._to_child, Shutdown())
                self.process.wait(timeout=10)  # type: ignore[union-attr]
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def __enter__(self) -> "Worker":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_bytes()[-chars:].decode("utf-8", "replace")
        except OSError:
            return ""

    # ------------------------------------------------------------------ requests
    def _wait_message(self, timeout_s: float) -> object | None:
        ready, _, _ = select.select([self._from_child], [], [], timeout_s)
        if not ready:
            return None
        return receive(self._from_child)

    def interrupt(self) -> None:
        """Cut the request in flight, if any, as if its deadline had passed (thread-safe: the
        thread that sent it kills the worker within a poll of ``evaluate``). Nothing happens to
        an idle worker: a later request runs as usual."""
        with self._state:
            if self._in_flight:
                self._interrupted.set()

    def evaluate(self, request: EvaluateRequest, deadline: float | None = None) -> Evaluation:
        """Evaluate ``request``; a dying or hanging worker becomes failures, never an exception.
        ``deadline`` (``time.monotonic()``): a request still running then (or when another thread
        calls ``interrupt``) is killed and every variant SKIPPED (``CUT_REASON``); ``self.cut``
        says so afterwards."""
        with self._state:
            self._interrupted.clear()
            self._in_flight = True
        try:
            return self._evaluate(request, deadline)
        finally:
            with self._state:
                self._in_flight = False
                self._interrupted.clear()

    def ensure_started(self) -> None:
        """Have the process running: a replacement being started is waited for, a lost or
        never-started one started now. ``runtime.evaluator.Evaluator`` calls it before it takes
        the GPU lock, so that the lock is held for the request alone: a profile's fresh worker
        held the exclusive lock 11.5 s while Python, torch and CUDA started on a loaded host,
        and the record's verifications waited behind it (token_softmax_llama, four H100s,
        engine 190e1f012654, 2026-11-27)."""
        self._spawned()
        if not self.alive():
            if self.process is not None:
                self.restarts += 1
            self.start()

    def _evaluate(self, request: EvaluateRequest, deadline: float | None) -> Evaluation:
        self.cut = False
        self.ensure_started()
        assert self.info is not None
        send(self._to_child, request)
        trace = env_settings().sharing.progress_log     # once per request, not per progress message
        worker = self.process.pid if self.process is not None else None
        trace_progress(request, "sent", trace, worker)
        last = Progress("start")
        last_time = checked = step_start = time.monotonic()
        reference = request.variants[0].name if request.variants else None
        reference_s: dict[tuple[str, str | None], float] = {}    # (stage, case) -> its run
        silent_s = self.timeout_s
        while True:
            ready, _, _ = select.select([self._from_child], [], [], 0.25)
            now = time.monotonic()
            if ready:
                message = receive(self._from_child)
                if message is None:
                    return self._replaced(self._death(request, last, Status.CRASH,
                                                      self._exit_reason()))
                last_time = now
                if isinstance(message, Done):
                    trace_progress(request, "done", trace, worker)
                    if message.context_broken:
                        self.kill()
                        self._replace_soon()
                    return message.evaluation
                if isinstance(message, Progress):
                    if message != last:
                        trace_progress(request, message, trace, worker)
                        if last.variant == reference and last.stage in _TIMED_STEPS:
                            key = (last.stage, last.case_id)
                            reference_s[key] = max(reference_s.get(key, 0.0), now - step_start)
                        if last.variant == reference and last.stage == _COMPILE_STEP:
                            _reference_compile_s[request.task.source_hash] = max(
                                _reference_compile_s.get(request.task.source_hash, 0.0),
                                now - step_start)
                        step_start = now
                        silent_s = step_timeout_s(
                            message, reference, reference_s, self.timeout_s,
                            _reference_compile_s.get(request.task.source_hash, 0.0))
                    last = message
            # checked after every message too: a worker sending progress more often than the
            # poll would otherwise never meet its deadline or its memory limit
            if deadline is not None and now >= deadline or self._interrupted.is_set():
                trace_progress(request, f"{CUT_REASON}: killed", trace, worker)
                self.kill()
                self._replace_soon()
                self.cut = True
                return self._cut(request, last)
            if now - last_time > silent_s:
                trace_progress(request, f"no progress for {silent_s:.0f} s: killed", trace,
                               worker)
                self.kill()
                known = reference_s.get((last.stage, last.case_id))
                why = (f" ({reference}'s took {known:.2f} s)" if silent_s < self.timeout_s
                       and known is not None else "")
                return self._replaced(self._death(
                    request, last, Status.TIMEOUT, f"no progress for {silent_s:.0f} s "
                    f"during {last.stage} of case {last.case_id}{why}: killed"))
            if now - checked < 0.25:
                continue
            checked = now
            if self.process is not None and _rss_bytes(self.process.pid) > self.memory_limit:
                self.kill()
                return self._replaced(self._death(
                    request, last, Status.OOM, f"host memory over "
                    f"{self.memory_limit / 2**30:.1f} GiB during {last.stage} of case "
                    f"{last.case_id}: killed"))

    def _exit_reason(self) -> str:
        assert self.process is not None
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.returncode
        self.kill()
        if code is not None and code < 0:
            return f"worker killed by signal {signal.Signals(-code).name}"
        return f"worker exited with status {code}"

    def _cut(self, request: EvaluateRequest, last: Progress) -> Evaluation:
        """A request killed at its deadline (``cut_evaluation``)."""
        assert self.info is not None
        return cut_evaluation(request, self.info,
                              f"{CUT_REASON} during {last.stage} of case {last.case_id}: killed")

    def _death(self, request: EvaluateRequest, last: Progress, status: Status, reason: str) -> Evaluation:
        culprit = last.variant or request.variants[-1].name
        detail = self.log_tail()
        results = []
        for v in request.variants:
            if v.name == culprit:
                failure = Failure(status, reason, detail, last.case_id)
                results.append(VariantResult(v.name, v.hash, status, failure))
            else:
                failure = Failure(Status.SKIPPED, f"not evaluated: {culprit} {status.value} first")
                results.append(VariantResult(v.name, v.hash, Status.SKIPPED, failure))
        assert self.info is not None
        return Evaluation(request.task.name, tuple(results), self.info, (reason,))
