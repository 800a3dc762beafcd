"""A GEMM record tested by one 128x64x128 call: its own test accepts three wrong rewrites; with
generated cases (odd sizes that leave a partial K tile, a large odd case) each is rejected, and
the original and an honest rewrite still pass. CPU interpreter."""

from pathlib import Path

import pytest

from gemm_kernels import module as _module, record_source
from tritonforge.config import Settings
from tritonforge.model import CaseRole, Variant, content_hash
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.tasks.tritonbench import Record, task_from_record
from tritonforge.testgen.augment import augment_task

pytestmark = pytest.mark.slow        # minutes on the CPU interpreter

WRONG = ("k_tail_drop", "fp16_accumulator", "library_above_512")
RIGHT = ("copy", "honest_loop")


def module(name: str) -> str:
    """The kernel module of a variant; ``copy`` is the original under another name."""
    return _module("original" if name == "copy" else name)


def _settings(tmp: Path) -> Settings:
    return Settings(device="cpu", run_dir=str(tmp), case_timeout_s=600)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """Verdicts of every variant on the record's own cases and on the augmented task."""
    tmp = tmp_path_factory.mktemp("gemm")
    task = task_from_record(Record("gemm_sample", record_source(), "", "", "", "", 0), "",
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
            out[label] = {v.name: evaluation.result(v.name).verdict for v in variants}
    return augmented, out


def test_generated_cases_are_added_and_marked(verdicts):
    augmented, _ = verdicts
    gen = augmented.task.generated_cases
    assert gen and all(c.role is CaseRole.CORRECTNESS and c.id.startswith("gen-") for c in gen)
    # K (64 in the test, a multiple of BLOCK_K = 32) takes a value that is not
    ks = {c.recipe.args[0].shape[1] for c in gen}
    assert any(k % 32 for k in ks), ks
    # one case above the library rewrite's threshold (M >= 512)
    assert any(c.recipe.args[0].shape[0] >= 512 for c in gen)
    assert {"gen-var-large", "gen-var-sparse", "gen-var-strided"} <= set(augmented.added)


def test_the_records_own_test_accepts_every_wrong_rewrite(verdicts):
    _, out = verdicts
    for name in WRONG + RIGHT:
        assert out["own"][name].passed, (name, out["own"][name].summary())


@pytest.mark.parametrize("name", WRONG)
def test_generated_cases_reject_the_wrong_rewrites(verdicts, name):
    _, out = verdicts
    assert not out["generated"][name].passed


def test_generated_cases_accept_the_original_and_an_honest_rewrite(verdicts):
    _, out = verdicts
    for name in RIGHT:
        assert out["generated"][name].passed, (name, out["generated"][name].summary())
