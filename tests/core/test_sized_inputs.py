"""One size of a performance script's inputs drawn without the others (runtime.sized_inputs):
only that size's draws are made, deterministically for (seed, size), and a script whose sizes
cannot be drawn apart is refused (the builder then builds every size, as before)."""

from __future__ import annotations

import types

import pytest
import torch

from tritonforge.model import PerfScriptCall
from tritonforge.runtime import perf_inputs
from tritonforge.runtime.invoke import InvocationBuilder
from tritonforge.runtime.sized_inputs import Unsized, plan_sizes, sized_seed


class Sizes:
    """A TritonBench-G style script: every size drawn at once, in a loop."""

    def __init__(self, body):
        self.body, self.input_tensors = body, []

    def get_input_tensors(self):
        self.body(self)


def _logits(self):
    for i in range(2, 6):
        logits = torch.rand((2 ** i, 8, 10), dtype=torch.float16)
        labels = torch.randint(0, 10, (2 ** i, 8), dtype=torch.int64)
        self.input_tensors.append((logits, labels))


def test_only_the_asked_size_is_drawn_and_the_same_seed_draws_the_same_values(monkeypatch):
    drawn = []
    real_rand = torch.rand

    def counted(*args, **kwargs):
        if kwargs.get("device") != "meta":
            drawn.append(args)
        return real_rand(*args, **kwargs)
    monkeypatch.setattr(torch, "rand", counted)
    plan = plan_sizes(Sizes(_logits), seed=3)
    assert len(plan) == 4 and drawn == []               # shapes only, nothing drawn
    logits, labels = plan.materialize(2, 3)
    assert drawn == [((16, 8, 10),)]                    # that size's draw alone
    assert logits.shape == (16, 8, 10) and logits.dtype == torch.float16 and not logits.is_meta
    assert labels.shape == (16, 8) and labels.dtype == torch.int64 and int(labels.max()) < 10
    again, _ = plan_sizes(Sizes(_logits), seed=3).materialize(2, 3)
    other, _ = plan.materialize(2, 4)
    assert torch.equal(logits, again) and not torch.equal(logits, other)
    assert sized_seed(3, 2) not in (sized_seed(3, 1), sized_seed(4, 2), 3)


def _set_first(t):
    t[0] = 3
    return t


def _buffers(self):
    for i in range(3):
        q = torch.rand((2 ** i, 4), dtype=torch.float16)
        self.input_tensors.append((q, torch.empty_like(q), torch.zeros_like(q, dtype=torch.float32),
                                   torch.full_like(q, 2.0), torch.empty_like(torch.ones(3))))


def test_output_buffers_made_like_a_draw_are_made_with_it_and_empty_ones_are_zeros():
    plan = plan_sizes(Sizes(_buffers), seed=1)
    q, out, acc, two, real = plan.materialize(2, 1)
    assert not any(t.is_meta for t in (q, out, acc, two, real))
    assert out.shape == q.shape and out.dtype == torch.float16 and not out.any()
    assert acc.dtype == torch.float32 and not acc.any() and bool((two == 2).all())
    assert real.shape == (3,)                          # like a real tensor: made in the pass
    again = plan.materialize(2, 1)
    assert torch.equal(q, again[0])


@pytest.mark.parametrize("body, why", [
    (lambda self: self.input_tensors.extend(torch.rand(2 ** i) * 2 for i in range(3)),
     "computed from a draw"),
    (lambda self: self.input_tensors.extend(torch.rand(2 ** i)[1:] for i in range(3)),
     "computed from a draw"),
    (lambda self: self.input_tensors.extend(
        torch.rand(int(torch.randint(1, 4, (1,)).item())) for _ in range(3)), "script failed"),
    (lambda self: self.input_tensors.extend(torch.rand(4, device="cuda") for _ in range(3)),
     "not deferred"),
    (lambda self: self.input_tensors.extend(torch.arange(4.0) for _ in range(3)),
     "draws nothing"),
    (lambda self: setattr(self, "weight", torch.rand(4)) or self.input_tensors.extend(
        torch.rand(4) for _ in range(3)), "keeps a draw"),
    (lambda self: self.input_tensors.extend({torch.rand(4)} for _ in range(3)), "plain tree"),
    (lambda self: self.input_tensors.extend(torch.rand(4).mul_(2) for _ in range(3)),
     "changed in place"),
    (lambda self: self.input_tensors.extend(_set_first(torch.randint(0, 9, (4,))) for _ in range(3)),
     "changed in place"),
    (lambda self: self.input_tensors.extend((torch.rand(4), torch.zeros(2 ** 28, dtype=torch.float32))
                                            for _ in range(3)), "GiB of inputs that are not draws"),
    (lambda self: self.input_tensors.extend(torch.empty_like(torch.rand(4) * 2) for _ in range(3)),
     "not drawn"),
    (lambda self: self.input_tensors.extend(torch.zeros_like(torch.rand(4), device="cuda")
                                            for _ in range(3)), "not drawn, or with"),
])
def test_sizes_that_cannot_be_drawn_apart_are_refused(body, why):
    with pytest.raises(Unsized, match=why):
        plan_sizes(Sizes(body), seed=0).materialize(1, 0)


SCRIPT = """
import torch
import TritonBench_v1.kmod as K

class performance_metrics:
    def __init__(self):
        self.input_tensors = []
    def get_input_tensors(self):
        K.builds.append(1)
        for i in range(3, 7):
            self.input_tensors.append((torch.rand(2 ** i) * 1 if K.derived else torch.rand(2 ** i), i))
    def to_cuda(self, t):
        return t
    def call_op(self, t):
        return t[0] * 2
"""


def _builder(tmp_path, derived):
    m = types.ModuleType("kmod_original")
    m.builds, m.derived = [], derived
    return InvocationBuilder(m, "cpu", tmp_path / "w0"), m


def _recipe(i):
    return PerfScriptCall(SCRIPT, "kmod", i)


def test_the_builder_shares_one_drawn_size_through_the_run_folder(tmp_path, monkeypatch):
    """A size drawn apart is stored as a set of one: a second worker loads it, builds nothing;
    another size is drawn apart too; the count of sizes comes from the plan."""
    monkeypatch.setenv(perf_inputs.ENV_DIR, str(tmp_path / "shared"))
    first, mod = _builder(tmp_path, derived=False)
    a = first._perf_input(first._perf_instance(mod, _recipe(2)), _recipe(2), 0)
    assert a[0].numel() == 32 and a[1] == 5 and first._perf_inputs == {}
    second, mod2 = _builder(tmp_path / "b", derived=False)
    b = second._perf_input(second._perf_instance(mod2, _recipe(2)), _recipe(2), 0)
    assert mod2.builds == [] and torch.equal(a[0], b[0])
    c = first._perf_input(first._perf_instance(mod, _recipe(3)), _recipe(3), 0)
    assert c[0].numel() == 64 and len(mod.builds) == 1   # one plan, two sizes drawn from it
    assert second.perf_case_count(_recipe(0)) == 4


def test_a_script_whose_sizes_cannot_be_drawn_apart_is_built_whole(tmp_path, monkeypatch):
    monkeypatch.delenv(perf_inputs.ENV_DIR, raising=False)
    builder, mod = _builder(tmp_path, derived=True)
    got = builder._perf_input(builder._perf_instance(mod, _recipe(1)), _recipe(1), 0)
    assert got[0].numel() == 16 and not got[0].is_meta
    assert hash(SCRIPT) in builder._unsized and len(builder._perf_inputs) == 1
    torch.manual_seed(0)
    torch.rand(8)
    assert torch.equal(got[0], torch.rand(16))           # the script's own draws, as written
    builder._perf_input(builder._perf_instance(mod, _recipe(2)), _recipe(2), 0)
    assert len(mod.builds) == 2                           # the plan once, the whole build once


DEVICE_SCRIPT = """
import torch
import TritonBench_v1.kmod as K

class performance_metrics:
    def __init__(self):
        self.input_tensors = []
    def get_input_tensors(self):
        for i in range(3, 7):
            self.input_tensors.append((torch.rand(2 ** i, requires_grad=K.grad), 3))
    def to_cuda(self, t):
        if K.host_only and not K.seen:
            K.seen.append(1)
            raise RuntimeError("pin_memory wants a host tensor")
        K.moves.append(t[0])
        return t
    def call_op(self, t):
        return t[0] * 2
"""


@pytest.mark.parametrize("grad, host_only, on_device", [
    (False, False, True),
    (True, False, False),        # a draw asking for a gradient: the host's way
    (False, True, False),        # a to_cuda refusing device tensors: the host's way
])
def test_on_a_gpu_a_size_is_drawn_on_the_device_with_no_host_copy(tmp_path, monkeypatch, grad,
                                                                  host_only, on_device):
    """On a GPU the size is drawn where it runs (``SizePlan.materialize`` with the device: here
    the host stands in for it) and handed to ``to_cuda`` as drawn, nothing stored on disk;
    a size with a gradient draw, or a ``to_cuda`` that refuses device tensors, goes the host's
    way (the run's disk folder)."""
    from contextlib import nullcontext

    from tritonforge.model import Case, CaseRole
    from tritonforge.runtime import invoke
    from tritonforge.runtime.sized_inputs import SizePlan

    shared = tmp_path / "shared"
    monkeypatch.setenv(perf_inputs.ENV_DIR, str(shared))
    monkeypatch.setattr(invoke, "drawn_on", lambda device: nullcontext())
    monkeypatch.setattr(invoke, "_free_device_bytes", lambda device: 10 ** 12)
    devices = []
    real = SizePlan.materialize

    def here(self, index, seed, device=None):
        devices.append(device)
        return real(self, index, seed)                # the host stands in for the device
    monkeypatch.setattr(SizePlan, "materialize", here)
    m = types.ModuleType("kmod_original")
    m.grad, m.host_only, m.seen, m.moves = grad, host_only, [], []
    builder = InvocationBuilder(m, "cuda", tmp_path / "w0")
    case = Case("perf-02", CaseRole.PERFORMANCE, PerfScriptCall(DEVICE_SCRIPT, "kmod", 2))
    x = builder.build(m, case, 0).arguments[0]
    assert x[0].numel() == 32 and x[1] == 3
    stored = shared.exists() and any(shared.iterdir())
    assert stored is not on_device
    assert (devices[:1] == ["cuda"]) is (not grad)
    y = builder.build(m, case, 0).arguments[0]
    assert torch.equal(x[0], y[0]) and len(m.moves) == 1    # the kept pristine copy's clone


def _swallowing(self):
    for i in range(3):
        try:
            x = torch.rand(4, device="cuda")
        except Exception:  # noqa: BLE001 - a script that catches the refusal
            x = torch.rand(4)
        self.input_tensors.append(x)


def _grad_after(self):
    for i in range(3):
        x = torch.rand(4)
        x.requires_grad_()
        self.input_tensors.append(x)


def _with_empty(self):
    for i in range(3):
        q = torch.rand(2 ** i)
        self.input_tensors.append((q, torch.empty(2 ** i, 3), torch.empty(2, pin_memory=False)))


def test_a_refusal_the_script_catches_or_a_gradient_asked_after_the_draw_still_refuses():
    with pytest.raises(Unsized, match="not deferred"):
        plan_sizes(Sizes(_swallowing), seed=0)
    with pytest.raises(Unsized, match="changed in place"):
        plan_sizes(Sizes(_grad_after), seed=0)


def test_an_empty_buffer_is_made_zero_filled_the_same_in_every_build_of_a_seed():
    """``torch.empty`` holds whatever memory held: deferred, it is made zero-filled, so two
    plans of one seed (a worker builds its plan again when the verifier moves between seeds)
    give the same inputs."""
    first = plan_sizes(Sizes(_with_empty), seed=2).materialize(2, 2)
    again = plan_sizes(Sizes(_with_empty), seed=2).materialize(2, 2)
    assert first[1].shape == (4, 3) and not first[1].is_meta and not first[1].any()
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not first[2].is_meta and not first[2].any()     # made as written, zero-filled


def test_a_device_draw_that_fails_after_one_succeeded_fails_the_build(tmp_path, monkeypatch):
    """A worker whose first draw on its device fails draws on the host from then on (no CUDA
    there); one whose draws there succeeded fails the build instead of switching to the host's
    whole-set build, which would give a (case, seed) other values than its earlier builds (an
    original's re-run would then seem to vary by itself). A to_cuda that took device draws
    before and refuses one now fails the build the same way."""
    from contextlib import nullcontext

    from tritonforge.model import Case, CaseRole
    from tritonforge.runtime import invoke
    from tritonforge.runtime.sized_inputs import SizePlan

    monkeypatch.delenv(perf_inputs.ENV_DIR, raising=False)
    monkeypatch.setattr(invoke, "drawn_on", lambda device: nullcontext())
    monkeypatch.setattr(invoke, "_free_device_bytes", lambda device: 0)    # nothing kept
    real, calls = SizePlan.materialize, []

    def flaky(self, index, seed, device=None):
        calls.append(device)
        if device is not None and len(calls) > 1:
            raise RuntimeError("CUDA out of memory")
        return real(self, index, seed)
    monkeypatch.setattr(SizePlan, "materialize", flaky)
    m = types.ModuleType("kmod_original")
    m.grad, m.host_only, m.seen, m.moves = False, False, [], []
    builder = InvocationBuilder(m, "cuda", tmp_path / "w0")
    case = Case("perf-02", CaseRole.PERFORMANCE, PerfScriptCall(DEVICE_SCRIPT, "kmod", 2))
    builder.build(m, case, 0)
    with pytest.raises(RuntimeError, match="out of memory"):
        builder.build(m, case, 1)
    assert hash(DEVICE_SCRIPT) not in builder._unsized
