"""Generated cases whose stability was never checked (the validation budget ran out first) are
dropped, not kept: a case the original does not reproduce would reject every candidate."""

from pathlib import Path

import tritonforge.testgen.generate as generate
from tritonforge.config import Settings
from tritonforge.tasks.loader import task_from_file
from tritonforge.testgen.augment import augment_task
from tritonforge.testgen.validate import Validation

SIN = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
SPEC = 'entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [257] }]\n'


def _augment(tmp_path, monkeypatch, unchecked: bool):
    def check_stable(evaluator, task, case_ids, *, deadline=None):
        return Validation(tuple(case_ids), (), unchecked=tuple(case_ids) if unchecked else ())

    monkeypatch.setattr(generate, "check_stable", check_stable)
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    task = task_from_file(SIN, spec)
    return augment_task(task, Settings(device="cpu", run_dir=str(tmp_path)), tmp_path / "aug",
                        device="cpu")


def test_unchecked_generated_cases_are_dropped(tmp_path, monkeypatch):
    checked = _augment(tmp_path / "a", monkeypatch, unchecked=False)
    assert checked.added, checked.notes               # the sin example gains cases when checked
    dropped = _augment(tmp_path / "b", monkeypatch, unchecked=True)
    assert not dropped.added
    assert any(d.kind == "not_run" and "stability was not checked" in d.reason
               for d in dropped.dropped)
