"""A worker whose process dies (a crash, a cut at the deadline) starts its next process at once,
in the background, when asked to (``Worker(respawn=True)``): the next request finds it ready
instead of waiting out a Python + torch + CUDA start (8-12 s a record on an H100 pass)."""

import time

from tritonforge.model import Case, CaseRole, SpecCall, Status, Task, TensorSpec, Variant, content_hash
from tritonforge.runtime.protocol import EvaluateRequest
from tritonforge.runtime.worker_client import Worker

SRC = '''
import torch

def entry(x):
    return x + 1
'''
CRASH = SRC.replace("    return x + 1", "    import os\n    os._exit(3)")
HANG = SRC.replace("    return x + 1", "    import time\n    time.sleep(60)")
TASK = Task("plus1", SRC, ("entry",),
            (Case("c", CaseRole.CORRECTNESS, SpecCall("entry", (TensorSpec((8,)),))),), "test")


def _request(*sources):
    names = ["original"] + [f"c{i}" for i in range(len(sources) - 1)]
    return EvaluateRequest(TASK, tuple(Variant(n, s, content_hash(s)) for n, s in zip(names, sources)),
                           verify=False, time=False)


def _wait_alive(worker, seconds=60.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if worker.alive() and worker._spawner is None or \
                worker._spawner is not None and not worker._spawner.is_alive() and worker.alive():
            return True
        time.sleep(0.05)
    return False


def test_a_crashed_process_is_replaced_before_the_next_request(tmp_path):
    worker = Worker("cpu", tmp_path / "w", timeout_s=30, respawn=True)
    try:
        worker.start()
        first = worker.process.pid
        got = worker.evaluate(_request(SRC, CRASH))
        assert got.result("c0").status is Status.CRASH
        assert worker._spawner is not None          # started at once, not at the next request
        assert _wait_alive(worker)
        assert worker.process.pid != first and worker.restarts == 1
        pid = worker.process.pid
        again = worker.evaluate(_request(SRC))
        assert again.results[0].status is Status.OK and worker.process.pid == pid
    finally:
        worker.close()
    assert not worker.alive() and worker._spawner is None


def test_a_cut_request_leaves_a_fresh_process_behind(tmp_path):
    worker = Worker("cpu", tmp_path / "w", timeout_s=30, respawn=True)
    try:
        worker.start()
        got = worker.evaluate(_request(SRC, HANG), deadline=time.monotonic() + 8)
        assert worker.cut and got.result("c0").status is Status.SKIPPED
        assert _wait_alive(worker)
        assert worker.evaluate(_request(SRC)).results[0].status is Status.OK
    finally:
        worker.close()


def test_without_respawn_the_next_request_starts_the_process(tmp_path):
    worker = Worker("cpu", tmp_path / "w", timeout_s=30)
    try:
        worker.start()
        worker.evaluate(_request(SRC, CRASH))
        assert worker._spawner is None and not worker.alive()
        assert worker.evaluate(_request(SRC)).results[0].status is Status.OK
        assert worker.restarts == 1
    finally:
        worker.close()


def test_closing_while_the_replacement_starts_leaves_no_process(tmp_path):
    worker = Worker("cpu", tmp_path / "w", timeout_s=30, respawn=True)
    worker.start()
    worker.evaluate(_request(SRC, CRASH))
    worker.close()                     # at once: the replacement may still be importing torch
    assert worker._spawner is None and not worker.alive()
