"""A timed request times its performance cases in the order it names them (runtime.worker_evaluate):
the search names its longest cases first, so a variant dropped as far slower on a quick case
has already been timed where it gains.

The plan here never drops a variant as far slower: on a loaded CI host the unchanged copy read
over 1.3x the original on the first case and was timed no further, which left the original
timed alone and so on nothing after it (CI, 2026-11-26)."""

import dataclasses
from pathlib import Path

from tritonforge.config import Settings
from tritonforge.model import Variant
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.runtime.timing_plan import timing_plan
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
SPEC = ('entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [300] }]\n'
        '[[case]]\nid = "small"\nrole = "performance"\nargs = [{ tensor = [64] }]\n'
        '[[case]]\nid = "mid"\nrole = "performance"\nargs = [{ tensor = [500] }]\n'
        '[[case]]\nid = "large"\nrole = "performance"\nargs = [{ tensor = [900] }]\n')


def _timed_order(tmp_path, case_ids):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    task = task_from_file(EXAMPLE, spec)
    same = task.source + "\n# a comment\n"
    settings = Settings(device="cpu")
    plan = dataclasses.replace(timing_plan(settings), abandon_slower=None)
    with Evaluator(settings, tmp_path / "w", device="cpu") as ev:
        evaluation = ev.evaluate(task, (original_variant(task), Variant("same", same, "same")),
                                 purpose="t", case_ids=case_ids, verify=True, time=True,
                                 plan=plan, use_store=False)
    return ([t.case_id for t in evaluation.result("original").timings],
            [t.case_id for t in evaluation.result("same").timings])


def test_the_cases_are_timed_in_the_order_the_request_names_them(tmp_path):
    reference, candidate = _timed_order(tmp_path, ("large", "small", "mid"))
    assert reference == candidate == ["large", "small", "mid"]


def test_without_named_cases_the_tasks_order_holds(tmp_path):
    reference, _ = _timed_order(tmp_path, None)
    assert reference == ["small", "mid", "large"]
