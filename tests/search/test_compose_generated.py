"""The composition root makes generated cases on the pool's last worker while the original is
measured (a pool of two or more), and before the search with one worker; either way the
record's result says what they were."""

import threading
from dataclasses import replace

from tritonforge import compose
from tritonforge.compose import OptimizeSession, SessionOptions
from tritonforge.config import Settings
from tritonforge.store import RunStore
from tritonforge.testgen.augment import Augmented
from tritonforge.testgen.model import Dropped


def _fake_generation(calls):
    def generated_cases(task, settings, work_dir, evaluator, progress, budget_s):
        calls.append((evaluator, threading.current_thread().name))
        own = task.cases[0]
        made = replace(own, id="gen-300", generated=True, recipe=replace(
            own.recipe, args=(replace(own.recipe.args[0], shape=(300,)),)))
        return Augmented(replace(task, cases=task.cases + (made,)), ("gen-300",),
                         (Dropped("gen-odd", "the original fails"),), seconds=1.5)
    return generated_cases


def _run(sin_task, tmp_path, monkeypatch, jobs):
    calls = []
    monkeypatch.setattr(compose, "generated_cases", _fake_generation(calls))
    settings = Settings(device="cpu", max_rounds=1, patience=1, run_dir=str(tmp_path))
    with RunStore(tmp_path / "store.sqlite") as store, \
            OptimizeSession(settings, store, SessionOptions(jobs=jobs), device="cpu") as session:
        result = session.optimize(sin_task, 600.0)
        return result, calls, session.evaluators


def test_with_a_pool_they_are_made_on_its_last_worker_beside_the_baseline(sin_task, tmp_path,
                                                                          monkeypatch):
    result, calls, evaluators = _run(sin_task, tmp_path, monkeypatch, jobs=2)
    assert calls[0][0] is evaluators[-1] and calls[0][1].startswith("generated-cases")
    assert (result.generated.added, result.generated.dropped, result.generated.seconds) == (1, 1, 1.5)
    assert "cases" in [p.name for p in result.phases]     # the search waited for them


def test_with_one_worker_they_are_made_first(sin_task, tmp_path, monkeypatch):
    result, calls, evaluators = _run(sin_task, tmp_path, monkeypatch, jobs=1)
    assert calls[0][0] is evaluators[0] and not calls[0][1].startswith("generated-cases")
    assert result.generated.added == 1
    assert "cases" not in [p.name for p in result.phases]


def test_a_record_that_ends_early_cuts_the_generation_instead_of_waiting(sin_task, tmp_path,
                                                                        monkeypatch):
    """The original fails its baseline while its cases are still being made: their worker's
    request in flight is cut (``Worker.interrupt``), and the record ends at once."""
    killed = threading.Event()

    def slow_generation(task, settings, work_dir, evaluator, progress, budget_s):
        if not killed.wait(60):                 # made only when nobody gives up on them
            return Augmented(task, ())
        raise RuntimeError("request cut")

    monkeypatch.setattr(compose, "generated_cases", slow_generation)
    source = sin_task.source.replace("def sin_triton(", "def sin_triton(*_a, **_k):\n"
                                     "    raise ValueError('no')\n\n\ndef _unused_sin(")
    assert source != sin_task.source
    broken = replace(sin_task, source=source)
    settings = Settings(device="cpu", max_rounds=1, patience=1, run_dir=str(tmp_path))
    with RunStore(tmp_path / "store.sqlite") as store, \
            OptimizeSession(settings, store, SessionOptions(jobs=2), device="cpu") as session:
        last = session.evaluators[-1].worker
        interrupt = last.interrupt
        monkeypatch.setattr(last, "interrupt", lambda: (killed.set(), interrupt()))
        result = session.optimize(broken, 600.0)
    assert killed.is_set()
    assert result.stop_reason.startswith("no case left that the original runs")
    assert result.wall_s < 50 and result.generated.added == 0


def test_an_abandoned_generation_s_later_requests_come_back_unsent(sin_task, tmp_path,
                                                                    monkeypatch):
    """After the record ends, what the generation still asks its worker comes back SKIPPED at
    once (the record's cap passed), never run: on two H200s (20 s a record) a record whose
    baseline was cut at its cap ended at 114 s, the generation running on uncapped. Its worker
    has no cap again for the next record."""
    from tritonforge.model import Status
    from tritonforge.runtime.evaluator import original_variant
    from tritonforge.runtime.worker_client import CUT_REASON

    killed, asked = threading.Event(), []

    def generation_that_goes_on(task, settings, work_dir, evaluator, progress, budget_s):
        killed.wait(60)
        for _ in range(3):       # each would run the original's cases: seconds on the CPU
            got = evaluator.evaluate(task, (original_variant(task),), purpose="testgen",
                                     verify=False, time=False)
            asked.append(got.results[0])
        return Augmented(task, ())

    monkeypatch.setattr(compose, "generated_cases", generation_that_goes_on)
    source = sin_task.source.replace("def sin_triton(", "def sin_triton(*_a, **_k):\n"
                                     "    raise ValueError('no')\n\n\ndef _unused_sin(")
    broken = replace(sin_task, source=source)
    settings = Settings(device="cpu", max_rounds=1, patience=1, run_dir=str(tmp_path))
    with RunStore(tmp_path / "store.sqlite") as store, \
            OptimizeSession(settings, store, SessionOptions(jobs=2), device="cpu") as session:
        last = session.evaluators[-1]
        interrupt = last.worker.interrupt
        monkeypatch.setattr(last.worker, "interrupt", lambda: (killed.set(), interrupt()))
        result = session.optimize(broken, 600.0)
        assert last.time_left is None
    assert len(asked) == 3
    assert all(r.status is Status.SKIPPED and CUT_REASON in r.failure.reason for r in asked)
    assert result.wall_s < 50
