"""A candidate that raises, hangs or eats memory becomes a recorded failure; the run goes on."""

from pathlib import Path

import pytest

from tritonforge.model import Case, CaseRole, SpecCall, Status, Task, TensorSpec, Variant, content_hash
from tritonforge.runtime.worker_client import Worker
from tritonforge.runtime.protocol import EvaluateRequest

SRC = '''
import torch, triton, triton.language as tl

@triton.jit
def add1(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)

def entry(x):
    y = torch.empty_like(x)
    add1[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y
'''

TASK = Task("add1", SRC, ("entry",),
            (Case("c", CaseRole.CORRECTNESS, SpecCall("entry", (TensorSpec((100,)),))),), "test")


def _v(name, src):
    return Variant(name, src, content_hash(src))


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    w = Worker("cpu", tmp_path_factory.mktemp("w"), timeout_s=20, host_memory_limit_gb=3)
    w.start()
    yield w
    w.close()


def _evaluate(worker, name, src):
    ev = worker.evaluate(EvaluateRequest(TASK, (_v("original", SRC), _v(name, src)),
                                         verify=False, time=False))
    return ev.result(name)


def _still_works(worker):
    ev = worker.evaluate(EvaluateRequest(TASK, (_v("original", SRC),), verify=False, time=False))
    assert ev.results[0].status is Status.OK


def test_raising_candidate(worker):
    r = _evaluate(worker, "raises", SRC.replace("    return y", "    raise ValueError('boom')"))
    assert r.status is Status.RUNTIME_ERROR and "boom" in r.failure.reason
    _still_works(worker)


def test_hanging_candidate_is_killed(worker):
    r = _evaluate(worker, "hangs", SRC.replace("    y = torch.empty_like(x)", "    while True:\n        pass"))
    assert r.status is Status.TIMEOUT and "no progress" in r.failure.reason
    _still_works(worker)


def test_unbounded_allocation_is_killed(worker):
    hog = SRC.replace("    y = torch.empty_like(x)",
                      "    hoard = []\n    while True:\n        hoard.append(torch.ones(2**26))")
    r = _evaluate(worker, "hog", hog)
    assert r.status is Status.OOM, r
    _still_works(worker)


def test_import_error_is_recorded(worker):
    r = _evaluate(worker, "broken", SRC + "\nundefined_thing()\n")
    assert r.status is Status.IMPORT_ERROR and "undefined_thing" in r.failure.reason


def test_a_reference_that_breaks_the_cuda_context_leaves_its_candidate_unverified_not_ok(worker):
    """When the ORIGINAL hits an illegal memory access in a verification run, the candidate was
    never compared: it must not come back OK (an H100 run of 2026-11-23 saw exactly that)."""
    breaks = SRC.replace("    y = torch.empty_like(x)",
                         "    raise RuntimeError('CUDA error: an illegal memory access was encountered')")
    ev = worker.evaluate(EvaluateRequest(TASK, (_v("original", breaks), _v("candidate", SRC)),
                                         verify=True, time=False))
    assert ev.result("original").status is Status.CRASH
    cand = ev.result("candidate")
    assert cand.status is Status.SKIPPED and "not verified" in cand.failure.reason
    assert cand.failure.case_id == "c"                 # the case the original cannot run
    _still_works(worker)


def test_a_candidate_raising_inside_verification_names_its_case(worker):
    """The error reaches the worker through the verifier: the failure still names the case and
    seed (a crash with no case could not be checked against the original's own run)."""
    src = SRC.replace("def entry(x):\n", "_calls = [0]\n\ndef entry(x):\n"
                      "    _calls[0] += 1\n    if _calls[0] > 1:\n        raise ValueError('late boom')\n")
    ev = worker.evaluate(EvaluateRequest(TASK, (_v("original", SRC), _v("late", src)),
                                         verify=True, time=False))
    r = ev.result("late")
    assert r.status is Status.RUNTIME_ERROR and "late boom" in r.failure.reason
    assert r.failure.case_id == "c" and r.failure.seed is not None
    _still_works(worker)


def test_a_request_past_its_deadline_is_cut_not_judged(worker):
    """A record's cap ends a request still running (runtime.evaluator.Evaluator.time_left): the
    hung candidate is killed long before the worker's own no-progress limit (20 s here), every
    variant comes back SKIPPED naming no case (a cut says nothing of a case), and the next
    request runs on a fresh worker."""
    import time

    from tritonforge.runtime.worker_client import CUT_REASON

    hang = SRC.replace("    y = torch.empty_like(x)", "    while True:\n        pass")
    start = time.monotonic()
    ev = worker.evaluate(EvaluateRequest(TASK, (_v("original", SRC), _v("hangs", hang)),
                                         verify=False, time=False), deadline=start + 2.0)
    assert time.monotonic() - start < 10
    assert worker.cut
    for r in ev.results:
        assert r.status is Status.SKIPPED and CUT_REASON in r.failure.reason
        assert r.failure.case_id is None
    _still_works(worker)
    assert not worker.cut


def test_an_interrupt_from_another_thread_cuts_the_request_in_flight(worker):
    """A record that ends early cuts what its workers still run (``Worker.interrupt``, through
    ``Evaluator.abandon``): the hung candidate's request comes back cut within seconds though it
    has no deadline, and an interrupt of the idle worker afterwards changes nothing."""
    import threading
    import time

    from tritonforge.runtime.worker_client import CUT_REASON

    hang = SRC.replace("    y = torch.empty_like(x)", "    while True:\n        pass")
    timer = threading.Timer(1.5, worker.interrupt)
    start = time.monotonic()
    timer.start()
    ev = worker.evaluate(EvaluateRequest(TASK, (_v("original", SRC), _v("hangs", hang)),
                                         verify=False, time=False))
    assert time.monotonic() - start < 10
    assert worker.cut and all(CUT_REASON in r.failure.reason for r in ev.results)
    worker.interrupt()              # idle: nothing in flight to cut
    _still_works(worker)
    assert not worker.cut


def test_a_worker_chattering_progress_still_meets_its_deadline(tmp_path):
    """The deadline and the memory limit are checked after every message, not only when the
    worker is quiet for a poll: a stream of progress messages faster than the poll cannot carry
    a request past its deadline."""
    import os
    import subprocess
    import threading
    import time

    from tritonforge.model import DeviceInfo
    from tritonforge.runtime.protocol import Progress, send

    w = Worker("cpu", tmp_path / "w", timeout_s=60)
    w.process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    w.info = DeviceInfo("cpu", True)
    to_parent_r, to_parent_w = os.pipe()
    from_parent_r, from_parent_w = os.pipe()
    w._from_child, w._to_child = to_parent_r, from_parent_w
    stop = threading.Event()

    def chatter():          # 8 s at most: without the fix the test fails, it does not hang
        i, end = 0, time.monotonic() + 8
        while not stop.is_set() and time.monotonic() < end:
            try:
                send(to_parent_w, Progress("verify", "candidate", f"c{i % 7}"))
            except OSError:
                return
            i += 1
            time.sleep(0.02)

    drain = threading.Thread(target=lambda: [os.read(from_parent_r, 1 << 16)], daemon=True)
    drain.start()
    talker = threading.Thread(target=chatter, daemon=True)
    talker.start()
    start = time.monotonic()
    try:
        ev = w.evaluate(EvaluateRequest(TASK, (_v("original", SRC),), verify=False, time=False),
                        deadline=start + 1.0)
        assert time.monotonic() - start < 5
        assert w.cut and ev.results[0].status is Status.SKIPPED
    finally:
        stop.set()
        w.kill()
        for fd in (to_parent_w, from_parent_r):
            os.close(fd)


def test_a_killed_worker_slow_to_exit_is_reaped_in_the_background(tmp_path, monkeypatch):
    """``Worker.kill`` waits ``KILL_WAIT_S`` at most for the process to exit, then leaves it to a
    reaper thread, which ``wait_for_dying`` joins (a lane does, between records)."""
    import subprocess
    import threading
    import time

    import tritonforge.runtime.worker_client as wc

    monkeypatch.setattr(wc, "KILL_WAIT_S", 0.2)

    class SlowToExit:
        """A killed process whose teardown takes 1.5 s (as one holding many GiB can)."""
        pid, returncode = 2**22 + 7, None

        def __init__(self):
            self.killed = threading.Event()

        def poll(self):
            return self.returncode

        def kill(self):
            self.killed.set()

        def wait(self, timeout=None):
            if timeout is not None and timeout < 1.5:
                time.sleep(timeout)
                raise subprocess.TimeoutExpired("worker", timeout)
            time.sleep(1.5)
            self.returncode = -9
            return -9

    w = Worker("cpu", tmp_path / "w")
    w.process = proc = SlowToExit()
    start = time.monotonic()
    w.kill()
    assert proc.killed.is_set()
    assert time.monotonic() - start < wc.KILL_WAIT_S + 1     # the caller did not wait it out
    assert proc.returncode is None
    dying, waited = wc.wait_for_dying(10.0)
    assert dying == 1 and 0.5 < waited < 10 and proc.returncode == -9
    assert wc.wait_for_dying(1.0)[0] == 0          # nothing left to wait for


def test_a_run_silent_far_longer_than_the_originals_is_killed_before_the_timeout(tmp_path,
                                                                                 monkeypatch):
    """The original's run of case c takes milliseconds; a candidate that hangs there is killed
    at the step's floor (lowered here to 2 s), long before the worker's 60 s timeout."""
    import time as _time
    import tritonforge.runtime.worker_client as wc
    monkeypatch.setattr(wc, "STEP_TIMEOUT_FLOOR_S", 2.0)
    w = Worker("cpu", tmp_path / "w", timeout_s=60, host_memory_limit_gb=3)
    w.start()
    try:
        hang = SRC.replace("    y = torch.empty_like(x)", "    while True:\n        pass")
        began = _time.monotonic()
        ev = w.evaluate(EvaluateRequest(TASK, (_v("original", SRC), _v("hangs", hang)),
                                        verify=False, time=False))
        r = ev.result("hangs")
        assert r.status is Status.TIMEOUT and "during run of case c" in r.failure.reason, r
        assert "original's took" in r.failure.reason
        assert _time.monotonic() - began < 30
        _still_works(w)
    finally:
        w.close()


def test_the_silence_a_step_may_keep():
    from tritonforge.runtime.protocol import Progress
    from tritonforge.runtime.worker_client import (
        STEP_TIMEOUT_FACTOR, STEP_TIMEOUT_FLOOR_S, step_timeout_s,
    )
    known = {("run", "c"): 0.01, ("run", "big"): 5.0}
    run = Progress("run", "cand", "c")
    assert step_timeout_s(run, "original", known, 180.0) == STEP_TIMEOUT_FLOOR_S
    assert step_timeout_s(Progress("run", "cand", "big"), "original", known, 180.0) == \
        min(180.0, STEP_TIMEOUT_FACTOR * 5.0)
    assert step_timeout_s(Progress("run", "cand", "big"), "original", known, 60.0) == 60.0
    # the reference itself, a case it has not run, and other stages keep the worker's timeout
    assert step_timeout_s(Progress("run", "original", "c"), "original", known, 180.0) == 180.0
    assert step_timeout_s(Progress("run", "cand", "other"), "original", known, 180.0) == 180.0
    assert step_timeout_s(Progress("compile", "cand", "c"), "original", known, 180.0) == 180.0
    # a candidate's kernel compiling at its first run of a case: at most COMPILE_STEP_LIMIT_S,
    # whatever the reference's run took; the reference's own compile keeps the worker's timeout
    from tritonforge.runtime.worker_client import COMPILE_STEP_LIMIT_S
    first = Progress("compile at first run", "cand", "big")
    assert step_timeout_s(first, "original", known, 180.0) == COMPILE_STEP_LIMIT_S < 180.0
    assert step_timeout_s(first, "original", known, 30.0) == 30.0
    assert step_timeout_s(Progress("compile at first run", "original", "big"), "original", known,
                          180.0) == 180.0
    # where the original itself was seen compiling slowly, a multiple of its slowest compile
    from tritonforge.runtime.worker_client import COMPILE_STEP_FACTOR
    assert step_timeout_s(first, "original", known, 180.0, 30.0) == COMPILE_STEP_FACTOR * 30.0
    assert step_timeout_s(first, "original", known, 180.0, 2.0) == COMPILE_STEP_LIMIT_S


def test_a_compile_inside_a_run_is_reported_as_a_compile():
    """Triton calls ``jit_cache_hook`` before each compile: inside ``compiles_reported`` the
    worker tells the driver (its silence allowance is then a compile's, not the reference's
    run's), the hook lets the compile go on (a falsy answer), and leaving restores the hook."""
    import triton
    from tritonforge.runtime.quick_autotune import compiles_reported
    seen = []
    runtime = triton.knobs.runtime
    before = runtime.jit_cache_hook
    with compiles_reported(seen.append):
        hook = runtime.jit_cache_hook
        answer = hook(key="k", repr="r", fn=type("F", (), {"name": "add1"})(), compile={},
                      is_manual_warmup=False, already_compiled=False)
    assert seen == ["add1"] and not answer
    assert runtime.jit_cache_hook is before
    # a hook already there is still asked, and its answer stands
    runtime.jit_cache_hook = lambda **kw: True
    try:
        with compiles_reported(seen.append):
            assert runtime.jit_cache_hook(fn=None, key="k") is True
    finally:
        runtime.jit_cache_hook = before
    assert seen == ["add1", ""]
