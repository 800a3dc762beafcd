"""Performance-script inputs are built once per run and shared through disk (runtime.perf_inputs):
a second worker loads the size it needs instead of rebuilding every size."""

from __future__ import annotations

import fcntl
import functools
import multiprocessing as mp
import os
import signal as signal_module
import threading
import time
import types
from pathlib import Path

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
    with open(folder / "1.pt", "r+b") as fh:      # a size file cut short: never loaded
        fh.truncate(10)
    assert perf_inputs.stored_count(folder) is None
    (folder / perf_inputs.MANIFEST).unlink()
    assert perf_inputs.stored_count(folder) is None


@pytest.mark.parametrize("inputs,host", [([torch.ones(2), (torch.ones(1), 3)], True), ([3, "x"], False)])
def test_only_host_tensors_are_stored(inputs, host):
    assert perf_inputs.on_host_only(inputs) is host


def test_the_memory_limit_counts_own_memory_not_mapped_input_files(tmp_path):
    """A worker's memory-mapped inputs are page cache, not its own memory: reading a 256 MiB
    mapped file leaves the measure nearly unchanged, allocating 256 MiB raises it."""
    import mmap
    import os

    from tritonforge.runtime.worker_client import _rss_bytes

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


# ---------------------------------------------------------------- one build per run, across processes
# Workers are real processes (spawn, as the runtime's are); what they run sits at module level so
# that a spawned child can import it. Each build leaves a marker file, so builds can be counted.

def _build_set(markers: Path, pause_s: float = 0.0) -> list:
    markers.mkdir(parents=True, exist_ok=True)
    (markers / f"build-{os.getpid()}-{time.monotonic_ns()}").touch()
    time.sleep(pause_s)                        # long enough for the others to arrive and wait
    gen = torch.Generator().manual_seed(7)
    return [torch.rand(2 ** i, generator=gen) for i in range(3, 6)] + [(torch.arange(4), 3)]


def _ask(folder: Path, markers: Path, out: Path, start, pause_s: float) -> None:
    """One worker: wait for the others, ask for the set, write every size it then sees to ``out``."""
    start.wait(timeout=60)
    got = perf_inputs.obtain(folder, functools.partial(_build_set, markers, pause_s))
    sizes = got.built if got.built is not None else [
        perf_inputs.load(folder, i) for i in range(perf_inputs.stored_count(folder))]
    torch.save({"built": got.built is not None, "stored": got.stored, "sizes": sizes}, out)


class _Hang:
    """Pickling it (``torch.save``) signals, then hangs: a builder stuck mid-write."""

    def __init__(self, signal: Path):
        self.signal = signal

    def __reduce__(self):
        self.signal.touch()
        time.sleep(120)
        return (_Hang, (self.signal,))


def _build_then_hang(markers: Path, signal: Path) -> list:
    markers.mkdir(parents=True, exist_ok=True)
    (markers / f"build-{os.getpid()}").touch()
    return [torch.ones(1000), (torch.zeros(10), _Hang(signal))]


def _die_mid_write(folder: Path, markers: Path, signal: Path) -> None:
    perf_inputs.obtain(folder, functools.partial(_build_then_hang, markers, signal))


def _in_thread(fn):
    """Run ``fn`` in a daemon thread; returns (thread, result list) so a test can time it out."""
    result: list = []
    thread = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    thread.start()
    return thread, result


def test_workers_asking_at_once_build_the_set_once_and_see_the_same_tensors(tmp_path):
    ctx = mp.get_context("spawn")
    folder, markers = tmp_path / "perf-inputs" / "kmod-abc", tmp_path / "markers"
    start = ctx.Barrier(3)
    outs = [tmp_path / f"out{i}.pt" for i in range(3)]
    procs = [ctx.Process(target=_ask, args=(folder, markers, out, start, 1.5)) for out in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert len(list(markers.iterdir())) == 1                  # built exactly once
    seen = [torch.load(out, weights_only=False) for out in outs]
    assert sorted(s["built"] for s in seen) == [False, False, True]
    assert all(s["stored"] for s in seen) and perf_inputs.stored_count(folder) == 4
    expected = _build_set(tmp_path / "own")
    for s in seen:
        assert len(s["sizes"]) == 4
        for got, want in zip(s["sizes"][:3], expected[:3]):
            assert torch.equal(got, want)
        assert torch.equal(s["sizes"][3][0], expected[3][0]) and s["sizes"][3][1] == 3


def test_a_stored_set_is_read_without_taking_the_lock(tmp_path):
    folder, markers = tmp_path / "perf-inputs" / "kmod-abc", tmp_path / "markers"
    assert perf_inputs.obtain(folder, functools.partial(_build_set, markers)).stored
    with open(perf_inputs.lock_path(folder), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)                      # as a builder would hold it
        reader, result = _in_thread(lambda: perf_inputs.obtain(folder, functools.partial(_build_set, markers)))
        reader.join(timeout=20)
        assert not reader.is_alive(), "a reader of a stored set waited for the lock"
    assert result[0].built is None and result[0].stored
    assert len(list(markers.iterdir())) == 1
    assert torch.equal(perf_inputs.load(folder, 0), _build_set(tmp_path / "own")[0])


def test_a_builder_killed_mid_write_leaves_nothing_loadable_and_a_waiter_builds(tmp_path):
    ctx = mp.get_context("spawn")
    root, markers, signal = tmp_path / "perf-inputs", tmp_path / "markers", tmp_path / "writing"
    folder = root / "kmod-abc"
    builder = ctx.Process(target=_die_mid_write, args=(folder, markers, signal))
    builder.start()
    deadline = time.monotonic() + 90
    while not signal.exists() and builder.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert signal.exists(), "the builder never reached its second size"
    partial = list(root.glob("kmod-abc.building-*"))
    assert len(partial) == 1 and (partial[0] / "0.pt").exists()             # stopped mid-write...
    assert not folder.exists() and perf_inputs.stored_count(folder) is None  # ...and not loadable
    waiter, result = _in_thread(lambda: perf_inputs.obtain(folder, functools.partial(_build_set, markers)))
    time.sleep(0.5)
    assert waiter.is_alive()                                  # waits on the builder's lock
    os.kill(builder.pid, signal_module.SIGKILL)
    builder.join(timeout=30)
    waiter.join(timeout=60)
    assert not waiter.is_alive() and result[0].built is not None and result[0].stored
    assert len(list(markers.iterdir())) == 2                  # the dead builder's, then the waiter's
    assert perf_inputs.stored_count(folder) == 4 and not list(root.glob("kmod-abc.building-*"))
    assert torch.equal(perf_inputs.load(folder, 1), result[0].built[1])


def test_a_killed_builders_partial_folder_is_never_loaded(tmp_path):
    folder = tmp_path / "kmod-abc"
    partial = tmp_path / f"kmod-abc.building-{os.getpid() + 1}"
    partial.mkdir()
    torch.save(torch.ones(3), partial / "0.pt")               # no manifest: the builder died
    assert perf_inputs.stored_count(partial) is None and perf_inputs.stored_count(folder) is None
    folder.mkdir()                                            # a folder without a whole set
    (folder / "0.pt").write_bytes(b"PK\x03")
    (folder / perf_inputs.MANIFEST).write_text('{"bytes": [100]}')
    assert perf_inputs.stored_count(folder) is None
    got = perf_inputs.obtain(folder, functools.partial(_build_set, tmp_path / "markers"))
    assert got.stored and perf_inputs.stored_count(folder) == 4 and not partial.exists()


def test_a_set_that_cannot_be_stored_is_built_by_each_worker_without_waiting(tmp_path):
    folder, markers = tmp_path / "kmod-abc", tmp_path / "markers"
    first = perf_inputs.obtain(folder, lambda: [1, 2])        # no tensors: nothing to store
    assert first.built == [1, 2] and not first.stored and stored_nothing(folder)
    with open(perf_inputs.lock_path(folder), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        other, result = _in_thread(lambda: perf_inputs.obtain(folder, functools.partial(_build_set, markers)))
        other.join(timeout=20)
        assert not other.is_alive()
    assert result[0].built is not None and not result[0].stored
    perf_inputs.remove_for(tmp_path, "kmod")
    assert not list(tmp_path.glob("kmod-*"))


def stored_nothing(folder: Path) -> bool:
    return perf_inputs.stored_count(folder) is None and not folder.exists()


def test_the_disk_reserve_is_a_quarter_between_8_and_32_gib():
    gib = 2**30
    assert perf_inputs.reserve_bytes(64 * gib) == 16 * gib      # the GPU machine's disk
    assert perf_inputs.reserve_bytes(16 * gib) == 8 * gib
    assert perf_inputs.reserve_bytes(252 * 10**9) == 32 * gib


# ---- a size kept on the device for the next variant (InvocationBuilder._device_inputs) ----------

DEVICE_SCRIPT = """
import torch
import TritonBench_v1.kmod as K

class performance_metrics:
    def __init__(self):
        self.input_tensors = []
    def get_input_tensors(self):
        self.input_tensors = [(torch.rand(2 ** i), 3) for i in range(3, 7)]
    def to_cuda(self, t):
        K.moves.append(1)
        return t
    def call_op(self, t):
        return K.double(t[0])
"""


def _device_builder(tmp_path, monkeypatch, free_bytes):
    """A builder for a GPU whose host-to-device move is counted (``to_cuda`` keeps the tensors
    where they are: no GPU here)."""
    from contextlib import nullcontext

    from tritonforge.runtime import invoke

    monkeypatch.delenv(perf_inputs.ENV_DIR, raising=False)
    monkeypatch.setattr(invoke, "drawn_on", lambda device: nullcontext())
    monkeypatch.setattr(invoke, "_free_device_bytes", lambda device: free_bytes)
    mod = _module()
    mod.moves = []
    return InvocationBuilder(mod, "cuda", tmp_path / "w0"), mod


def _device_case(i: int) -> Case:
    return Case(f"perf-{i:02d}", CaseRole.PERFORMANCE, PerfScriptCall(DEVICE_SCRIPT, "kmod", i))


def test_the_variants_of_a_case_get_device_clones_of_one_move_from_the_host(tmp_path, monkeypatch):
    builder, mod = _device_builder(tmp_path, monkeypatch, 10 ** 12)
    first = builder.build(mod, _device_case(2), 0).arguments[0]
    second = builder.build(mod, _device_case(2), 0).arguments[0]
    assert len(mod.moves) == 1                                   # one move for both variants
    assert torch.equal(first[0], second[0]) and first[1] == second[1] == 3
    assert first[0].data_ptr() != second[0].data_ptr()           # each variant its own tensor
    first[0].fill_(-1.0)                                         # a variant writing its input...
    third = builder.build(mod, _device_case(2), 0).arguments[0]
    assert torch.equal(third[0], second[0]) and not torch.equal(third[0], first[0])  # ...alone
    builder.build(mod, _device_case(3), 0)                       # another size: moved, kept instead
    builder.build(mod, _device_case(2), 0)
    assert len(mod.moves) == 3
    builder.build(mod, _device_case(2), 1)                       # another seed: moved again
    assert len(mod.moves) == 4


def _storage_bytes(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage())


def test_each_device_build_lies_at_the_start_of_a_buffer_padded_with_garbage(tmp_path, monkeypatch):
    """An original that stores a little past its argument's end (token_softmax_llama's) writes
    into memory its process owns, not into another allocation or unmapped memory; the pad is
    0x7F bytes, so a candidate that drops a mask reads garbage there, not zeros."""
    from tritonforge.runtime import invoke
    from tritonforge.runtime.invoke import TAIL_FILL, TAIL_PAD_MIN

    monkeypatch.setattr(invoke, "PADDED_DEVICES", ("cuda", "cpu"))   # no GPU here
    builder, mod = _device_builder(tmp_path, monkeypatch, 10 ** 12)
    first = builder.build(mod, _device_case(2), 0).arguments[0][0]     # 32 floats: 128 bytes
    raw = _storage_bytes(first)
    assert first.data_ptr() == first.untyped_storage().data_ptr()      # alignment as allocated
    assert raw.numel() == first.nbytes + TAIL_PAD_MIN
    assert bool((raw[first.nbytes:] == TAIL_FILL).all())
    raw[first.nbytes:].fill_(0)                                        # a store past its end...
    second = builder.build(mod, _device_case(2), 0).arguments[0][0]    # the kept copy's clone
    assert torch.equal(second, first) and len(mod.moves) == 1
    raw2 = _storage_bytes(second)
    assert raw2.numel() == second.nbytes + TAIL_PAD_MIN              # ...reaches no other build
    assert bool((raw2[second.nbytes:] == TAIL_FILL).all())
    second.fill_(-1.0)
    assert not torch.equal(builder.build(mod, _device_case(2), 0).arguments[0][0], second)


def test_a_kept_copy_is_never_shared_where_no_storage_could_be_padded(tmp_path, monkeypatch):
    """Past the pads' total (or where the device has no memory for a move) a storage stays
    where it is: a variant's copy of the kept inputs is then a clone, never the kept tensor."""
    from tritonforge.runtime import invoke

    monkeypatch.setattr(invoke, "PADDED_DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(invoke, "TAIL_PAD_TOTAL", 0)
    builder, mod = _device_builder(tmp_path, monkeypatch, 10 ** 12)
    first = builder.build(mod, _device_case(2), 0).arguments[0][0]
    first.fill_(-1.0)
    second = builder.build(mod, _device_case(2), 0).arguments[0][0]
    assert len(mod.moves) == 1 and not torch.equal(second, first)
    second.fill_(-2.0)
    third = builder.build(mod, _device_case(2), 0).arguments[0][0]
    assert not torch.equal(third, second) and not torch.equal(third, first)
    assert third.untyped_storage().nbytes() == third.nbytes                  # unpadded


def test_host_tensors_are_not_padded():
    from tritonforge.runtime.invoke import tail_padded

    t = torch.ones(4)
    ptr = t.data_ptr()
    tail_padded((t,))
    assert t.data_ptr() == ptr and t.untyped_storage().nbytes() == 16


def test_tail_padding_keeps_views_together_gradients_and_a_total_bound(monkeypatch):
    from tritonforge.runtime import invoke

    monkeypatch.setattr(invoke, "PADDED_DEVICES", ("cuda", "cpu"))
    base = torch.arange(12, dtype=torch.float32)
    view = base[4:].view(2, 4)
    leaf = torch.ones(3, requires_grad=True)
    small = torch.zeros(2, dtype=torch.int64)
    monkeypatch.setattr(invoke, "TAIL_PAD_TOTAL", 2 * invoke.TAIL_PAD_MIN)
    out = invoke.tail_padded((base, [view, {"g": leaf}], small, 7))
    assert out[0] is base and out[1][0] is view and out[3] == 7      # re-pointed in place
    assert base.untyped_storage().data_ptr() == view.untyped_storage().data_ptr()
    assert torch.equal(view.flatten(), torch.arange(4.0, 12.0)) and view.storage_offset() == 4
    assert _storage_bytes(base).numel() == 48 + invoke.TAIL_PAD_MIN
    assert leaf.requires_grad and leaf.is_leaf
    assert _storage_bytes(leaf).numel() == 12 + invoke.TAIL_PAD_MIN
    assert _storage_bytes(small).numel() == 16                         # past the total: left
    (leaf * 2).sum().backward()
    assert torch.equal(leaf.grad, torch.full((3,), 2.0))


def test_nothing_is_kept_where_the_free_memory_is_unknown_or_too_small(tmp_path, monkeypatch):
    builder, mod = _device_builder(tmp_path, monkeypatch, None)
    builder.build(mod, _device_case(2), 0)
    builder.build(mod, _device_case(2), 0)
    assert len(mod.moves) == 2
    builder, mod = _device_builder(tmp_path, monkeypatch, 100)  # 32 floats: 128 bytes > 25 of 100
    builder.build(mod, _device_case(2), 0)
    builder.build(mod, _device_case(2), 0)
    assert len(mod.moves) == 2


def test_only_plain_trees_of_dense_unaliased_leaf_tensors_are_reused():
    import collections

    from tritonforge.runtime.invoke import reusable_on_device

    t = torch.ones(8)
    big = 10 ** 9
    assert reusable_on_device((t, [torch.zeros(2)], {"n": 4, "dtype": torch.float16}, None), big)
    assert not reusable_on_device((t, t), big)                   # aliased: clones would not be
    assert not reusable_on_device((t, t[2:]), big)               # a view of the same storage
    assert not reusable_on_device(torch.ones(1).expand(8), big)  # overlapping: clone changes strides
    assert not reusable_on_device(torch.ones(4, 4).t()[::2], big)  # not dense
    pair = collections.namedtuple("pair", "a b")
    assert not reusable_on_device(pair(t, 1), big)               # comes back a plain tuple
    assert not reusable_on_device((t, object()), big)            # an object two variants would share
    leaf = torch.ones(3, requires_grad=True)
    assert reusable_on_device(leaf, big) and not reusable_on_device(leaf * 2, big)   # grad_fn
    assert not reusable_on_device(t, 4 * t.untyped_storage().nbytes() - 1)
    assert not reusable_on_device(t, None)
