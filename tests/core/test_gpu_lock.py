"""$TRITONFORGE_GPU_LOCK: processes sharing one GPU take turns for timed runs (and, with the
scope 'all', keep untimed runs out of them)."""

import os
import subprocess
import sys
import threading
import time

import tritonforge.compose as compose
from tritonforge.compose import OptimizeSession, SessionOptions
from tritonforge.config import Settings
from tritonforge.runtime.gpu_lock import (
    GPU_LOCK_ENV, GPU_LOCK_SCOPE_ENV, gpu_blocked_s, gpu_lock, gpu_lock_covers_all,
    gpu_shared_with_other_processes, lock_mode, lock_one_gpu,
)

PROBE = ("import fcntl, sys\n"
         "f = open(sys.argv[1], 'a')\n"
         "try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('free')\n"
         "except BlockingIOError:\n    print('held')\n")


def _other_process_sees(path) -> str:
    return subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_timed_runs_hold_the_lock_file_and_release_it(tmp_path, monkeypatch):
    lock = tmp_path / "gpu.lock"
    monkeypatch.setenv(GPU_LOCK_ENV, str(lock))
    with gpu_lock("exclusive"):
        assert _other_process_sees(lock) == "held"
    assert _other_process_sees(lock) == "free"


def test_untimed_runs_and_an_unset_variable_lock_nothing(tmp_path, monkeypatch):
    lock = tmp_path / "gpu.lock"
    monkeypatch.setenv(GPU_LOCK_ENV, str(lock))
    with gpu_lock(None):
        assert not lock.exists()
    monkeypatch.delenv(GPU_LOCK_ENV)
    with gpu_lock("exclusive"):
        assert not lock.exists()


PROBE_SHARED = PROBE.replace("LOCK_EX", "LOCK_SH")


def _other_process_may_share(path) -> str:
    return subprocess.run([sys.executable, "-c", PROBE_SHARED, str(path)], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_lock_mode_shares_untimed_gpu_runs_only_when_the_scope_is_all(tmp_path, monkeypatch):
    monkeypatch.setenv(GPU_LOCK_ENV, str(tmp_path / "gpu.lock"))
    monkeypatch.delenv(GPU_LOCK_SCOPE_ENV, raising=False)
    assert lock_mode(True, timed=True) == "exclusive"
    assert lock_mode(True, timed=False) is None          # test generation: untimed work overlaps
    assert lock_mode(False, timed=True) is None          # the interpreter: no GPU to share
    monkeypatch.setenv(GPU_LOCK_SCOPE_ENV, "all")
    assert lock_mode(True, timed=False) == "shared"
    assert lock_mode(False, timed=False) is None


def test_shared_holders_coexist_but_exclude_a_timer(tmp_path, monkeypatch):
    lock = tmp_path / "gpu.lock"
    monkeypatch.setenv(GPU_LOCK_ENV, str(lock))
    with gpu_lock("shared"):
        assert _other_process_may_share(lock) == "free"
        assert _other_process_sees(lock) == "held"       # a timer must wait
    with gpu_lock("exclusive"):
        assert _other_process_may_share(lock) == "held"  # a verification must wait


def test_a_waiting_timer_goes_before_later_shared_runs(tmp_path, monkeypatch):
    """Without the turnstile a stream of verifications could keep the timer out for ever."""
    monkeypatch.setenv(GPU_LOCK_ENV, str(tmp_path / "gpu.lock"))
    order, release_first = [], threading.Event()

    def hold(mode, name, until=None):
        with gpu_lock(mode):
            order.append(name)
            if until is not None:
                until.wait(10)

    first = threading.Thread(target=hold, args=("shared", "first reader", release_first))
    first.start()
    while not order:
        time.sleep(0.01)
    timer = threading.Thread(target=hold, args=("exclusive", "timer"))
    timer.start()
    time.sleep(0.3)                                      # the timer now waits on the reader
    late = threading.Thread(target=hold, args=("shared", "late reader"))
    late.start()
    time.sleep(0.3)
    assert order == ["first reader"]                     # the late reader queues behind the timer
    release_first.set()
    for t in (first, timer, late):
        t.join(10)
    assert order == ["first reader", "timer", "late reader"]


def test_nested_use_in_one_thread_does_not_deadlock(tmp_path, monkeypatch):
    monkeypatch.setenv(GPU_LOCK_ENV, str(tmp_path / "gpu.lock"))
    with gpu_lock("exclusive"):
        with gpu_lock("exclusive"):
            pass
        assert _other_process_sees(tmp_path / "gpu.lock") == "held"
    assert _other_process_sees(tmp_path / "gpu.lock") == "free"


HOLDER = ("import fcntl, sys, time\n"
          "f = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('holding', flush=True)\n"
          "time.sleep(float(sys.argv[2]))\n")


def test_time_queued_behind_another_process_is_counted_as_blocked(tmp_path, monkeypatch):
    """The optimizer's budget clock leaves out what the shards' queueing costs."""
    lock = tmp_path / "gpu.lock"
    monkeypatch.setenv(GPU_LOCK_ENV, str(lock))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), "0.8"], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline().strip() == "holding"
    before = gpu_blocked_s()
    with gpu_lock("exclusive"):
        waited = gpu_blocked_s() - before
    holder.wait(10)
    assert 0.3 < waited < 5.0
    with gpu_lock("exclusive"):                          # nobody else: nothing blocked
        pass
    assert gpu_blocked_s() - before - waited < 0.1


def test_waiting_while_a_sibling_thread_holds_the_lock_is_not_blocked(tmp_path, monkeypatch):
    monkeypatch.setenv(GPU_LOCK_ENV, str(tmp_path / "gpu.lock"))
    started, release = threading.Event(), threading.Event()

    def sibling():
        with gpu_lock("exclusive"):
            started.set()
            release.wait(10)

    t = threading.Thread(target=sibling)
    t.start()
    started.wait(10)
    before = gpu_blocked_s()
    threading.Timer(0.5, release.set).start()
    with gpu_lock("shared"):                             # waits 0.5 s on its own process
        pass
    t.join(10)
    assert gpu_blocked_s() - before < 0.1


def test_a_session_on_a_gpu_takes_a_lock_of_its_own_unless_one_is_set(tmp_path, monkeypatch):
    """lock_one_gpu: the session's workers share one GPU, so untimed runs take the lock shared
    and timing exclusive; a shard's or a user's lock stays; the process's own gives way to the
    next session's."""
    assert lock_one_gpu(tmp_path / "a" / "gpu.lock")
    assert os.environ[GPU_LOCK_ENV] == str(tmp_path / "a" / "gpu.lock")
    assert gpu_lock_covers_all() and lock_mode(True, False) == "shared"
    assert not gpu_shared_with_other_processes()        # no compile pass before each request
    with gpu_lock("exclusive"):
        assert _other_process_sees(tmp_path / "a" / "gpu.lock") == "held"
    assert lock_one_gpu(tmp_path / "b" / "gpu.lock")           # its own: the next session's
    assert os.environ[GPU_LOCK_ENV] == str(tmp_path / "b" / "gpu.lock")
    monkeypatch.setenv(GPU_LOCK_ENV, str(tmp_path / "shard.lock"))
    monkeypatch.setenv(GPU_LOCK_SCOPE_ENV, "all")
    assert not lock_one_gpu(tmp_path / "c" / "gpu.lock")       # a shard's: kept
    assert gpu_shared_with_other_processes()
    assert os.environ[GPU_LOCK_ENV] == str(tmp_path / "shard.lock")


def test_an_optimize_session_locks_its_gpu_and_not_the_interpreter(tmp_path, monkeypatch):
    monkeypatch.setattr(compose, "Evaluator", lambda *a, **k: object())
    monkeypatch.setattr(compose, "PrestartedEvaluators", lambda factory: object())
    OptimizeSession(Settings(), None, SessionOptions(work_dir=str(tmp_path / "cpu")), device="cpu")
    assert GPU_LOCK_ENV not in os.environ
    OptimizeSession(Settings(), None, SessionOptions(work_dir=str(tmp_path / "gpu")), device="cuda")
    assert os.environ[GPU_LOCK_ENV] == str(tmp_path / "gpu" / "gpu.lock")
