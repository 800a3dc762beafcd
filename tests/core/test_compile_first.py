"""Timed requests of shards sharing a GPU compile under the shared lock first (runtime.evaluator)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonforge.config import Settings
from tritonforge.runtime import evaluator as evaluator_module
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.runtime.gpu_lock import GPU_LOCK_ENV, GPU_LOCK_SCOPE_ENV
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src/tritonforge/examples/vector_add.py"


class _Worker:
    """Records each request and the GPU lock it ran under; answers with no evaluation."""

    def __init__(self, held: list[str | None]):
        self.held, self.requests = held, []
        self.cut = False

    def ensure_started(self):
        pass

    def evaluate(self, request, deadline=None):
        self.requests.append((request, self.held[-1] if self.held else None))
        return None

    def close(self):
        pass


@pytest.fixture
def evaluator(tmp_path, monkeypatch):
    held: list[str | None] = []

    class _Lock:
        def __init__(self, mode):
            self.mode = mode

        def __enter__(self):
            held.append(self.mode)

        def __exit__(self, *exc):
            held.pop()

    monkeypatch.setattr(evaluator_module, "gpu_lock", _Lock)
    ev = Evaluator(Settings(device="cpu"), tmp_path / "w", device="cuda")
    ev.worker = _Worker(held)
    ev._merge_rejections = lambda task, variants, evaluation, rejected: evaluation
    return ev


def _lock_env(monkeypatch, scope: str | None):
    monkeypatch.setenv(GPU_LOCK_ENV, "/tmp/unused.lock")
    if scope:
        monkeypatch.setenv(GPU_LOCK_SCOPE_ENV, scope)
    else:
        monkeypatch.delenv(GPU_LOCK_SCOPE_ENV, raising=False)


def test_a_timed_request_of_shards_is_compiled_first_with_no_lock(evaluator, monkeypatch):
    _lock_env(monkeypatch, "all")
    task = task_from_file(EXAMPLE)
    evaluator.evaluate(task, (original_variant(task),), purpose="time", verify=False, time=True,
                       run_cases=False, case_ids=("p",))
    (warm, warm_lock), (timed, timed_lock) = evaluator.worker.requests
    assert warm_lock is None and timed_lock == "exclusive"
    assert warm.compile_only and not timed.compile_only
    assert not warm.time and not warm.verify and warm.run_cases and warm.case_ids == ("p",)
    assert timed.time and not timed.run_cases and warm.variants == timed.variants


def test_verification_of_shards_is_compiled_first_too_and_a_lone_process_never(evaluator,
                                                                                monkeypatch):
    task = task_from_file(EXAMPLE)
    _lock_env(monkeypatch, "all")
    evaluator.evaluate(task, (original_variant(task),), purpose="verify", time=False)
    assert [(r.compile_only, lock) for r, lock in evaluator.worker.requests] == \
        [(True, None), (False, "shared")]
    evaluator.worker.requests.clear()
    _lock_env(monkeypatch, None)       # the lock covers timing only: no shards verify beside it
    evaluator.evaluate(task, (original_variant(task),), purpose="time", time=True)
    evaluator.evaluate(task, (original_variant(task),), purpose="verify", time=False)
    assert [(r.compile_only, lock) for r, lock in evaluator.worker.requests] == \
        [(False, "exclusive"), (False, None)]


def test_compiling_without_launching_turns_every_launch_into_a_warmup(monkeypatch):
    from triton.runtime.jit import JITFunction

    from tritonforge.runtime.quick_autotune import compile_without_launching

    seen = []

    def recorder(self, *args, grid, warmup, **kwargs):
        seen.append((args, grid, warmup, kwargs))
        return "compiled"

    monkeypatch.setattr(JITFunction, "run", recorder)
    with compile_without_launching():
        assert JITFunction.run is not recorder
        assert JITFunction.run(object(), 1, 2, grid=(4,), warmup=False, BLOCK=8) == "compiled"
    assert JITFunction.run is recorder            # restored
    assert seen == [((1, 2), (4,), True, {"BLOCK": 8})]
    with pytest.raises(RuntimeError), compile_without_launching():
        raise RuntimeError("a wrapper's error")
    assert JITFunction.run is recorder            # restored after an error too


def test_a_compile_pass_gets_modules_and_autotuners_of_its_own():
    from types import SimpleNamespace

    from tritonforge.runtime.worker_evaluate import autotune_mode, module_label
    from tritonforge.runtime.timing import TimingPlan

    warm = SimpleNamespace(time=False, compile_only=True, timing=TimingPlan())
    assert autotune_mode("cuda", warm) == "compile"
    assert autotune_mode("cpu", warm) == "full"
    assert len({module_label("t", "v", m) for m in ("compile", "quick", "short", "full")}) == 4


def test_a_compile_pass_that_kills_the_worker_is_not_tried_again_for_that_task(evaluator,
                                                                              monkeypatch):
    from tritonforge.model import DeviceInfo, Evaluation, Failure, Status, VariantResult

    _lock_env(monkeypatch, "all")
    task = task_from_file(EXAMPLE)
    v = original_variant(task)
    crashed = Evaluation(task.name, (VariantResult(v.name, v.hash, Status.CRASH,
                                                   Failure(Status.CRASH, "device-side assert")),),
                         DeviceInfo("test", False))
    worker = evaluator.worker
    plain = worker.evaluate
    worker.evaluate = lambda request, deadline=None: (worker.requests.append((request, None)) or crashed) \
        if request.compile_only else plain(request)
    evaluator.evaluate(task, (v,), purpose="time", time=True)
    evaluator.evaluate(task, (v,), purpose="time", time=True, case_ids=("other",))
    assert [r.compile_only for r, _ in worker.requests] == [True, False, False]
    assert task.name in evaluator.no_compile_pass


def _variants(task, n):
    from tritonforge.model import Variant

    v0 = original_variant(task)
    return (v0,) + tuple(Variant(f"c{i}", task.source + f"\n# {i}\n", f"h{i}") for i in range(n))


def _hang_on(names, task):
    """A compile pass that hangs on the first of ``names`` it meets (the rest SKIPPED), as
    runtime.worker_client reports a worker killed for no progress."""
    from tritonforge.model import DeviceInfo, Evaluation, Failure, Status, VariantResult

    def answer(request):
        culprit = next((v.name for v in request.variants if v.name in names), None)
        results = []
        for v in request.variants:
            if culprit is None:
                results.append(VariantResult(v.name, v.hash, Status.OK))
            elif v.name == culprit:
                results.append(VariantResult(v.name, v.hash, Status.TIMEOUT, Failure(
                    Status.TIMEOUT, "no progress for 180 s during compile of case perf-10: killed",
                    "", "perf-10")))
            else:
                results.append(VariantResult(v.name, v.hash, Status.SKIPPED,
                                             Failure(Status.SKIPPED, f"not evaluated: {culprit} timeout first")))
        return Evaluation(task.name, tuple(results), DeviceInfo("test", False))
    return answer


def test_a_candidate_that_hangs_compiling_is_left_out_of_the_locked_request(evaluator, monkeypatch):
    """max_reduction (H100, 2026-11-25): a 64 x 16384 tile compiled for over 180 s in the compile
    pass; run again under the exclusive lock it would hang there too."""
    from tritonforge.model import Status

    _lock_env(monkeypatch, "all")
    task = task_from_file(EXAMPLE)
    variants = _variants(task, 3)
    worker = evaluator.worker
    hang = _hang_on({"c1"}, task)
    worker.evaluate = lambda request, deadline=None: (worker.requests.append((request, None)) or hang(request)) \
        if request.compile_only else (worker.requests.append((request, "x")) or hang(request))
    evaluator._merge_rejections = Evaluator._merge_rejections.__get__(evaluator)
    got = evaluator.evaluate(task, variants, purpose="time", time=True)
    passes = [[v.name for v in r.variants] for r, _ in worker.requests if r.compile_only]
    locked = [[v.name for v in r.variants] for r, _ in worker.requests if not r.compile_only]
    assert passes == [["original", "c0", "c1", "c2"], ["original", "c0", "c2"]]
    assert locked == [["original", "c0", "c2"]]
    assert got.result("c1").status is Status.TIMEOUT
    assert "compile pass" in got.result("c1").failure.reason
    assert [got.result(n).status for n in ("original", "c0", "c2")] == [Status.OK] * 3
    assert task.name not in evaluator.no_compile_pass


def test_a_reference_that_hangs_compiling_is_never_left_out(evaluator, monkeypatch):
    _lock_env(monkeypatch, "all")
    task = task_from_file(EXAMPLE)
    variants = _variants(task, 1)
    worker = evaluator.worker
    hang = _hang_on({"original"}, task)
    plain = worker.evaluate
    worker.evaluate = lambda request, deadline=None: (worker.requests.append((request, None)) or hang(request)) \
        if request.compile_only else plain(request)
    evaluator.evaluate(task, variants, purpose="time", time=True)
    locked = [[v.name for v in r.variants] for r, _ in worker.requests if not r.compile_only]
    assert locked == [["original", "c0"]]
    assert task.name in evaluator.no_compile_pass


def test_the_baseline_compiles_first_on_any_gpu_side_by_side(evaluator, monkeypatch):
    """The original's baseline compiles its kernels in a compile pass first, in several threads,
    even on a GPU no shard shares; other timed requests there do not."""
    from tritonforge.runtime.hardware import compile_threads

    _lock_env(monkeypatch, None)
    task = task_from_file(EXAMPLE)
    evaluator.evaluate(task, (original_variant(task),), purpose="baseline", verify=False,
                       time=True, keep_going=True)
    (warm, warm_lock), (timed, timed_lock) = evaluator.worker.requests
    assert warm.compile_only and warm_lock is None and timed_lock == "exclusive"
    assert warm.compile_threads == compile_threads(evaluator.settings.compile_threads) >= 1
    assert not timed.compile_only and timed.compile_threads == 1
    evaluator.worker.requests.clear()
    evaluator.evaluate(task, (original_variant(task),), purpose="time", time=True)
    assert [r.compile_only for r, _ in evaluator.worker.requests] == [False]


def test_compile_threads_follow_the_setting_or_a_quarter_of_the_cores(monkeypatch):
    import os

    from tritonforge.runtime import hardware

    assert hardware.compile_threads(3) == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert hardware.compile_threads(0) == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(128)), raising=False)
    assert hardware.compile_threads(0) == hardware.MAX_COMPILE_THREADS
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert hardware.compile_threads(0) == 1


def test_compiles_inside_run_in_the_pool_and_the_exit_waits_for_them():
    """``compile_in_parallel`` is Triton's AsyncCompileMode over a thread pool: a compile handed
    to it runs in another thread, a failing one is dropped, leaving waits for all and reports
    each; with one thread nothing is handed anywhere."""
    import threading
    import time

    from triton.runtime import _async_compile

    from tritonforge.runtime.quick_autotune import compile_in_parallel

    main = threading.get_ident()
    ran, finalized, progress = [], [], []

    def compile_fn(i):
        def run():
            time.sleep(0.05)
            ran.append((i, threading.get_ident() != main))
            if i == 1:
                raise RuntimeError("a kernel that does not compile")
            return f"kernel {i}"
        return run

    with compile_in_parallel(2, lambda done, total: progress.append((done, total))):
        mode = _async_compile.active_mode.get()
        assert mode is not None
        for i in range(3):
            mode.submit(f"key{i}", compile_fn(i), finalized.append)
        mode.submit("key0", compile_fn(0), finalized.append)     # the same kernel: once
    assert _async_compile.active_mode.get() is None
    assert sorted(ran) == [(0, True), (1, True), (2, True)]
    assert sorted(finalized) == ["kernel 0", "kernel 2"]
    assert progress == [(1, 3), (2, 3), (3, 3)]
    with compile_in_parallel(1):
        assert _async_compile.active_mode.get() is None


def test_a_compile_pass_compiles_the_candidates_or_the_reference_alone():
    from tritonforge.runtime.worker_evaluate import compiled_in_pass

    assert compiled_in_pass(["original"]) == ["original"]
    assert compiled_in_pass(["original", "c0", "c1"]) == ["c0", "c1"]
