"""A case's timing builds every variant's inputs side by side (runtime.worker_evaluate); where the
device runs out of memory building them, the variants that did not fit are timed in a group of
their own beside the reference on the same case, instead of failing "oom". The builder here
holds at most CAPACITY invocations at once, as a device whose memory holds that many copies of
a case's inputs would."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from tritonforge.config import Settings
from tritonforge.model import DeviceInfo, Status, Variant
from tritonforge.runtime import worker_evaluate
from tritonforge.runtime.evaluator import original_variant
from tritonforge.runtime.protocol import EvaluateRequest
from tritonforge.runtime.timing_plan import timing_plan
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
SIN_SPEC = ('entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [300] }]\n'
            '[[case]]\nid = "p"\nrole = "performance"\nargs = [{ tensor = [400] }]\n')

CAPACITY = 3


class _Held:
    """An invocation that counts itself alive until collected."""

    live = 0

    def __init__(self, inner):
        self._inner = inner
        _Held.live += 1

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __del__(self):
        _Held.live -= 1


class _TightBuilder:
    def __init__(self, inner):
        self._inner = inner
        self.refused = 0

    def build(self, module, case, seed):
        if _Held.live >= CAPACITY:
            self.refused += 1
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.91 GiB (a test)")
        return _Held(self._inner.build(module, case, seed))

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _timed(tmp_path, monkeypatch, copies: int):
    task = task_from_file(EXAMPLE, _spec(tmp_path))
    variants = (original_variant(task),) + tuple(
        Variant(f"c{i}", task.source + f"\n# copy {i}\n", f"copy {i}") for i in range(copies))
    made = []
    real = worker_evaluate._builder

    def tight(reference, dev, module_dir):
        made.append(_TightBuilder(real(reference, dev, module_dir)))
        return made[-1]
    monkeypatch.setattr(worker_evaluate, "_builder", tight)
    plan = dataclasses.replace(timing_plan(Settings(device="cpu")), abandon_slower=None)
    request = EvaluateRequest(task, variants, verify=False, time=True, timing=plan,
                              run_cases=False)
    evaluation, broken = worker_evaluate.evaluate_request(
        request, DeviceInfo("cpu", True), tmp_path / "modules", lambda p: None)
    return evaluation, broken, made[0]


def _spec(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(SIN_SPEC)
    return path


def test_variants_that_do_not_fit_beside_the_others_are_timed_in_a_group_of_their_own(
        tmp_path, monkeypatch):
    evaluation, broken, builder = _timed(tmp_path, monkeypatch, copies=5)
    assert not broken and builder.refused >= 2         # it did run out, more than once
    for r in evaluation.results:
        assert r.status is Status.OK, r
        assert r.timing("p") is not None and r.timing("p").samples_ms, r.variant
    # the reference was timed in every group (three: itself + 2, + 2, + 1), its samples joined
    ref, one = evaluation.result("original").timing("p"), evaluation.result("c0").timing("p")
    assert len(ref.samples_ms) == 3 * len(one.samples_ms)


def test_a_variant_that_does_not_fit_beside_the_reference_alone_fails_oom(tmp_path, monkeypatch):
    global CAPACITY
    CAPACITY, saved = 1, CAPACITY
    try:
        evaluation, broken, _ = _timed(tmp_path, monkeypatch, copies=2)
    finally:
        CAPACITY = saved
    assert not broken
    assert evaluation.result("original").status is Status.OK
    assert {evaluation.result(f"c{i}").status for i in range(2)} == {Status.OOM}


def test_on_a_gpu_the_next_variant_waits_where_free_memory_is_under_twice_the_last_build(monkeypatch):
    """The device-memory branch of ``_build_fitting`` (only on "cuda"), with the CUDA allocator's
    counters played by a fake device of 100 units, where each build takes 20: the reference and
    three more fit (20 left after the fourth is under 2 x 20), the rest wait for the next group;
    the allocator's unused blocks (reserved, not allocated) count as free."""
    from types import SimpleNamespace

    device = {"allocated": 0, "reserved": 0, "total": 100}

    class Builder:
        def build(self, module, case, seed):
            device["allocated"] += 20
            device["reserved"] = max(device["reserved"], device["allocated"])
            return SimpleNamespace(timed=lambda: None)

    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: device["allocated"])
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: device["reserved"])
    monkeypatch.setattr(torch.cuda, "mem_get_info",
                        lambda *a: (device["total"] - device["reserved"], device["total"]))
    states = [worker_evaluate._State(Variant(f"v{i}", "x = 1\n", f"v{i}")) for i in range(6)]
    case = SimpleNamespace(id="p")
    built, waiting = worker_evaluate._build_fitting(states, states[0], Builder(), case, 0, {}, {},
                                                    True, "cuda")
    assert built == states[:4] and waiting == states[4:]
    # the group's inputs freed (the allocator keeps its blocks): the next group fits again
    device["allocated"] = 0
    built, waiting = worker_evaluate._build_fitting([states[0]] + waiting, states[0], Builder(),
                                                    case, 0, {}, {}, True, "cuda")
    assert built == [states[0]] + states[4:] and waiting == []


def test_groups_share_their_cases_time_and_stop_where_the_reference_failed_the_case():
    """The case's share of the time left is split among the groups still owed
    (``_groups_after``); no group is timed without the reference once it failed the case; a
    group timed another way adds no samples to the reference's timing."""
    from tritonforge.model import Failure, Timing, TimingMethod

    states = [worker_evaluate._State(Variant(f"v{i}", "x = 1\n", f"v{i}")) for i in range(7)]
    ref = states[0]
    assert worker_evaluate._groups_after(states[:3], states[3:]) == 2     # 4 left, 2 a group
    assert worker_evaluate._groups_after(states[:3], []) == 0
    assert worker_evaluate._next_group(ref, states[3:], "p") == [ref] + states[3:]
    ref.fail(Failure(Status.CRASH, "illegal memory access", case_id="p"), True)
    assert worker_evaluate._next_group(ref, states[3:], "p") is None
    assert worker_evaluate._next_group(ref, states[3:], "q") == [ref] + states[3:]
    events, graphs = TimingMethod.CUDA_EVENTS_PACED, TimingMethod.CUDA_GRAPH
    worker_evaluate._add_samples(ref, Timing("q", "v0", events, (1.0, 1.1)))
    worker_evaluate._add_samples(ref, Timing("q", "v0", events, (1.2,)))
    worker_evaluate._add_samples(ref, Timing("q", "v0", graphs, (0.5,)))
    assert [t.samples_ms for t in ref.timings] == [(1.0, 1.1, 1.2)]
