"""Guards: launch counting (interpreter), torch-call recording, stream creation, integrity."""

from __future__ import annotations

import os
import time

import pytest
import torch
import torch.nn.functional as F

import kernels
from conftest import DEVICE
from tritonforge.verify import (
    check_integrity, count_launches, integrity_snapshot, record_torch_calls, restore_integrity,
    watch_integrity,
)


def test_count_launches_under_the_interpreter():
    x = torch.randn(200, device=DEVICE)
    with count_launches() as outer:
        kernels.add_one(x)
        with count_launches() as inner:
            kernels.add_one(x)
    assert outer.count == 2 and inner.count == 1
    assert outer.kernels == ("add_one_kernel",)
    if DEVICE == "cpu":     # the interpreter reports the grid; a compiled launch's hook may not
        assert outer.launches[0].grid == (4,)
    assert outer.side_stream_launches() == []
    with count_launches() as none:
        torch.softmax(x, 0)
    assert none.count == 0


def test_autotuned_kernels_are_counted_and_benchmarking_is_not_the_variants():
    x = torch.randn(100, device=DEVICE)
    with count_launches() as launches, record_torch_calls() as calls:
        y = kernels.add_one_autotuned(x)
    assert torch.equal(y, x + 1)
    assert launches.count >= 1 and launches.kernels == ("add_one_tuned",)
    assert set(calls.ops) <= {"aten.empty_like"}, calls.ops


def test_record_torch_calls_sees_library_work_not_triton_internals():
    x, w = torch.randn(4, 4, device=DEVICE), torch.randn(4, 4, device=DEVICE)
    with record_torch_calls() as calls:
        y = kernels.add_one(x)               # the interpreter's own copies are not recorded
    assert set(calls.ops) == {"aten.empty_like"}
    with record_torch_calls() as calls:
        torch.matmul(x, w)
        F.softmax(y, dim=-1)
        torch.ops.aten.mm(x, w)
        y.cpu().numpy()
        y.to("meta")
    assert calls.ops["aten.mm"] == 2
    assert {"aten._softmax", "Tensor.numpy", "aten._to_copy(device)"} <= set(calls.ops)


def test_stream_creation_is_seen_without_cuda():
    original = torch.cuda.Stream
    with record_torch_calls() as calls:
        try:
            torch.cuda.Stream()
        except RuntimeError:
            pass                              # a CPU build cannot make one; the attempt counts
    assert calls.streams_created == 1
    assert torch.cuda.Stream is original


def test_integrity_catches_and_restores_patches():
    snapshot = integrity_snapshot()
    assert check_integrity(snapshot) == []
    real_clock = time.perf_counter
    time.perf_counter = lambda: 0.0
    torch.cuda.synchronize = lambda *a: None
    os.environ["TRITON_INTERPRET_EXTRA"] = "1"
    torch.backends.cuda.matmul.allow_tf32 = not torch.backends.cuda.matmul.allow_tf32
    reduced = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = not reduced
    try:
        problems = "\n".join(check_integrity(snapshot))
        assert "time.perf_counter was replaced" in problems
        assert "torch.cuda.synchronize was replaced" in problems
        assert "TRITON_INTERPRET_EXTRA" in problems
        assert "allow_tf32" in problems
        assert "allow_fp16_reduced_precision_reduction" in problems
    finally:
        restore_integrity(snapshot)
    assert time.perf_counter is real_clock and "TRITON_INTERPRET_EXTRA" not in os.environ
    assert torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction == reduced
    assert check_integrity(snapshot) == []


def test_watch_integrity_charges_the_block_and_restores():
    real_clock = time.perf_counter
    with watch_integrity() as patched:
        time.perf_counter = lambda: 0.0
    assert patched and "time.perf_counter" in patched[0]
    assert time.perf_counter is real_clock
    with watch_integrity() as clean:
        kernels.add_one(torch.randn(8, device=DEVICE))
    assert clean == []


def test_a_patch_the_static_policy_cannot_resolve_is_caught_at_run_time():
    # ``[torch.linalg][0].vector_norm = f`` names no module the policy can follow; the verifier's
    # comparison uses torch.linalg.vector_norm for its error norm
    from tritonforge.verify.policy import check_source
    source = "import torch\nns = [torch.linalg][0]\nns.vector_norm = lambda *a, **k: 0\n"
    assert check_source(source).ok
    real = torch.linalg.vector_norm
    snapshot = integrity_snapshot()
    exec(compile(source, "<candidate>", "exec"), {})
    try:
        assert any("torch.linalg.vector_norm was replaced" in p for p in check_integrity(snapshot))
    finally:
        restore_integrity(snapshot)
    assert torch.linalg.vector_norm is real


def test_a_kernel_registered_for_a_torch_op_is_reported_and_taken_back():
    # one for aten::abs replaces torch.abs for the whole process, the verifier's comparisons
    # included (tests/verify/catalogue/scale_blind_compare.py); a variant's own namespace is its own
    x = torch.tensor([-2.0, 3.0], dtype=torch.float64)
    snapshot = integrity_snapshot()
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("abs", lambda t: torch.zeros(t.shape, dtype=t.dtype), "CPU")
    own = torch.library.Library("tf_test_own_ns", "DEF")
    own.define("twice(Tensor x) -> Tensor")
    own.impl("twice", lambda t: t * 2, "CPU")
    assert torch.abs(x).tolist() == [0.0, 0.0]
    problems = check_integrity(snapshot)
    assert len(problems) == 1 and "aten::abs (CPU)" in problems[0], problems
    restore_integrity(snapshot)
    assert torch.abs(x).tolist() == [2.0, 3.0]
    assert check_integrity(snapshot) == []
    assert torch.ops.tf_test_own_ns.twice(x).tolist() == [-4.0, 6.0]
    own._destroy()
    del lib
    # a shape-inference kernel (torch registers some lazily) computes nothing: not reported
    meta = torch.library.Library("aten", "IMPL")
    meta.impl("abs", lambda t: torch.empty_like(t), "Meta", allow_override=True)
    try:
        assert check_integrity(snapshot) == []
    finally:
        meta._destroy()


def test_integrity_ignores_data_that_changes_legitimately():
    # torch.cuda.default_generators is () until CUDA initialises; a snapshot taken before must
    # neither report nor "restore" it (restoring it broke torch.manual_seed on a GPU)
    snapshot = integrity_snapshot()
    saved = torch.cuda.default_generators
    torch.cuda.default_generators = (object(),)
    try:
        assert check_integrity(snapshot) == []
        restore_integrity(snapshot)
        assert len(torch.cuda.default_generators) == 1
    finally:
        torch.cuda.default_generators = saved


def test_lazy_torch_rewrites_happen_before_the_snapshot():
    snapshot = integrity_snapshot()
    import torch._dynamo  # noqa: F401 - on first import it rewraps torch.manual_seed
    assert check_integrity(snapshot) == []


def test_integrity_has_no_false_positive_around_guarded_runs():
    snapshot = integrity_snapshot()
    with count_launches(), record_torch_calls():
        kernels.add_one(torch.randn(10, device=DEVICE))
        kernels.add_one_autotuned(torch.randn(10, device=DEVICE))
    assert check_integrity(snapshot) == []


@pytest.mark.parametrize("attr", ["launch_enter_hook"])
def test_triton_hooks_are_watched(attr):
    import triton
    snapshot = integrity_snapshot()
    triton.knobs.runtime.launch_enter_hook.add(print)
    try:
        assert any("launch_enter_hook" in p for p in check_integrity(snapshot))
    finally:
        restore_integrity(snapshot)
    assert print not in triton.knobs.runtime.launch_enter_hook.calls
