"""The case of the check after timing (runtime.worker_evaluate.after_timing_case): a correctness
case drawn by the nonce, except where a variant autotunes: then the timed performance case the
original ran fastest on, one every timed variant has samples for, so that no autotuner tunes (or
compiles) for new sizes inside the check."""

from __future__ import annotations

import types
from types import SimpleNamespace

import triton
import triton.language as tl

from tritonforge.model import CaseRole, Timing, TimingMethod
from tritonforge.runtime.worker_evaluate import after_timing_case


@triton.autotune(configs=[triton.Config({}, num_warps=1), triton.Config({}, num_warps=2)], key=["n"])
@triton.jit
def _tuned(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.jit
def _plain(x_ptr, n, BLOCK: tl.constexpr):
    pass


def _module(kernel) -> types.ModuleType:
    module = types.ModuleType("m")
    module.kernel = kernel
    return module


def _case(cid, role):
    return SimpleNamespace(id=cid, role=role)


CORRECT = (_case("test", CaseRole.CORRECTNESS), _case("odd", CaseRole.CORRECTNESS))
PERF = (_case("perf-00", CaseRole.PERFORMANCE), _case("perf-01", CaseRole.PERFORMANCE),
        _case("perf-02", CaseRole.PERFORMANCE))
TASK = SimpleNamespace(cases=CORRECT + PERF, performance_cases=PERF)


def _state(module, ms_by_case):
    return SimpleNamespace(module=module, timings=[
        Timing(cid, "v", TimingMethod.CUDA_EVENTS, (ms, ms * 1.01, ms * 0.99))
        for cid, ms in ms_by_case.items()])


def test_plain_kernels_are_checked_on_a_correctness_case_drawn_by_the_nonce():
    ref = _state(_module(_plain), {"perf-01": 1.0, "perf-02": 0.5})
    cand = _state(_module(_plain), {"perf-01": 0.9, "perf-02": 0.4})
    assert after_timing_case(TASK, ref, [cand], 0).id == "test"
    assert after_timing_case(TASK, ref, [cand], 1).id == "odd"
    assert after_timing_case(TASK, ref, [], 0) is None


def test_where_a_variant_autotunes_the_fastest_case_every_variant_was_timed_on():
    ref = _state(_module(_plain), {"perf-00": 0.1, "perf-01": 1.0, "perf-02": 0.5})
    tuned = _state(_module(_tuned), {"perf-01": 0.9, "perf-02": 0.4})
    plain = _state(_module(_plain), {"perf-00": 0.1, "perf-01": 0.9, "perf-02": 0.45})
    # perf-00 is the original's fastest, but the autotuned candidate was not timed there
    assert after_timing_case(TASK, ref, [tuned, plain], 5).id == "perf-02"
    # the original autotunes: the same rule
    assert after_timing_case(TASK, _state(_module(_tuned), ref_ms := {"perf-00": 0.1, "perf-01": 1.0}),
                             [_state(_module(_plain), ref_ms)], 3).id == "perf-00"
    # no case every variant was timed on: a correctness case, as for plain kernels
    assert after_timing_case(TASK, ref, [_state(_module(_tuned), {}),
                                         _state(_module(_plain), {"perf-00": 0.1})], 0).id == "test"
