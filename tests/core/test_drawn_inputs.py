"""Performance scripts' random host tensors are drawn on the GPU (runtime.drawn_inputs): the script
still gets host tensors of the shape, dtype and requires_grad it asked for, the same for the same
seed; unusual calls reach torch unchanged; torch is restored object for object; a script that
fails under the patch is built again as written."""

from __future__ import annotations

import types

import pytest
import torch

from tritonforge.model import PerfScriptCall
from tritonforge.runtime import perf_inputs
from tritonforge.runtime.drawn_inputs import _drawn_factory, _drawn_in_place, drawn_on
from tritonforge.runtime.invoke import InvocationBuilder


def test_a_drawn_factory_gives_host_tensors_as_asked():
    rand = _drawn_factory(torch.rand, "cpu")     # "cpu" stands in for the GPU on this machine
    x = rand(3, 4, dtype=torch.float16, requires_grad=False)
    assert x.device.type == "cpu" and x.shape == (3, 4) and x.dtype == torch.float16
    g = rand((5,), requires_grad=True)
    assert g.requires_grad and g.is_leaf        # a leaf, as torch.rand(..., requires_grad=True)
    i = _drawn_factory(torch.randint, "cpu")(0, 7, (100,))
    assert i.dtype == torch.int64 and int(i.min()) >= 0 and int(i.max()) < 7
    torch.manual_seed(3)
    a = rand(8)
    torch.manual_seed(3)
    assert torch.equal(a, rand(8))              # a function of the seed


def test_calls_with_a_generator_or_another_device_reach_torch_unchanged():
    seen = []

    def fake(*args, **kwargs):
        seen.append(kwargs.get("device"))
        return torch.zeros(2)

    drawn = _drawn_factory(fake, "cuda")
    drawn(2, generator=torch.Generator())
    drawn(2, device="meta")
    drawn(2, out=torch.empty(2))
    assert seen == [None, "meta", None]         # none was sent to "cuda"
    drawn(2)
    assert seen[-1] == "cuda"


def test_in_place_draws_fill_the_host_tensor_and_return_it():
    normal_ = _drawn_in_place(torch.Tensor.normal_, "cpu")
    t = torch.zeros(1000)
    assert normal_(t, 5.0, 0.1) is t and 4.5 < float(t.mean()) < 5.5
    ints = torch.zeros(4, dtype=torch.int64)
    with pytest.raises(Exception):              # torch's own answer for an integer tensor
        normal_(ints)


def test_torch_is_restored_object_for_object_even_after_an_error():
    before = (torch.rand, torch.randn, torch.randint, torch.randperm,
              torch.Tensor.uniform_, torch.Tensor.normal_)
    with pytest.raises(RuntimeError):
        with drawn_on("cuda"):
            assert torch.rand is not before[0] and torch.rand.__wrapped__ is before[0]
            raise RuntimeError("script failed")
    after = (torch.rand, torch.randn, torch.randint, torch.randperm,
             torch.Tensor.uniform_, torch.Tensor.normal_)
    assert all(a is b for a, b in zip(before, after))
    with drawn_on("cpu"):                        # the interpreter: nothing patched
        assert torch.rand is before[0]


SCRIPT = """
import torch

class performance_metrics:
    def __init__(self):
        self.input_tensors = []
    def get_input_tensors(self):                  # appends, as some scripts do: a first build
        for i in range(3, 6):                     # failing at its second size leaves one behind
            self.input_tensors.append(torch.arange(8.0) if i == 3 else torch.rand(2 ** i))
    def to_cuda(self, t):
        return t
    def call_op(self, t):
        return t
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where drawing on cuda fails")
def test_a_script_failing_under_the_patch_is_built_as_written(tmp_path, monkeypatch):
    monkeypatch.delenv(perf_inputs.ENV_DIR, raising=False)
    module = types.ModuleType("kmod_original")
    builder = InvocationBuilder(module, "cuda", tmp_path)   # no CUDA here: drawing there raises
    recipe = PerfScriptCall(SCRIPT, "kmod", 2)
    got = builder._perf_input(builder._perf_instance(module, recipe), recipe, 0)
    assert got.device.type == "cpu" and got.numel() == 32
    assert builder.perf_case_count(recipe) == 3
    # its size drawn apart (runtime.sized_inputs), on the host, from the size's own seed
    from tritonforge.runtime.sized_inputs import sized_seed
    torch.manual_seed(sized_seed(0, 2))
    assert torch.equal(got, torch.rand(32))
    # drawn whole (a size of it cannot be drawn apart), on the host, as written
    builder._unsized.add(hash(recipe.script))
    got = builder._perf_input(builder._perf_instance(module, recipe), recipe, 0)
    torch.manual_seed(0)
    torch.rand(16)
    assert torch.equal(got, torch.rand(32))


SECTION = """
import torch

def test_it():
    x = torch.randn(64, dtype=torch.float32)
    return {"case": kernel_stand_in(x)}

result_gold = test_it()
"""


def test_a_test_section_draws_its_host_inputs_on_the_gpu_and_is_restored(tmp_path, monkeypatch):
    """The whole section runs under the patch (its inputs are built as it calls the kernels), and
    torch is itself again once it returns."""
    from contextlib import contextmanager

    from tritonforge.model import TestSectionCall
    import tritonforge.runtime.invoke as invoke

    real = torch.randn

    @contextmanager
    def drawn_here(device):          # the patch, drawing on the host: no GPU on this machine
        torch.randn = _drawn_factory(real, "cpu")
        try:
            yield
        finally:
            torch.randn = real

    seen = []
    module = types.ModuleType("kmod_original")
    module.kernel_stand_in = lambda x: seen.append(hasattr(torch.randn, "__wrapped__")) or x * 2
    builder = InvocationBuilder(module, "cuda", tmp_path)
    monkeypatch.setattr(invoke, "drawn_on", drawn_here)
    got = builder.build(module, _section_case(TestSectionCall(SECTION)), 0).call()
    assert seen == [True] and got["case"].shape == (64,) and torch.randn is real


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where drawing on cuda fails")
def test_a_test_section_failing_under_the_patch_runs_as_written(tmp_path):
    """No CUDA here: every draw on it raises, and the section runs again as written, with the
    values a host draw of its seed gives; a capture of one of its calls does the same."""
    from tritonforge.model import CapturedCall, TestSectionCall

    module = types.ModuleType("kmod_original")
    module.kernel_stand_in = lambda x: x * 2
    builder = InvocationBuilder(module, "cuda", tmp_path)
    got = builder.build(module, _section_case(TestSectionCall(SECTION)), 0).call()
    torch.manual_seed(0)
    assert torch.equal(got["case"], torch.randn(64) * 2)
    args, _ = builder.capture(CapturedCall(SECTION, "kernel_stand_in", 0), 0)
    torch.manual_seed(0)
    assert torch.equal(args[0], torch.randn(64))


def _section_case(recipe):
    from tritonforge.model import Case, CaseRole

    return Case("test", CaseRole.CORRECTNESS, recipe, (0,))
