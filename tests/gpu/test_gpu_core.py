"""Core behaviour that only a GPU can show: a crashed CUDA context, and honest timing."""

import textwrap
from pathlib import Path

import pytest

from tritonforge.model import Case, CaseRole, SpecCall, Status, Task, TensorSpec, Variant, content_hash
from tritonforge.runtime.worker_client import Worker
from tritonforge.runtime.protocol import EvaluateRequest
from tritonforge.runtime.timing import TimingPlan

pytestmark = pytest.mark.gpu

COPY = textwrap.dedent('''
    import torch, triton, triton.language as tl

    @triton.jit
    def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)

    def copy(x):
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
''')

# Writes far outside any allocation: an illegal memory access, a sticky CUDA error.
WILD = COPY.replace("tl.store(y_ptr + offs,", "tl.store(y_ptr + offs + (1 << 40),")


def _task(n=1 << 24):
    cases = (Case("c", CaseRole.CORRECTNESS, SpecCall("copy", (TensorSpec((4096,)),))),
             Case("p", CaseRole.PERFORMANCE, SpecCall("copy", (TensorSpec((n,)),))))
    return Task("copy", COPY, ("copy",), cases, "test")


def _v(name, src):
    return Variant(name, src, content_hash(src))


def test_illegal_memory_access_is_a_recorded_failure_and_the_next_candidate_runs(tmp_path: Path):
    task = _task()
    with Worker("cuda", tmp_path, timeout_s=120) as worker:
        ev = worker.evaluate(EvaluateRequest(task, (_v("original", COPY), _v("wild", WILD)),
                                             case_ids=("c",), verify=False, time=False))
        wild = ev.result("wild")
        assert wild.status is Status.CRASH, wild
        assert "illegal" in (wild.failure.reason + wild.failure.detail).lower()
        ev2 = worker.evaluate(EvaluateRequest(task, (_v("original", COPY), _v("again", COPY + "\n")),
                                              case_ids=("c", "p"), verify=False, time=True,
                                              timing=TimingPlan(rounds=3)))
        assert all(r.status is Status.OK for r in ev2.results), ev2
        assert worker.restarts >= 1


def test_same_file_timed_twice_agrees_within_two_percent(tmp_path: Path):
    task = _task(1 << 26)     # 256 MB each way: ~150 us on an H100, well over 50 us
    with Worker("cuda", tmp_path, timeout_s=120) as worker:
        ev = worker.evaluate(EvaluateRequest(task, (_v("a", COPY), _v("b", COPY + "\n")),
                                             case_ids=("p",), verify=False, time=True,
                                             timing=TimingPlan(rounds=10)))
    a, b = (r.timing("p") for r in ev.results)
    assert a.median_ms > 0.05
    assert abs(a.median_ms / b.median_ms - 1) < 0.02, (a.median_ms, b.median_ms)


def test_microsecond_cases_agree_with_themselves_under_the_default_timing(tmp_path: Path):
    """The engine's timing (read flush, call-by-call turns) on cases of a few microseconds, where
    do_bench's zeroing flush with back-to-back blocks once read the same original 5.8 us against
    itself at 451 us (fast_rms_layernorm, H100, 2026-11-24). Three sizes, each within 5%."""
    from tritonforge.config import Settings
    from tritonforge.runtime.timing_plan import timing_plan

    sizes = (1 << 12, 1 << 16, 1 << 20)
    cases = tuple(Case(f"p{i}", CaseRole.PERFORMANCE, SpecCall("copy", (TensorSpec((n,)),)))
                  for i, n in enumerate(sizes))
    task = Task("copy", COPY, ("copy",), cases, "test")
    plan = timing_plan(Settings())
    assert (plan.flush_mode, plan.interleave) == ("read", "call")
    with Worker("cuda", tmp_path, timeout_s=120) as worker:
        ev = worker.evaluate(EvaluateRequest(task, (_v("a", COPY), _v("b", COPY + "\n")),
                                             case_ids=tuple(c.id for c in cases), verify=False,
                                             time=True, timing=plan))
    for case in cases:
        a, b = (r.timing(case.id) for r in ev.results)
        assert a.median_ms < 0.05, (case.id, a.median_ms)      # microsecond-scale indeed
        assert abs(a.median_ms / b.median_ms - 1) < 0.05, (case.id, a.median_ms, b.median_ms)
