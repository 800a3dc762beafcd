"""The compile pass on a real GPU: kernels compile and load, nothing is launched, and a timed
request after it runs the kernels it compiled (Evaluator._compile_first)."""

import time
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from tritonforge.runtime.quick_autotune import compile_without_launching, quicken_autotuners

pytestmark = pytest.mark.gpu


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 1024)
                          for w in (2, 4)], key=["n"])
@triton.jit
def _tuned_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


def test_compiled_but_not_launched_then_launched_for_real():
    x = torch.randn(10_000, device="cuda")
    y = torch.full_like(x, float("nan"))
    with compile_without_launching():
        _copy[(triton.cdiv(x.numel(), 512),)](x, y, x.numel(), BLOCK=512)
        torch.cuda.synchronize()
    assert torch.isnan(y).all()                  # nothing ran
    start = time.perf_counter()
    _copy[(triton.cdiv(x.numel(), 512),)](x, y, x.numel(), BLOCK=512)
    torch.cuda.synchronize()
    assert torch.equal(y, x)
    assert time.perf_counter() - start < 1.0     # in memory already: no compile


def test_an_autotuner_compiles_every_config_and_launches_none():
    import types

    module = types.ModuleType("m")
    module.tuned = _tuned_copy
    assert quicken_autotuners(module) == 1
    x = torch.randn(50_000, device="cuda")
    y = torch.full_like(x, float("nan"))
    grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)  # noqa: E731
    with compile_without_launching():
        _tuned_copy[grid](x, y, x.numel())
        torch.cuda.synchronize()
    assert torch.isnan(y).all()
    compiled = {k for cache in _tuned_copy.fn.device_caches.values() for k in cache[0]}
    assert len(compiled) >= 4                     # one kernel per config
    _tuned_copy.cache.clear()                     # the compile pass's pick is dropped
    _tuned_copy[grid](x, y, x.numel())
    torch.cuda.synchronize()
    assert torch.equal(y, x)


def test_the_worker_runs_a_compile_pass_and_then_times(tmp_path: Path):
    from tritonforge.model import (Case, CaseRole, SpecCall, Status, Task, TensorSpec, Variant,
                                   content_hash)
    from tritonforge.runtime.worker_client import Worker
    from tritonforge.runtime.protocol import EvaluateRequest
    from tritonforge.runtime.timing import TimingPlan

    src = Path(__file__).read_text().split("def test_")[0] + (
        "def copy(x):\n"
        "    y = torch.empty_like(x)\n"
        "    _tuned_copy[lambda m: (triton.cdiv(x.numel(), m['BLOCK']),)](x, y, x.numel())\n"
        "    return y\n")
    cases = (Case("p", CaseRole.PERFORMANCE, SpecCall("copy", (TensorSpec((1 << 22,)),))),)
    task = Task("copy", src, ("copy",), cases, "test")
    v = Variant("original", src, content_hash(src))
    with Worker("cuda", tmp_path, timeout_s=120) as worker:
        warm = worker.evaluate(EvaluateRequest(task, (v,), verify=False, time=False,
                                               compile_only=True))
        assert warm.results[0].status is Status.OK, warm
        assert any("worker seconds (autotune compile)" in n for n in warm.notes), warm.notes
        timed = worker.evaluate(EvaluateRequest(task, (v,), verify=False, time=True,
                                                run_cases=False,
                                                timing=TimingPlan(rounds=3, autotune_rep_ms=5.0)))
    assert timed.results[0].status is Status.OK, timed
    assert timed.results[0].timing("p").median_ms > 0
    assert any("worker seconds (autotune short)" in n for n in timed.notes), timed.notes
