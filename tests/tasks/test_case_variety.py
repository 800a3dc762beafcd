"""Fast checks of the pieces generated cases rest on: inputs with exact zeros and strided views,
variety recipes, the driver written for a task's spec calls, the interpreter's case choice and
the CPU shim's CUDA answers."""

import subprocess
import sys

import torch

from tritonforge.model import Case, CaseRole, PerfScriptCall, SpecCall, Task, TensorSpec
from tritonforge.model import TestSectionCall as SectionCall
from tritonforge.runtime.inputs import make_tensor
from tritonforge.search.cases import (
    INTERPRETER_MAX_ELEMENTS, INTERPRETER_MAX_SCRIPT_ELEMENTS, interpreter_cases,
)
from tritonforge.testgen.augment import driver_source
from tritonforge.testgen.cases import vary


def _draw(spec: TensorSpec) -> torch.Tensor:
    return make_tensor(spec, torch.Generator().manual_seed(7), "cpu")


def test_strided_layout_holds_the_contiguous_values_in_a_view():
    dense = _draw(TensorSpec((5, 7)))
    view = _draw(TensorSpec((5, 7), layout="strided"))
    assert not view.is_contiguous() and view.stride() == (14, 2)
    assert torch.equal(view, dense)
    one_d = _draw(TensorSpec((9,), layout="strided"))
    assert one_d.stride() == (2,) and torch.equal(one_d, _draw(TensorSpec((9,))))


def test_sparsity_zeroes_a_fraction_and_keeps_the_rest():
    dense = _draw(TensorSpec((4000,)))
    sparse = _draw(TensorSpec((4000,), sparsity=0.5))
    zeros = (sparse == 0).float().mean().item()
    assert 0.4 < zeros < 0.6
    kept = sparse != 0
    assert torch.equal(sparse[kept], dense[kept])


def test_variety_changes_drawn_floats_only():
    x = TensorSpec((8,), "float32", "randn", scale=2.0)
    assert vary(x, "large").scale == 2e3 and vary(x, "tiny").scale == 2e-3
    assert vary(TensorSpec((8,), "float16"), "large").scale == 32.0
    assert vary(x, "sparse").sparsity == 0.5
    for fixed in (TensorSpec((8,), init="zeros"), TensorSpec((8,), "int32", "randint", low=0, high=4),
                  TensorSpec((8,), init="empty")):
        assert vary(fixed, "large") == fixed and vary(fixed, "sparse") == fixed
    assert vary(x, "strided").layout == "strided"
    assert vary(x, "strided", written=True) == x          # outputs stay as the caller made them
    assert vary(TensorSpec((8,), init="empty"), "strided").layout == "contiguous"


def test_driver_runs_test_sections_and_small_spec_calls():
    small = SpecCall("f", (TensorSpec((4, 3)), 2), (("alpha", 0.5),))
    huge = SpecCall("f", (TensorSpec((1 << 14, 1 << 10)), 2))
    task = Task("t", "def f(x, n, alpha=1.0): pass\n", ("f",),
                (Case("a", CaseRole.CORRECTNESS, small), Case("b", CaseRole.PERFORMANCE, huge),
                 Case("s", CaseRole.CORRECTNESS, SectionCall("r = f(None, 1)\n"))), "file:t")
    code = driver_source(task)
    assert "r = f(None, 1)" in code and "# case a" in code and "# case b" not in code
    compile(code, "driver", "exec")


def test_interpreter_keeps_small_perf_script_inputs():
    def perf(i, elements):
        return Case(f"perf-{i}", CaseRole.PERFORMANCE, PerfScriptCall("script", "m", i, elements))
    task = Task("t", "", ("f",), (Case("test", CaseRole.CORRECTNESS, SectionCall("")),
                                  perf(0, 4096), perf(1, INTERPRETER_MAX_ELEMENTS + 1), perf(2, None)),
                "tritonbench:t")
    kept, notes = interpreter_cases(task)
    assert [c.id for c in kept.cases] == ["test"]           # perf-2's size is unknown: the
    assert len(notes) == 3                                   # script may build GBs on the host
    known = Task("t", "", ("f",), task.cases[:3], "tritonbench:t")
    kept, notes = interpreter_cases(known)
    assert [c.id for c in kept.cases] == ["test", "perf-0"]
    assert kept.case("perf-0").role is CaseRole.CORRECTNESS
    assert len(notes) == 1
    huge = Task("t", "", ("f",), task.cases[:2] + (perf(1, INTERPRETER_MAX_SCRIPT_ELEMENTS),),
                "tritonbench:t")
    assert [c.id for c in interpreter_cases(huge)[0].cases] == ["test"]


def test_cpu_shim_answers_cuda_to_device_checks():
    code = (
        "import torch\n"
        "from tritonforge.runtime import cpu_shim\n"
        "cpu_shim.install()\n"
        "x = torch.randn(4, device='cuda')\n"
        "assert x.is_cuda and x.device.type == 'cuda'\n"
        "y = torch.empty(4, device=x.device).to(x.device)\n"
        "with torch.cuda.device(x.device):\n"
        "    z = x + y.zero_()\n"
        "assert torch.equal(z, x)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_generated_cases_can_be_switched_off(tmp_path):
    from tritonforge.config import Settings
    from tritonforge.testgen.augment import with_generated_cases

    task = Task("t", "def f(x): pass\n", ("f",),
                (Case("a", CaseRole.CORRECTNESS, SpecCall("f", (TensorSpec((4,)),))),), "file:t")
    lines = []
    assert with_generated_cases(task, Settings(generated_cases="off"), tmp_path,
                                progress=lines.append) is task
    # auto: on the GPU only (every candidate runs them; on the interpreter that takes minutes)
    assert with_generated_cases(task, Settings(generated_cases="auto", device="cpu"), tmp_path,
                                progress=lines.append) is task
    assert not lines and not list(tmp_path.iterdir())


def test_record_tasks_know_the_size_of_each_perf_input():
    import pytest

    from tritonforge.tasks.tritonbench import default_data_dir, load_records, load_tasks

    if default_data_dir() is None:
        pytest.skip("TritonBench-G data not found")
    name = sorted(load_records())[0]
    (task,) = load_tasks([name])
    sizes = [c.recipe.elements for c in task.performance_cases]
    assert sizes and all(isinstance(n, int) and n > 0 for n in sizes), sizes


def test_the_search_verifies_generated_cases_before_it_accepts():
    from tritonforge.model import Status, VariantResult
    from tritonforge.search.loop import search_verification_cases

    spec = SpecCall("f", (TensorSpec((4,)),))
    task = Task("t", "", ("f",), (Case("own", CaseRole.CORRECTNESS, spec),
                                  Case("perf-0", CaseRole.PERFORMANCE, spec),
                                  Case("gen-var-sparse", CaseRole.CORRECTNESS, spec, generated=True)),
                "file:t")
    base = VariantResult("original", "h", Status.OK)
    assert {c.id for c in task.generated_cases} <= set(search_verification_cases(task, base))


def test_generated_cases_are_capped_in_turn_per_call_structure():
    from tritonforge.testgen.augment import _capped

    spec = SpecCall("f", (TensorSpec((4,)),))
    ids = [f"gen-t1-{k}" for k in "abcdef"] + ["gen-t2-a", "gen-t2-b"]
    kept = _capped([Case(i, CaseRole.CORRECTNESS, spec) for i in ids], 4)
    assert [c.id for c in kept] == ["gen-t1-a", "gen-t1-b", "gen-t2-a", "gen-t2-b"]
