"""A timed request whose candidates all failed verification times nothing: the reference alone
judges nothing (runtime.worker_evaluate). A request of the reference alone (a baseline) is still timed."""

from pathlib import Path

from tritonforge.config import Settings
from tritonforge.model import Status, Variant
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
SPEC = ('entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [300] }]\n'
        '[[case]]\nid = "p"\nrole = "performance"\nargs = [{ tensor = [700] }]\n')


def _task(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    return task_from_file(EXAMPLE, spec)


def test_a_failed_candidate_leaves_the_reference_untimed(tmp_path):
    task = _task(tmp_path)
    wrong = task.source.replace("tl.sin(x)", "tl.cos(x)")
    assert wrong != task.source
    with Evaluator(Settings(device="cpu"), tmp_path / "w", device="cpu") as ev:
        evaluation = ev.evaluate(task, (original_variant(task), Variant("bad", wrong, "bad")),
                                 purpose="t", verify=True, time=True, use_store=False)
    assert evaluation.result("bad").status is Status.MISMATCH
    assert evaluation.result("original").timings == ()


def test_a_passing_candidate_and_a_reference_alone_are_timed(tmp_path):
    task = _task(tmp_path)
    same = task.source + "\n# a comment\n"
    with Evaluator(Settings(device="cpu"), tmp_path / "w", device="cpu") as ev:
        pair = ev.evaluate(task, (original_variant(task), Variant("same", same, "same")),
                           purpose="t", verify=True, time=True, use_store=False)
        alone = ev.evaluate(task, (original_variant(task),), purpose="baseline", verify=False,
                            time=True, use_store=False)
    assert pair.result("same").status is Status.OK
    assert [t.case_id for t in pair.result("original").timings] == ["p"]
    assert [t.case_id for t in pair.result("same").timings] == ["p"]
    assert [t.case_id for t in alone.result("original").timings] == ["p"]


def test_a_baseline_says_what_one_run_of_each_case_costs(tmp_path):
    """``VariantResult.run_s``: each case's one run before any check, the price the search's
    verification tiers weigh (search.cases.costly_cases); it comes back across the worker
    boundary."""
    task = _task(tmp_path)
    with Evaluator(Settings(device="cpu"), tmp_path / "w", device="cpu") as ev:
        alone = ev.evaluate(task, (original_variant(task),), purpose="baseline", verify=False,
                            time=True, use_store=False)
    runs = dict(alone.result("original").run_s)
    assert set(runs) == {"c", "p"} and all(0.0 < s < 60.0 for s in runs.values())
