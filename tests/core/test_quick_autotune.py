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

    from tritonforge.runtime.worker_evaluate import autotunes_quickly, module_label

    verify, timed = SimpleNamespace(time=False), SimpleNamespace(time=True)
    assert autotunes_quickly("cuda", verify) and not autotunes_quickly("cuda", timed)
    assert not autotunes_quickly("cpu", verify)        # the interpreter has its own shim
    labels = {module_label("t", "original", m) for m in ("quick", "short", "full")}
    assert len(labels) == 3


def test_search_timings_autotune_short_and_the_final_check_with_tritons_own():
    from types import SimpleNamespace

    from tritonforge.config import Settings
    from tritonforge.runtime.worker_evaluate import autotune_mode
    from tritonforge.runtime.timing_plan import final_check_plan, timing_plan

    settings = Settings()
    search, final = timing_plan(settings), final_check_plan(settings)
    assert search.autotune_rep_ms == settings.search_autotune_rep_ms > 0
    assert final.autotune_rep_ms is None

    def mode(dev, time, plan):
        return autotune_mode(dev, SimpleNamespace(time=time, timing=plan, compile_only=False))

    assert mode("cuda", True, search) == "short"
    assert mode("cuda", True, final) == "full"
    assert mode("cuda", False, search) == "quick"
    assert mode("cpu", True, search) == "full"        # the interpreter's shim decides there
    off = timing_plan(settings.replace(search_autotune_rep_ms=0.0))
    assert off.autotune_rep_ms is None and mode("cuda", True, off) == "full"


def test_a_negative_short_benchmark_is_refused():
    import pytest

    from tritonforge.config import load_settings
    from tritonforge.errors import ConfigError

    with pytest.raises(ConfigError, match="search_autotune_rep_ms"):
        load_settings(env={"TRITONFORGE_SEARCH_AUTOTUNE_REP_MS": "-1"})


def test_the_short_benchmark_is_tritons_do_bench_with_fewer_repetitions(monkeypatch):
    import triton.testing

    from tritonforge.runtime.quick_autotune import short_bench, shorten_autotuners

    seen = {}

    def fake_do_bench(fn, warmup, rep, quantiles=None):
        seen.update(warmup=warmup, rep=rep, quantiles=quantiles)
        fn()
        return [1.0, 0.9, 1.1]

    monkeypatch.setattr(triton.testing, "do_bench", fake_do_bench)
    runs = []
    assert short_bench(10.0)(lambda: runs.append(1), quantiles=(0.5, 0.2, 0.8)) == [1.0, 0.9, 1.1]
    assert runs == [1] and seen == {"warmup": 2.0, "rep": 10.0, "quantiles": (0.5, 0.2, 0.8)}
    module = types.ModuleType("m")
    module._tuned = _tuned
    assert shorten_autotuners(module, 20.0) == 1 and _tuned.do_bench.rep_ms == 20.0
