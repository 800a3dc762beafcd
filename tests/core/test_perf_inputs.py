"""Performance-script inputs are built once per run and shared through disk (runtime.perf_inputs):
a second worker loads the size it needs instead of rebuilding every size."""

from __future__ import annotations

import types

import pytest
import torch

from tritonforge.model import Case, CaseRole, PerfScriptCall
from tritonforge.runtime import perf_inputs
from tritonforge.runtime.invoke import InvocationBuilder

SCRIPT = """
import torch
import TritonBench_v1.kmod as K

class performance_metrics:
    def __init__(self):
        self.input_tensors = []
    def get_input_tensors(self):
        K.builds.append(1)
        self.input_tensors = [torch.rand(2 ** i) for i in range(3, 7)]
    def to_cuda(self, t):
        return t
    def call_op(self, t):
        return K.double(t)
"""


def _module() -> types.ModuleType:
    m = types.ModuleType("kmod_original")
    m.builds = []
    m.double = lambda t: t * 2
    return m


def _case(i: int) -> Case:
    return Case(f"perf-{i:02d}", CaseRole.PERFORMANCE, PerfScriptCall(SCRIPT, "kmod", i))


def test_a_second_worker_loads_the_stored_size_instead_of_rebuilding(tmp_path, monkeypatch):
    monkeypatch.setenv(perf_inputs.ENV_DIR, str(tmp_path / "shared"))
    first_mod, second_mod = _module(), _module()
    first = InvocationBuilder(first_mod, "cpu", tmp_path / "w0")
    a = first.build(first_mod, _case(2), 0).arguments[0]
    assert len(first_mod.builds) == 1 and first._perf_inputs == {}      # nothing large kept
    second = InvocationBuilder(second_mod, "cpu", tmp_path / "w1")
    b = second.build(second_mod, _case(2), 0).arguments[0]
    assert second_mod.builds == [] and torch.equal(a, b) and b.numel() == 32
    assert second.perf_case_count(PerfScriptCall(SCRIPT, "kmod", 0)) == 4
    perf_inputs.remove_for(tmp_path / "shared", "kmod")
    assert not list((tmp_path / "shared").iterdir())


def test_without_a_shared_folder_inputs_stay_in_memory(tmp_path, monkeypatch):
    monkeypatch.delenv(perf_inputs.ENV_DIR, raising=False)
    mod = _module()
    builder = InvocationBuilder(mod, "cpu", tmp_path / "w0")
    x = builder.build(mod, _case(0), 0).arguments[0]
    y = builder.build(mod, _case(3), 0).arguments[0]
    assert len(mod.builds) == 1 and x.numel() == 8 and y.numel() == 64


def test_a_half_written_set_is_never_read(tmp_path):
    folder = tmp_path / "set"
    assert perf_inputs.store(folder, [torch.ones(3), (torch.zeros(2), 5)])
    assert perf_inputs.stored_count(folder) == 2
    assert perf_inputs.load(folder, 1)[1] == 5
    (folder / "count").unlink()
    assert perf_inputs.stored_count(folder) is None


@pytest.mark.parametrize("inputs,host", [([torch.ones(2), (torch.ones(1), 3)], True), ([3, "x"], False)])
def test_only_host_tensors_are_stored(inputs, host):
    assert perf_inputs.on_host_only(inputs) is host


def test_the_memory_limit_counts_own_memory_not_mapped_input_files(tmp_path):
    """A worker's memory-mapped inputs are page cache, not its own memory: reading a 256 MiB
    mapped file leaves the measure nearly unchanged, allocating 256 MiB raises it."""
    import mmap
    import os

    from tritonforge.runtime.client import _rss_bytes

    size = 256 * 2**20
    path = tmp_path / "big.bin"
    with open(path, "wb") as fh:
        fh.truncate(size)
    before = _rss_bytes(os.getpid())
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        touched = sum(mapped[i] for i in range(0, size, 4096))      # every page resident
        mapped_rss = _rss_bytes(os.getpid())
    own = bytearray(os.urandom(1)) * size                              # anonymous, touched
    owned_rss = _rss_bytes(os.getpid())
    assert touched == 0 and len(own) == size
    assert mapped_rss - before < size // 4
    assert owned_rss - before > size * 3 // 4
