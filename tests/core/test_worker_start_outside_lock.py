"""A request's worker starts before the request takes the GPU lock (runtime.evaluator).

A worker's start is a Python process importing torch and creating a CUDA context: seconds, and
no GPU work another process's timing could see. Started inside the lock, a profile's fresh
worker held the exclusive lock 11.5 s and every verification of its record waited (four H100s,
2026-11-27)."""

import contextlib
from pathlib import Path
from types import SimpleNamespace

from tritonforge.config import Settings
from tritonforge.runtime import evaluator as evaluator_module
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src/tritonforge/examples/vector_add.py"


def _traced(monkeypatch, tmp_path, mode):
    events = []

    @contextlib.contextmanager
    def lock(m, settings=None):
        events.append(f"lock {m}")
        yield
        events.append("unlock")

    monkeypatch.setattr(evaluator_module, "gpu_lock", lock)
    monkeypatch.setattr(evaluator_module, "lock_mode", lambda gpu, timed, settings=None: mode)
    monkeypatch.setattr(evaluator_module, "gpu_shared_with_other_processes", lambda *a: False)
    ev = Evaluator(Settings(device="cpu"), tmp_path / "w", device="cuda")
    ev.worker = SimpleNamespace(ensure_started=lambda: events.append("start"),
                                evaluate=lambda request, deadline=None: events.append("evaluate"),
                                cut=False, close=lambda: None)
    ev._merge_rejections = lambda task, variants, evaluation, rejected: evaluation
    task = task_from_file(EXAMPLE)
    ev.evaluate(task, (original_variant(task),), purpose="profile", verify=False, time=True,
                use_store=False)
    return events


def test_the_worker_starts_before_the_lock_is_taken(monkeypatch, tmp_path):
    assert _traced(monkeypatch, tmp_path, "exclusive") == ["start", "lock exclusive", "evaluate",
                                                           "unlock"]
    assert _traced(monkeypatch, tmp_path, "shared") == ["start", "lock shared", "evaluate", "unlock"]


def test_without_a_lock_the_worker_starts_with_its_request(monkeypatch, tmp_path):
    assert _traced(monkeypatch, tmp_path, None) == ["lock None", "evaluate", "unlock"]
