"""$TRITONFORGE_GPU_LOCK: processes sharing one GPU take turns for timed runs."""

import subprocess
import sys

from tritonforge.runtime.service import GPU_LOCK_ENV, gpu_timing_lock

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
    with gpu_timing_lock(True):
        assert _other_process_sees(lock) == "held"
    assert _other_process_sees(lock) == "free"


def test_untimed_runs_and_an_unset_variable_lock_nothing(tmp_path, monkeypatch):
    lock = tmp_path / "gpu.lock"
    monkeypatch.setenv(GPU_LOCK_ENV, str(lock))
    with gpu_timing_lock(False):
        assert not lock.exists()
    monkeypatch.delenv(GPU_LOCK_ENV)
    with gpu_timing_lock(True):
        assert not lock.exists()
