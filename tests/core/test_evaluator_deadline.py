"""A record's cap bounds every request (runtime.evaluator.Evaluator.time_left): a request cut
there is returned, never stored, so a resumed run asks it again."""

from __future__ import annotations

import time
from pathlib import Path

from tritonforge.config import Settings
from tritonforge.model import DeviceInfo, Evaluation, Failure, Status, VariantResult
from tritonforge.runtime.evaluator import (CUT_MARGIN_S, TIMING_END_MARGIN_S, Evaluator,
                                           original_variant)
from tritonforge.store import RunStore
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src/tritonforge/examples/vector_add.py"


class _Worker:
    """Answers each request at once, cut or not as told; records the deadline it was given."""

    def __init__(self, cut: bool):
        self.cut_next, self.cut, self.deadlines, self.info = cut, False, [], None

    def evaluate(self, request, deadline=None):
        self.deadlines.append(deadline)
        self.requests = getattr(self, "requests", []) + [request]
        self.cut = self.cut_next
        status = Status.SKIPPED if self.cut else Status.OK
        results = tuple(VariantResult(v.name, v.hash, status,
                                      Failure(status, "cut") if self.cut else None)
                        for v in request.variants)
        return Evaluation(request.task.name, results, DeviceInfo("cpu", True, "t", "t"))

    def close(self):
        pass


def _evaluator(tmp_path, cut: bool) -> tuple[Evaluator, RunStore]:
    store = RunStore(tmp_path / "store.sqlite")
    ev = Evaluator(Settings(device="cpu"), tmp_path / "w", store, device="cpu")
    ev.worker = _Worker(cut)
    return ev, store


def test_no_cap_means_no_deadline(tmp_path):
    ev, _ = _evaluator(tmp_path, cut=False)
    task = task_from_file(EXAMPLE)
    ev.evaluate(task, (original_variant(task),), purpose="verify", verify=False, time=False)
    assert ev.worker.deadlines == [None]


def test_the_deadline_is_the_cap_less_a_margin(tmp_path):
    ev, _ = _evaluator(tmp_path, cut=False)
    ev.time_left = lambda: 30.0
    task = task_from_file(EXAMPLE)
    before = time.monotonic()
    ev.evaluate(task, (original_variant(task),), purpose="verify", verify=False, time=False)
    (deadline,) = ev.worker.deadlines
    assert before + 30.0 - CUT_MARGIN_S - 1 < deadline <= time.monotonic() + 30.0 - CUT_MARGIN_S


def test_a_timed_request_is_told_to_end_its_timing_ahead_of_the_kill(tmp_path):
    """A timed request carries ``end_by`` (its cases' rounds past the minimum stop at their share
    of what is left: runtime.worker_evaluate.case_plan); an untimed one, or one with no cap,
    none."""
    ev, _ = _evaluator(tmp_path, cut=False)
    task = task_from_file(EXAMPLE)
    ev.evaluate(task, (original_variant(task),), purpose="time", verify=False, time=True)
    ev.time_left = lambda: 30.0
    ev.evaluate(task, (original_variant(task),), purpose="verify", verify=False, time=False)
    ev.evaluate(task, (original_variant(task),), purpose="time", verify=False, time=True,
                use_store=False)
    before = time.monotonic()
    ev.evaluate(task, (original_variant(task),), purpose="time", verify=False, time=True,
                use_store=False, end_within_s=10.0)
    no_cap, untimed, timed, within = ev.worker.requests
    assert no_cap.end_by is None and untimed.end_by is None
    assert timed.end_by == ev.worker.deadlines[2] - TIMING_END_MARGIN_S
    # ``end_within_s`` (a search round's room) bounds it sooner than the cap does
    assert before + 10.0 <= within.end_by <= time.monotonic() + 10.0


def test_a_request_with_no_time_left_is_never_sent(tmp_path):
    """Within the margin of the cap (or past it) a request comes back SKIPPED at once, unsent,
    and unstored: the worker is neither started nor killed for it."""
    from tritonforge.model import Status
    from tritonforge.runtime.worker_client import CUT_REASON

    ev, _ = _evaluator(tmp_path, cut=False)
    task = task_from_file(EXAMPLE)
    ev.time_left = lambda: CUT_MARGIN_S - 0.5
    got = ev.evaluate(task, (original_variant(task),), purpose="verify", verify=False, time=False)
    assert ev.worker.deadlines == []
    assert got.results[0].status is Status.SKIPPED and CUT_REASON in got.results[0].failure.reason
    ev.time_left = None
    ev.evaluate(task, (original_variant(task),), purpose="verify", verify=False, time=False)
    assert ev.worker.deadlines == [None]        # asked again: the unsent one was not stored


def test_a_cut_request_is_not_stored_and_a_whole_one_is(tmp_path):
    task = task_from_file(EXAMPLE)
    ev, store = _evaluator(tmp_path, cut=True)
    ev.time_left = lambda: 10.0
    ev.evaluate(task, (original_variant(task),), purpose="verify", verify=False, time=False)
    ev.worker.cut_next = False
    ev.evaluate(task, (original_variant(task),), purpose="verify", verify=False, time=False)
    assert len(ev.worker.deadlines) == 2        # the cut one was not reused: asked again
    ev.evaluate(task, (original_variant(task),), purpose="verify", verify=False, time=False)
    assert len(ev.worker.deadlines) == 2        # the whole one was stored and reused
