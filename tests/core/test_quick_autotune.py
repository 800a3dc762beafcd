"""Verification requests autotune cheaply in their own modules (runtime.quick_autotune)."""

from __future__ import annotations

import types

import triton
import triton.language as tl

from tritonforge.runtime.quick_autotune import quick_bench, quicken_autotuners


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def _tuned(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.heuristics({"EVEN": lambda args: args["n"] % 2 == 0})
@triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"])
@triton.jit
def _tuned_under_heuristics(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pass


def test_every_top_level_autotuner_gets_the_quick_benchmark():
    module = types.ModuleType("m")
    module._tuned, module._under, module.other = _tuned, _tuned_under_heuristics, 3
    assert quicken_autotuners(module) == 2
    assert _tuned.do_bench is quick_bench and _tuned_under_heuristics.fn.do_bench is quick_bench


def test_the_quick_benchmark_runs_a_config_twice_and_scores_it():
    runs = []
    scores = quick_bench(lambda: runs.append(1), quantiles=(0.5, 0.2, 0.8))
    assert len(runs) == 2 and len(scores) == 3 and scores[0] >= 0
    assert isinstance(quick_bench(lambda: None), float)


def test_only_untimed_requests_on_the_gpu_autotune_quickly_and_in_modules_of_their_own():
    from types import SimpleNamespace

    from tritonforge.runtime.evaluate import autotunes_quickly, module_label

    verify, timed = SimpleNamespace(time=False), SimpleNamespace(time=True)
    assert autotunes_quickly("cuda", verify) and not autotunes_quickly("cuda", timed)
    assert not autotunes_quickly("cpu", verify)        # the interpreter has its own shim
    assert module_label("t", "original", True) != module_label("t", "original", False)
