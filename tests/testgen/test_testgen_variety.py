"""Specs from `tritonforge testgen` alone catch kernels that the file's own test passes: a softmax
without the max-subtraction (large magnitudes) and one that ignores the column stride (non-
contiguous views); the original and an honest rewrite still pass. CPU interpreter."""

from pathlib import Path

import pytest

from tritonforge.config import Settings
from tritonforge.model import Variant, content_hash
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.tasks.loader import task_from_file
from tritonforge.testgen.generate import TestgenOptions, generate

HERE = Path(__file__).parent
SAMPLE = HERE / "sample_softmax.py"

REWRITES = {
    "copy": [],
    "exp2": [("e = tl.exp(x)", "e = tl.exp2(x * 1.4426950408889634)")],
    "no_max_subtraction": [("x = x - tl.max(x, axis=0)", "x = x")],
    "ignores_column_stride": [("cols * sxc", "cols")],
}
pytestmark = pytest.mark.slow        # minutes on the CPU interpreter

WRONG = ("no_max_subtraction", "ignores_column_stride")


def _variant(name: str) -> Variant:
    text = SAMPLE.read_text()
    for old, new in REWRITES[name]:
        assert old in text
        text = text.replace(old, new)
    text += "\n# candidate\n"
    return Variant(name, text, content_hash(text))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("softmax")
    settings = Settings(device="cpu", run_dir=str(tmp), case_timeout_s=300)
    options = TestgenOptions(perf=False, max_odd=1, max_traced=1, stability=False)
    result = generate(SAMPLE, settings, tmp / "gen", options=options)
    spec = tmp / "softmax.toml"
    spec.write_text(result.spec_text)
    task = task_from_file(SAMPLE, spec)
    variants = tuple(_variant(n) for n in REWRITES)
    with Evaluator(settings, tmp / "eval", store=None, device="cpu") as ev:
        traced = tuple(c.id for c in task.cases if c.id.startswith("trace-"))
        every = tuple(c.id for c in task.correctness_cases)
        out = {}
        for label, ids in (("traced", traced), ("spec", every)):
            evaluation = ev.evaluate(task, (original_variant(task),) + variants, purpose="test",
                                     case_ids=ids, verify=True, time=False, keep_going=True,
                                     use_store=False)
            out[label] = {v.name: evaluation.result(v.name).verdict for v in variants}
    return result, task, out


def test_the_spec_holds_large_values_and_strided_views(verdicts):
    result, task, _ = verdicts
    ids = {c.id for c in task.cases}
    assert {"var-large", "var-tiny", "var-sparse", "var-strided"} <= ids, result.dropped
    assert task.case("var-strided").recipe.args[0].layout == "strided"
    assert task.case("var-large").recipe.args[0].scale >= 1e3
    # sizes that divide no block: 100 columns (BLOCK 128) and 48 rows grow to odd values
    assert all(d % 2 for d in task.case("var-large").recipe.args[0].shape)


def test_the_files_own_calls_accept_every_rewrite(verdicts):
    _, _, out = verdicts
    for name in REWRITES:
        assert out["traced"][name].passed, (name, out["traced"][name].summary())


@pytest.mark.parametrize("name", WRONG)
def test_the_generated_spec_rejects_the_wrong_rewrites(verdicts, name):
    _, _, out = verdicts
    assert not out["spec"][name].passed


def test_the_generated_spec_accepts_the_original_and_an_honest_rewrite(verdicts):
    _, _, out = verdicts
    for name in ("copy", "exp2"):
        assert out["spec"][name].passed, (name, out["spec"][name].summary())
