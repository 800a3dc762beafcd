"""Integrity: nothing a variant runs may replace what measures it or what the original relies on.

``integrity_snapshot()`` records the identity of every function, class and descriptor of the
modules and classes that time, launch and compute (time, torch, torch.cuda, triton's runtime,
``torch.Tensor``, ``torch.cuda.Event``, ...), the global numeric settings (default dtype, TF32
flags, matmul precision), Triton's launch hooks, the TRITON_/CUDA_/TORCH_ environment and the
kernels Python registered for torch's own ops (``torch.library``): a kernel registered for
``aten::abs`` replaces ``abs`` for the whole process, the verifier's comparisons included (a
red-team candidate that returned zeros for float64 ``abs`` and skipped its multiply was
"correct on 6 case/seed pairs", CPU interpreter, 2026-11-28).
``check_integrity()`` lists what changed; ``restore_integrity()`` puts it back. Take the snapshot
BEFORE a candidate is imported, or import-time patches go unseen.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import logging
import os
import sys
import types
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import torch

# triton is imported inside functions: it reads TRITON_INTERPRET when imported, and driver and test
# processes import this module before they set it (tests/transforms/conftest.py).

log = logging.getLogger(__name__)


_WATCHED_MODULES = (
    "time", "torch", "torch.cuda", "torch.linalg", "torch.nn.functional", "torch.testing",
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
# namespaces of torch's own ops: a kernel a variant registers there changes what torch computes
# for everyone in the process (a variant's own namespace, ``torch.library.custom_op("mine::f")``,
# changes nothing else)
_TORCH_NAMESPACES = frozenset({"aten", "prims", "quantized", "_quantized", "rngprims",
                               "quantized_decomposed", "c10d", "_c10d_functional",
                               "_c10d_functional_autograd", "inductor", "higher_order"})


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


# flags of torch's own arithmetic that a variant could flip for the original's torch ops too
# (owner, attribute): read and restored by name, where this torch has them (not the newer
# ``fp32_precision``, which torch moves itself when a legacy flag is set)
_TORCH_FLAGS = tuple((owner, attr) for owner, attrs in (
    ("torch.backends.cuda.matmul", ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                                    "allow_bf16_reduced_precision_reduction",
                                    "allow_fp16_accumulation")),
    ("torch.backends.cudnn", ("allow_tf32", "deterministic", "benchmark", "enabled")),
) for attr in attrs)


def _torch_flags() -> dict[str, Any]:
    values: dict[str, Any] = {}
    for owner, attr in _TORCH_FLAGS:
        try:
            values[f"{owner}.{attr}"] = getattr(_resolve(owner), attr)
        except (ImportError, AttributeError, RuntimeError):
            continue
    return values


def _settings() -> dict[str, Any]:
    """Global numeric and launch settings a variant could flip to change others' results."""
    import triton

    values: dict[str, Any] = {
        "torch.get_default_dtype()": torch.get_default_dtype(),
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision(),
        "torch.are_deterministic_algorithms_enabled()": torch.are_deterministic_algorithms_enabled(),
        **_torch_flags(),
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
    op_kernels: frozenset[str] = frozenset()            # torch.library's "ns/op/dispatch key"


def _op_kernels() -> frozenset[str]:
    """The kernels Python code registered for ops so far, as ``torch.library`` records them
    (``"aten/abs/CPU"``); empty where this torch keeps no such record."""
    impls = getattr(torch.library, "_impls", None)
    return frozenset(impls) if isinstance(impls, (set, frozenset)) else frozenset()


# dispatch keys whose kernels compute nothing on a CPU or CUDA tensor: shape inference and
# tracing (torch registers some of these lazily, the first time a feature is used)
_TRACING_KEYS = frozenset({"Meta", "Python", "PythonDispatcher", "PythonTLSSnapshot",
                           "Functionalize", "PreDispatch", "FuncTorchBatched",
                           "FuncTorchVmapMode", "BatchedNestedTensor", "SparseMeta",
                           "NestedTensorMeta", "QuantizedMeta", "FuncTorchDynamicLayerFrontMode",
                           "FuncTorchDynamicLayerBackMode"})


def _new_torch_op_kernels(snapshot: "IntegritySnapshot") -> list[str]:
    """New kernels for torch's own ops under a key that computes (CPU, CUDA, a composite, an
    autograd key; ``""`` is the default, CompositeImplicitAutograd)."""
    new = []
    for key in sorted(_op_kernels() - snapshot.op_kernels):
        ns, _, rest = key.partition("/")
        if ns in _TORCH_NAMESPACES and rest.rpartition("/")[2] not in _TRACING_KEYS:
            new.append(key)
    return new


def _unregister(keys: set[str]) -> None:
    """Take back the kernels ``keys`` names: every ``torch.library.Library`` that registered one
    is destroyed (its registrations go with it)."""
    library = torch.library.Library
    for obj in gc.get_objects():
        # type(), not isinstance(): the latter asks each object its __class__, which wakes
        # deprecated lazy module attributes into warnings
        if issubclass(type(obj), library) and set(getattr(obj, "_op_impls", ())) & keys:
            try:
                obj._destroy()
            except Exception:  # noqa: BLE001 - best effort: the problem is reported either way
                log.warning("could not take back the op kernels of %r", obj)


def settle_lazy_rewrites() -> None:
    """Import what rewrites torch's own attributes on first import, before anything is recorded:
    importing torch._dynamo replaces ``torch.manual_seed`` with a wrapped copy (seen on an H200,
    triggered lazily inside a candidate's call: a false "patched"). About 1.4 s, once."""
    try:
        importlib.import_module("torch._dynamo")
    except Exception:  # pragma: no cover - a torch without dynamo has nothing to settle
        pass


def integrity_snapshot() -> IntegritySnapshot:
    settle_lazy_rewrites()
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
                             tuple(_watched_env().items()), _op_kernels())


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
    for key in _new_torch_op_kernels(snapshot):
        ns, op, dispatch = (key.split("/") + ["", ""])[:3]
        problems.append(f"a kernel was registered for {ns}::{op} ({dispatch}): it replaces "
                        f"torch's own op in this process, the verifier's comparisons included")
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
    for owner, attr in _TORCH_FLAGS:
        key = f"{owner}.{attr}"
        if key in saved and getattr(_resolve(owner), attr, _MISSING) != saved[key]:
            try:
                setattr(_resolve(owner), attr, saved[key])
            except (AttributeError, RuntimeError, TypeError):  # pragma: no cover
                log.warning("could not restore %s", key)
    added = set(_new_torch_op_kernels(snapshot))
    if added:
        _unregister(added)


def _safe_eq(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _describe(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or type(value).__name__
    module = getattr(value, "__module__", None)
    return f"{module}.{name}" if module else str(name)


@contextmanager
def watch_integrity() -> Iterator[list[str]]:
    """Yield a list that, once the block is over, holds what the block changed (then restored).

    Wrap each untrusted step that runs outside ``verify`` (importing a candidate, running it once)
    so that a patch is charged to the variant that made it, not to the next one checked in the
    same process: ``with watch_integrity() as patched: import_source(...)``.
    """
    snapshot = integrity_snapshot()
    problems: list[str] = []
    try:
        yield problems
    finally:
        problems.extend(check_integrity(snapshot))
        if problems:
            restore_integrity(snapshot)
