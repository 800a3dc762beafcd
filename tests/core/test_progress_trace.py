"""$TRITONFORGE_PROGRESS_LOG: a timeline of every request's stages, written by the driver."""

from __future__ import annotations

import re
from pathlib import Path

from tritonforge.config import Settings
from tritonforge.model import CaseRole
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src/tritonforge/examples/vector_add.py"


def _one_small_case(task) -> tuple[str, ...]:
    return (next(c.id for c in task.cases if c.role is CaseRole.CORRECTNESS),)


def test_a_request_leaves_its_stages_in_the_progress_log(tmp_path, monkeypatch):
    trace = tmp_path / "progress.log"
    monkeypatch.setenv("TRITONFORGE_PROGRESS_LOG", str(trace))
    task = task_from_file(EXAMPLE)
    with Evaluator(Settings(device="cpu"), tmp_path / "w", device="cpu") as ev:
        ev.evaluate(task, (original_variant(task),), purpose="t", verify=False, time=False,
                    case_ids=_one_small_case(task))
    lines = trace.read_text().splitlines()
    stages = [ln.split(": ", 1)[1] for ln in lines]
    assert stages[0] == "sent" and stages[-1] == "done", lines
    assert any(s.startswith("import original") for s in stages)
    assert any(s.startswith("run original") for s in stages)
    assert all(task.name in ln for ln in lines)
    # milliseconds, and the worker's process on every line the worker's request wrote
    assert re.match(r"^\d\d:\d\d:\d\d\.\d{3} pid \d+/w\d+ ", lines[0]), lines[0]
    assert len({ln.split()[2] for ln in lines}) == 1


def test_no_trace_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITONFORGE_PROGRESS_LOG", raising=False)
    monkeypatch.chdir(tmp_path)
    task = task_from_file(EXAMPLE)
    with Evaluator(Settings(device="cpu"), tmp_path / "w", device="cpu") as ev:
        ev.evaluate(task, (original_variant(task),), purpose="t", verify=False, time=False,
                    case_ids=_one_small_case(task))
    assert not list(tmp_path.glob("*.log"))
