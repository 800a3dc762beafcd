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
- ``integrity_snapshot()`` / ``check_integrity()`` / ``restore_integrity()`` catch a variant that
  patches timers, torch, triton or global numeric settings, by identity of the attributes.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import sys
import threading
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

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


# ---------------------------------------------------------------------------------------------
# Integrity: nothing the variant runs may replace what measures it or what the original relies on.

_WATCHED_MODULES = (
    "time", "torch", "torch.cuda", "torch.nn.functional", "torch.testing",
    "triton", "triton.language", "triton.testing", "triton.runtime", "triton.runtime.jit",
    "triton.runtime.autotuner", "triton.runtime.driver", "triton.compiler.compiler",
)
_WATCHED_CLASSES = (
    "torch.Tensor", "torch._C.TensorBase", "torch.cuda.Event", "torch.cuda.Stream",
    "triton.runtime.jit.JITFunction", "triton.runtime.jit.KernelInterface",
    "triton.runtime.autotuner.Autotuner", "triton.runtime.interpreter.GridExecutor",
    "triton.runtime.interpreter.InterpretedFunction", "triton.compiler.compiler.CompiledKernel",
)
_WATCHED_ENV_PREFIXES = ("TRITON_", "CUDA_", "PYTORCH_", "TORCH_", "NVIDIA_")


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def _settings() -> dict[str, Any]:
    """Global numeric and launch settings a variant could flip to change others' results."""
    import triton

    values: dict[str, Any] = {
        "torch.get_default_dtype()": torch.get_default_dtype(),
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision(),
        "torch.are_deterministic_algorithms_enabled()": torch.are_deterministic_algorithms_enabled(),
        "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "triton.knobs.runtime.interpret": triton.knobs.runtime.interpret,
        "triton.knobs.runtime.launch_enter_hook": triton.knobs.runtime.launch_enter_hook,
        "triton.knobs.runtime.launch_exit_hook": triton.knobs.runtime.launch_exit_hook,
        "launch_enter_hook.calls": tuple(triton.knobs.runtime.launch_enter_hook.calls),
    }
    return values


def _watched_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(_WATCHED_ENV_PREFIXES)}


@dataclass(frozen=True)
class IntegritySnapshot:
    """Identities of watched attributes and values of global settings at one moment.

    Take it BEFORE the variant's module is imported, or import-time patches go unseen.
    """

    attributes: tuple[tuple[str, Any, str, Any], ...]   # (owner name, owner, attribute, value)
    modules: tuple[tuple[str, Any], ...]                # sys.modules entries
    settings: tuple[tuple[str, Any], ...]
    env: tuple[tuple[str, str], ...] = ()


def _settle_lazy_rewrites() -> None:
    """Import what rewrites torch's own attributes on first import, before anything is recorded:
    importing torch._dynamo replaces ``torch.manual_seed`` with a wrapped copy (seen on an H200,
    triggered lazily inside a candidate's call: a false "patched"). About 1.4 s, once."""
    try:
        importlib.import_module("torch._dynamo")
    except Exception:  # pragma: no cover - a torch without dynamo has nothing to settle
        pass


def integrity_snapshot() -> IntegritySnapshot:
    _settle_lazy_rewrites()
    attributes: list[tuple[str, Any, str, Any]] = []
    modules: list[tuple[str, Any]] = []
    for name in _WATCHED_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        modules.append((name, module))
        for attr, value in list(vars(module).items()):
            if not attr.startswith("_") and _is_code(value):
                attributes.append((name, module, attr, value))
    for name in _WATCHED_CLASSES:
        try:
            cls = _resolve(name)
        except (ImportError, AttributeError):
            continue
        for attr, value in list(vars(cls).items()):
            if _is_code(value):
                attributes.append((name, cls, attr, value))
    return IntegritySnapshot(tuple(attributes), tuple(modules), tuple(_settings().items()),
                             tuple(_watched_env().items()))


_MISSING = object()


def _is_code(value: Any) -> bool:
    """Functions, classes, modules and descriptors: what a patch replaces. Plain data (e.g.
    ``torch.cuda.default_generators``, filled when CUDA initialises) changes legitimately; the
    settings that matter are watched by value in ``_settings``."""
    return callable(value) or isinstance(value, (types.ModuleType, property, staticmethod,
                                                 classmethod)) or \
        inspect.isdatadescriptor(value) or inspect.ismethoddescriptor(value)


def check_integrity(snapshot: IntegritySnapshot) -> list[str]:
    """What changed since ``snapshot``: one line per replaced attribute, module or setting."""
    problems: list[str] = []
    for owner_name, owner, attr, value in snapshot.attributes:
        now = vars(owner).get(attr, _MISSING)
        if now is _MISSING:
            problems.append(f"{owner_name}.{attr} was deleted")
        elif now is not value:
            problems.append(f"{owner_name}.{attr} was replaced (by {_describe(now)})")
    for name, module in snapshot.modules:
        if sys.modules.get(name) is not module:
            problems.append(f"sys.modules[{name!r}] was replaced")
    now_settings = _settings()
    for key, value in snapshot.settings:
        now = now_settings.pop(key, _MISSING)
        if now is _MISSING:
            problems.append(f"{key} was removed")
        elif not (now is value or _safe_eq(now, value)):
            problems.append(f"{key} changed from {value!r} to {now!r}")
    for key in now_settings:
        problems.append(f"{key} was set to {now_settings[key]!r}")
    env_before, env_now = dict(snapshot.env), _watched_env()
    for key in sorted(set(env_before) | set(env_now)):
        if env_before.get(key) != env_now.get(key):
            problems.append(f"os.environ[{key!r}] changed from {env_before.get(key)!r} "
                            f"to {env_now.get(key)!r}")
    return problems


def restore_integrity(snapshot: IntegritySnapshot) -> None:
    """Put back every watched attribute, module, environment variable and numeric setting."""
    for _, owner, attr, value in snapshot.attributes:
        if vars(owner).get(attr, _MISSING) is not value:
            try:
                setattr(owner, attr, value)
            except (AttributeError, TypeError):  # pragma: no cover - builtin types
                log.warning("could not restore %s.%s", owner, attr)
    for name, module in snapshot.modules:
        sys.modules[name] = module
    saved = dict(snapshot.settings)
    env_before = dict(snapshot.env)
    for key in _watched_env():
        if key not in env_before:
            del os.environ[key]
    os.environ.update(env_before)
    import triton

    runtime = triton.knobs.runtime
    for hook in ("launch_enter_hook", "launch_exit_hook"):
        if getattr(runtime, hook) is not saved[f"triton.knobs.runtime.{hook}"]:
            setattr(runtime, hook, saved[f"triton.knobs.runtime.{hook}"])
    runtime.launch_enter_hook.calls[:] = list(saved["launch_enter_hook.calls"])
    torch.set_default_dtype(saved["torch.get_default_dtype()"])
    torch.set_float32_matmul_precision(saved["torch.get_float32_matmul_precision()"])
    torch.backends.cuda.matmul.allow_tf32 = saved["torch.backends.cuda.matmul.allow_tf32"]
    torch.backends.cudnn.allow_tf32 = saved["torch.backends.cudnn.allow_tf32"]


def _safe_eq(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _describe(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or type(value).__name__
    module = getattr(value, "__module__", None)
    return f"{module}.{name}" if module else str(name)
