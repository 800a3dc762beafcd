"""The entry points' hook (testgen.augment.with_generated_cases): what it tells a progress sink
and what budget it gives the augmentation. A front end's sink takes ``ProgressEvent``s only."""

from dataclasses import replace

from tritonforge.config import Settings
from tritonforge.model import Task
from tritonforge.model.progress import ProgressEvent
from tritonforge.testgen import augment


def test_the_hook_reports_an_event_and_passes_its_budget(monkeypatch, tmp_path):
    seen = {}

    def fake_augment(task, settings, work_dir, *, options, device=None, evaluator=None):
        seen["budget"] = options.budget_s
        return augment.Augmented(replace(task, name="t2"), ("gen-a", "gen-b"), seconds=1.5)
    monkeypatch.setattr(augment, "augment_task", fake_augment)
    events = []
    settings = Settings(device="cpu", generated_cases="on", generated_cases_budget_s=300)
    task = Task("t", "", ("f",), (), "file")
    out = augment.with_generated_cases(task, settings, tmp_path, None, events.append, budget_s=30)
    assert out.name == "t2" and seen["budget"] == 30
    assert len(events) == 1 and isinstance(events[0], ProgressEvent)
    assert events[0].phase == "cases" and "2 generated case(s)" in events[0].message
    augment.with_generated_cases(task, settings, tmp_path, None, None)   # no sink: no error
    assert seen["budget"] == 300


def test_off_leaves_the_task_alone_and_says_nothing(tmp_path):
    events = []
    task = Task("t", "", ("f",), (), "file")
    settings = Settings(device="cpu", generated_cases="off")
    assert augment.with_generated_cases(task, settings, tmp_path, None, events.append) is task
    assert events == []
