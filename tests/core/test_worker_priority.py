"""Work that never times runs at a lower CPU priority (runtime.priority): a worker that never
times from its start, every compile thread; the timing worker keeps the driver's."""

from __future__ import annotations

import os
import threading

import pytest

from tritonforge.config import Settings
from tritonforge.runtime.evaluator import Evaluator
from tritonforge.runtime.priority import COMPILE_NICE_ENV, compile_thread_start, lower_priority

linux = pytest.mark.skipif(not hasattr(os, "getpriority"), reason="needs POSIX priorities")


def _in_thread(fn):
    """(nice before, nice after) of a fresh thread that runs ``fn``; Linux keeps a thread's own."""
    got = {}

    def run():
        tid = threading.get_native_id()
        got["before"] = os.getpriority(os.PRIO_PROCESS, tid)
        fn()
        got["after"] = os.getpriority(os.PRIO_PROCESS, tid)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return got["before"], got["after"]


@linux
def test_a_thread_lowers_its_own_priority_and_no_other():
    main = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    before, after = _in_thread(lambda: lower_priority(3))
    assert after == min(19, before + 3)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main
    assert _in_thread(lambda: lower_priority(0)) == (before, before)


@linux
def test_a_compile_thread_takes_the_priority_the_driver_passed(monkeypatch):
    monkeypatch.setenv(COMPILE_NICE_ENV, "4")
    before, after = _in_thread(compile_thread_start)
    assert after == min(19, before + 4)
    monkeypatch.setenv(COMPILE_NICE_ENV, "not a number")
    before, after = _in_thread(compile_thread_start)
    assert after == before


@linux
def test_only_a_worker_that_never_times_starts_at_a_lower_priority(tmp_path):
    settings = Settings(device="cpu", untimed_nice=5)
    own = os.getpriority(os.PRIO_PROCESS, 0)
    with Evaluator(settings, tmp_path / "timer", device="cpu") as timer, \
            Evaluator(settings, tmp_path / "pool", device="cpu", times=False) as pool:
        timer.worker.start()
        pool.worker.start()
        assert os.getpriority(os.PRIO_PROCESS, timer.worker.process.pid) == own
        assert os.getpriority(os.PRIO_PROCESS, pool.worker.process.pid) == min(19, own + 5)
        assert timer.worker.compile_nice == pool.worker.compile_nice == 5


def test_the_setting_is_a_nice_increment():
    from tritonforge.config import load_settings
    from tritonforge.errors import ConfigError

    with pytest.raises(ConfigError, match="untimed_nice"):
        load_settings(overrides={"untimed_nice": 25})
