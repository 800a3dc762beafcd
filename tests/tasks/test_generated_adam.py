"""An in-place Adam record whose test asserts ``is_cuda`` and compares only the parameters: on the
CPU the shim lets its test run; generated cases (which compare every argument the call writes,
and draw exact-zero gradients) reject a step that skips the second-moment update and one that
skips zero gradients, and accept the original and an honest rewrite. CPU interpreter."""

from pathlib import Path

import pytest

from adam_kernels import module as _module, record_source
from tritonforge.config import Settings
from tritonforge.model import Variant, content_hash
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.tasks.tritonbench import Record, task_from_record
from tritonforge.testgen.augment import augment_task

pytestmark = pytest.mark.slow        # minutes on the CPU interpreter

WRONG = ("skips_state_update", "skips_zero_grads")
RIGHT = ("copy", "honest_block")


def module(name: str) -> str:
    """The kernel module of a variant; ``copy`` is the original under another name."""
    return _module("original" if name == "copy" else name)


def _settings(tmp: Path) -> Settings:
    return Settings(device="cpu", run_dir=str(tmp), case_timeout_s=600)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("adam")
    task = task_from_record(Record("adam_sample", record_source(), "", "", "", "", 0), "",
                            perf_count=0)
    augmented = augment_task(task, _settings(tmp), tmp / "aug", device="cpu")
    # named apart from the reference ("original"), and a copy: a candidate is another file
    variants = tuple(Variant(n, module(n) + "\n# candidate\n", content_hash(module(n) + "\n# candidate\n"))
                     for n in RIGHT + WRONG)
    out = {}
    with Evaluator(_settings(tmp), tmp / "eval", store=None, device="cpu") as ev:
        for label, t in (("own", task), ("generated", augmented.task)):
            ids = tuple(c.id for c in t.correctness_cases)
            evaluation = ev.evaluate(t, (original_variant(t),) + variants, purpose="test",
                                     case_ids=ids, verify=True, time=False, keep_going=True,
                                     use_store=False)
            out[label] = (evaluation.results[0], {v.name: evaluation.result(v.name).verdict
                                                  for v in variants})
    return augmented, out


def test_the_test_section_asserting_cuda_runs_on_the_cpu(verdicts):
    _, out = verdicts
    original, _ = out["own"]
    assert original.failure is None and not original.case_failures, original.case_failures


def test_generated_cases_include_exact_zero_gradients(verdicts):
    augmented, _ = verdicts
    sparse = [c for c in augmented.task.generated_cases if c.id.endswith("var-sparse")]
    assert sparse and any(getattr(a, "sparsity", 0) > 0 for a in sparse[0].recipe.args)


def test_the_records_own_test_accepts_both_wrong_rewrites(verdicts):
    _, out = verdicts
    for name in WRONG + RIGHT:
        assert out["own"][1][name].passed, (name, out["own"][1][name].summary())


@pytest.mark.parametrize("name", WRONG)
def test_generated_cases_reject_the_wrong_rewrites(verdicts, name):
    _, out = verdicts
    assert not out["generated"][1][name].passed


def test_generated_cases_accept_the_original_and_an_honest_rewrite(verdicts):
    _, out = verdicts
    for name in RIGHT:
        assert out["generated"][1][name].passed, (name, out["generated"][1][name].summary())
