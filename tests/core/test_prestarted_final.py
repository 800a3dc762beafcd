"""Final-check evaluators made ahead of need (runtime.evaluator.PrestartedEvaluators): still a new
process per check, started before it is asked for, and none left running."""

from pathlib import Path

from tritonforge.config import Settings
from tritonforge.runtime.evaluator import Evaluator, PrestartedEvaluators


def _factory(tmp_path):
    made = []

    def make():
        ev = Evaluator(Settings(device="cpu"), tmp_path / f"final{len(made)}", None, device="cpu")
        made.append(ev)
        return ev
    return made, make


def test_a_prestarted_evaluator_comes_started_and_each_call_is_a_new_process(tmp_path):
    made, make = _factory(tmp_path)
    fresh = PrestartedEvaluators(make)
    fresh.prestart()
    fresh.prestart()                       # one waiting at a time
    assert len(made) == 1
    fresh.wait()                           # up, and still waiting to be asked for
    assert made[0].worker.alive() and fresh.prestarted == 0
    first = fresh()
    try:
        assert first.worker.alive() and first.worker.info is not None   # started before asked
        assert fresh.prestarted == 1
        second = fresh()                   # none waiting: a new one, started on first use
        try:
            assert second is not first and len(made) == 2
            assert not second.worker.alive()
        finally:
            second.close()
    finally:
        first.close()
        fresh.close()


def test_close_stops_a_worker_no_final_check_asked_for(tmp_path):
    made, make = _factory(tmp_path)
    fresh = PrestartedEvaluators(make)
    fresh.prestart()
    fresh.close()
    assert len(made) == 1 and not made[0].worker.alive()
    fresh.close()                          # twice is harmless


def test_a_worker_not_running_is_not_started_for_a_request_too_close_to_the_records_cap(
        tmp_path, monkeypatch):
    """On a GPU, a request whose worker is not running goes unsent (every variant SKIPPED, the
    cap's reason) where less than WORKER_START_S is left before its deadline: the start alone
    would end past the record's cap. A running worker still takes a request up to its deadline."""
    import contextlib
    from types import SimpleNamespace

    from tritonforge.model import Status, Variant
    from tritonforge.runtime import evaluator as evaluator_mod
    from tritonforge.runtime.evaluator import CUT_MARGIN_S, WORKER_START_S
    from tritonforge.tasks.loader import task_from_file
    example = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"

    monkeypatch.setattr(evaluator_mod, "lock_mode", lambda gpu, timed, settings=None: "shared")
    monkeypatch.setattr(evaluator_mod, "gpu_lock", lambda mode: contextlib.nullcontext())
    spec = tmp_path / "s.toml"
    spec.write_text('entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [300] }]\n')
    task = task_from_file(example, spec)
    ev = Evaluator(Settings(device="cpu"), tmp_path / "w", None, device="cpu")
    asked = []
    ev.worker = SimpleNamespace(alive=lambda: running, ensure_started=lambda: asked.append("start"),
                                evaluate=lambda request, deadline: asked.append("sent"),
                                info=None, cut=False)
    variants = (Variant("original", task.source, task.source_hash),)
    for running, left, sent in ((False, WORKER_START_S - 1, False), (True, 2.0, True)):
        asked.clear()
        ev.time_left = lambda left=left: left + CUT_MARGIN_S
        got = None
        try:
            got = ev.evaluate(task, variants, purpose="final", verify=False, time=False,
                              use_store=False)
        except Exception:  # noqa: BLE001 - the fake worker returns no evaluation
            pass
        assert ("sent" in asked) == sent, (running, asked)
        if not sent:
            assert asked == [] and got.results[0].status is Status.SKIPPED
    assert ev._room_to_start()             # running, 2 s before its deadline


class _FakeWorker:
    def __init__(self, quiet, gate):
        self.quiet_start, self.gate, self.started = quiet, gate, False

    def start(self):
        self.gate.wait(5)
        self.started = True

    def close(self):
        pass


def _fake_factory(quiet, gate):
    from types import SimpleNamespace
    made = []

    def make():
        ev = SimpleNamespace(device="cuda", worker=_FakeWorker(quiet, gate))
        ev.close = ev.worker.close
        made.append(ev)
        return ev
    return made, make


def test_quiet_starts_take_no_gpu_lock_are_not_waited_for_and_spares_are_kept_started(
        monkeypatch):
    """Final-check workers told the GPU (``Worker.quiet_start``: no CUDA before their first
    request) start with no GPU lock, ``QUIET_SPARES`` of them at once; ``wait()`` (before a
    timed call) returns while they are still starting; each handout starts one more, the
    oldest handed out first. A start that asks CUDA takes the lock, one at a time, is waited
    for, and starts no next one."""
    import contextlib
    import threading

    from tritonforge.runtime import evaluator as evaluator_mod
    from tritonforge.runtime.evaluator import QUIET_SPARES

    locks = []

    def lock(mode):
        locks.append(mode)
        return contextlib.nullcontext()
    monkeypatch.setattr(evaluator_mod, "gpu_lock", lock)
    gate = threading.Event()
    made, make = _fake_factory(True, gate)
    fresh = PrestartedEvaluators(make)
    fresh.prestart()
    assert len(made) == QUIET_SPARES >= 2
    fresh.wait()                           # returns though the starts are held at the gate
    assert not any(ev.worker.started for ev in made)
    gate.set()
    first = fresh()
    assert first is made[0] and first.worker.started and fresh.prestarted == 1
    assert len(made) == QUIET_SPARES + 1   # one more started as one is handed out
    second = fresh()
    assert second is made[1] and second.worker.started and len(made) == QUIET_SPARES + 2
    assert locks == []
    fresh.close()
    assert not fresh._waiting

    locks.clear()
    made, make = _fake_factory(False, threading.Event())
    fresh = PrestartedEvaluators(make)
    fresh.prestart()
    assert len(made) == 1
    threading.Timer(0.3, lambda: made[0].worker.gate.set()).start()
    fresh.wait()                           # waits for the CUDA start
    assert made[0].worker.started and len(locks) == 1
    first = fresh()
    assert first is made[0] and len(made) == 1      # no next one on a handout
    fresh.close()


def test_a_worker_told_its_gpu_reports_it_without_asking_cuda(monkeypatch):
    """``protocol.KNOWN_DEVICE_ENV`` carries the device another worker reported: the worker's
    ``_device_info`` returns it as given and never asks ``torch.cuda``; a Worker on a GPU with a
    known device starts quietly, one without (or on the CPU, where the known device is
    ignored) as before."""
    import torch

    from tritonforge.model import DeviceInfo
    from tritonforge.runtime import worker_main
    from tritonforge.runtime.protocol import KNOWN_DEVICE_ENV, device_from_env, device_to_env
    from tritonforge.runtime.worker_client import Worker

    h200 = DeviceInfo("NVIDIA H200", False, "2.11.0", "3.6.0", "9.0", 132)
    assert device_from_env(device_to_env(h200)) == h200

    def asked(*a, **k):
        raise AssertionError("torch.cuda asked")
    monkeypatch.setattr(torch.cuda, "is_available", asked)
    monkeypatch.setattr(torch.cuda, "get_device_properties", asked)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv(KNOWN_DEVICE_ENV, device_to_env(h200))
    assert worker_main._device_info() == h200
    assert Worker("cuda", Path("/tmp/x"), known_device=h200).quiet_start
    assert not Worker("cuda", Path("/tmp/x")).quiet_start
    assert Worker("cpu", Path("/tmp/x"), known_device=h200).known_device is None
