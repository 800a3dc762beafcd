"""Watch what a variant does while it runs: Triton launches, torch calls, streams, and patches.

- ``count_launches()`` counts Triton kernel launches. On a GPU Triton calls
  ``triton.knobs.runtime.launch_enter_hook`` (a HookChain) from its C launcher with the kernel name
  and stream; under ``TRITON_INTERPRET=1`` no hook is called at all, so the interpreter's
  ``GridExecutor.__call__`` (every interpreted launch goes through it, autotuned ones included) is
  wrapped as well. The same counter therefore works on both.
- ``record_torch_calls()`` records the aten ops a call dispatches (a ``TorchDispatchMode``: it sees
  ``torch.matmul``, ``F.softmax``, ``torch.ops.aten.mm`` and C bindings alike, after their
  decomposition), the torch methods that hand data to the host (``numpy``, ``tolist``: a
  ``TorchFunctionMode``, the dispatcher never sees them) and the CUDA streams it creates.
- Work done by Triton itself (copying arguments in the interpreter, autotune benchmarking) is not
  the variant's and is ignored by both: see ``triton_internal()``.
- ``integrity_snapshot()`` / ``check_integrity()`` / ``restore_integrity()`` (verify.integrity,
  re-exported here) catch a variant that patches timers, torch, triton or global settings.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .integrity import (  # noqa: F401 - re-exported: part of the guards' public face
    IntegritySnapshot, check_integrity, integrity_snapshot, restore_integrity, watch_integrity,
)

# triton is imported inside functions: it reads TRITON_INTERPRET when imported, and driver and test
# processes import this module before they set it (tests/transforms/conftest.py).

log = logging.getLogger(__name__)

_tls = threading.local()


def triton_internal() -> bool:
    """True while Triton's own launch or autotune-benchmark machinery runs (not the variant's code)."""
    return getattr(_tls, "depth", 0) > 0


@contextmanager
def _inside_triton() -> Iterator[None]:
    _tls.depth = getattr(_tls, "depth", 0) + 1
    try:
        yield
    finally:
        _tls.depth -= 1


@dataclass(frozen=True)
class LaunchRecord:
    """One Triton kernel launch: the kernel's name, its grid (interpreter) and stream (GPU)."""

    kernel: str
    grid: tuple = ()
    stream: int | None = None


class _Taps:
    """Installs the launch and Triton-internal taps once, however many guards are active."""

    def __init__(self) -> None:
        self.users = 0
        self.listeners: list[Callable[[LaunchRecord], None]] = []
        self._undo: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def acquire(self, listener: Callable[[LaunchRecord], None] | None) -> None:
        with self._lock:
            if listener is not None:
                self.listeners.append(listener)
            if self.users == 0:
                self._install()
            self.users += 1

    def release(self, listener: Callable[[LaunchRecord], None] | None) -> None:
        with self._lock:
            if listener is not None and listener in self.listeners:
                self.listeners.remove(listener)
            self.users -= 1
            if self.users == 0:
                for undo in reversed(self._undo):
                    undo()
                self._undo.clear()

    def _emit(self, record: LaunchRecord) -> None:
        for listener in list(self.listeners):
            listener(record)

    def _gpu_hook(self, metadata: Any) -> None:
        data = getattr(metadata, "data", None) or {}
        self._emit(LaunchRecord(kernel=str(data.get("name", "?")), stream=data.get("stream")))

    def _install(self) -> None:
        import triton

        chain = triton.knobs.runtime.launch_enter_hook
        chain.add(self._gpu_hook)
        self._undo.append(lambda: chain.remove(self._gpu_hook))

        try:
            from triton.runtime.interpreter import GridExecutor
        except Exception:  # pragma: no cover - interpreter always ships with triton 3.x
            GridExecutor = None
        if GridExecutor is not None:
            original_call = GridExecutor.__call__
            taps = self

            def interpreted_launch(executor, *args, **kwargs):
                grid = executor.grid if isinstance(executor.grid, tuple) else ()
                taps._emit(LaunchRecord(kernel=getattr(executor.fn, "__name__", "?"), grid=grid))
                with _inside_triton():
                    return original_call(executor, *args, **kwargs)

            GridExecutor.__call__ = interpreted_launch
            self._undo.append(lambda: setattr(GridExecutor, "__call__", original_call))

        from triton.runtime.autotuner import Autotuner

        original_bench = Autotuner._bench

        def bench(tuner, *args, **kwargs):
            with _inside_triton():
                return original_bench(tuner, *args, **kwargs)

        Autotuner._bench = bench
        self._undo.append(lambda: setattr(Autotuner, "_bench", original_bench))


_TAPS = _Taps()


@dataclass
class LaunchCounter:
    """What ``count_launches()`` saw; ``caller_stream`` is the stream current when it started."""

    launches: list[LaunchRecord] = field(default_factory=list)
    caller_stream: int | None = None

    @property
    def count(self) -> int:
        return len(self.launches)

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(sorted({r.kernel for r in self.launches}))

    def side_stream_launches(self) -> list[LaunchRecord]:
        """Launches on a stream other than the caller's (GPU only; the interpreter has none)."""
        if self.caller_stream is None:
            return []
        return [r for r in self.launches if r.stream is not None and r.stream != self.caller_stream]


def _current_stream_handle() -> int | None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return int(torch.cuda.current_stream().cuda_stream)
    return None


@contextmanager
def count_launches() -> Iterator[LaunchCounter]:
    """Count Triton kernel launches in the block, on a GPU and under the interpreter alike."""
    counter = LaunchCounter(caller_stream=_current_stream_handle())
    _TAPS.acquire(counter.launches.append)
    try:
        yield counter
    finally:
        _TAPS.release(counter.launches.append)


# Tensor methods that move data out of torch's sight (the dispatcher never sees them).
_HOST_ESCAPES = frozenset({"numpy", "tolist", "__array__", "__dlpack__", "__array_interface__"})


def op_name(func: Any) -> str:
    """``aten.mm`` for ``aten.mm.default``: the overload packet's name."""
    return str(getattr(func, "overloadpacket", func))


@dataclass
class TorchCallRecorder:
    """What ``record_torch_calls()`` saw: aten ops with counts, host escapes, streams created."""

    ops: dict[str, int] = field(default_factory=dict)
    streams_created: int = 0

    def note(self, name: str) -> None:
        self.ops[name] = self.ops.get(name, 0) + 1


class _DispatchRecorder(TorchDispatchMode):
    def __init__(self, recorder: TorchCallRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not triton_internal():
            name = op_name(func)
            if name == "aten._to_copy" and "device" in kwargs and args and \
                    isinstance(args[0], torch.Tensor) and \
                    torch.device(kwargs["device"]) != args[0].device:
                name = "aten._to_copy(device)"      # a move to another device is not plumbing
            self.recorder.note(name)
        return func(*args, **kwargs)


class _FunctionRecorder(TorchFunctionMode):
    def __init__(self, recorder: TorchCallRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in _HOST_ESCAPES and not triton_internal():
            self.recorder.note(f"Tensor.{name}")
        return func(*args, **(kwargs or {}))


@contextmanager
def _watch_streams(recorder: TorchCallRecorder) -> Iterator[None]:
    """Count ``torch.cuda.Stream(...)`` constructions (works, and is testable, without CUDA)."""
    cuda = torch.cuda
    original = cuda.Stream

    class WatchedStream(original):  # type: ignore[misc, valid-type]
        def __new__(cls, *args, **kwargs):
            if not triton_internal():          # do_bench_cudagraph makes one while autotuning
                recorder.streams_created += 1
            return original.__new__(original, *args, **kwargs)

    WatchedStream.__name__ = WatchedStream.__qualname__ = "Stream"
    cuda.Stream = WatchedStream
    try:
        yield
    finally:
        cuda.Stream = original


@contextmanager
def record_torch_calls() -> Iterator[TorchCallRecorder]:
    """Record the torch-level work done in the block (see the module docstring)."""
    recorder = TorchCallRecorder()
    _TAPS.acquire(None)
    try:
        with _watch_streams(recorder), _FunctionRecorder(recorder), _DispatchRecorder(recorder):
            yield recorder
    finally:
        _TAPS.release(None)
