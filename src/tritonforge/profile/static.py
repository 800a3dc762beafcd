"""Static stats without a GPU: compile a kernel for a target and read what the compiler decided.

``compile_stats`` compiles one ``@triton.jit`` kernel of a source file at one constexpr/launch
config for a target (sm_90 by default; any CUDA target the installed Triton supports) through
``triton.compile(ASTSource(...), target=GPUTarget(...))``, which needs no GPU, and reads:

- registers per thread and spills: ``ptxas -v`` on the kernel's PTX (the compiled kernel's metadata
  holds no register count until a driver loads it), with ``cuobjdump -res-usage`` on the cubin as
  a fallback for the register count;
- shared memory, num_warps, num_stages: Triton's metadata;
- tensor cores: ``wgmma``/``mma`` in the PTX, and ``tt.dot`` in the Triton IR (a dot that did not
  become an mma is a finding in itself);
- the widest global access: ``ld.global.v4.b32`` and friends, 16-byte ``cp.async``, bulk copies.

Configs that cannot launch on the device (shared memory or registers over its limits) are flagged
in ``CompileStats.warnings`` by ``check_limits``. A compile failure is data (``CompileStats.error``),
never an exception: a search wants to score it and go on.

Triton is imported inside the functions that use it: the profile package stays importable where
triton is not (reading ncu reports, rendering a stored profile), and ``compile_loaded`` then says
what is missing (``EnvironmentProblem``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import logging
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from ..errors import EnvironmentProblem, SourceFileError
from ..model import CompileStats
from .compile_child import CompileChild, compile_in_child
from .limits import check_limits, limits_for
from .ptx import cuobjdump_registers, mma_kind, run_ptxas, widest_global_access

__all__ = ["DEFAULT_TARGET", "CompileRequest", "KernelSignature", "TensorArg", "Target", "check_limits",
           "compile_jit_stats", "compile_many", "compile_stats", "compile_stats_from_launch", "load_kernel",
           "interpreter_active", "signature_from_args", "triton_dtype"]

log = logging.getLogger(__name__)

Target = tuple[str, int, int]          # ("cuda", 90, 32): backend, arch (capability x10), warp size
DEFAULT_TARGET: Target = ("cuda", 90, 32)
_DIV16 = [["tt.divisibility", 16]]


# ---- loading kernels and describing their arguments -----------------------------------------

_MODULES: dict[tuple[str, int, int], Any] = {}


def load_kernel(source_path: str, kernel_name: str) -> Any:
    """Import ``source_path`` (compiled, not interpreted) and return its JITFunction ``kernel_name``.

    Autotune/heuristics wrappers are unwrapped. The module is imported under a private name with
    ``TRITON_INTERPRET`` off for the import, so that ``@triton.jit`` yields real JITFunctions even
    in a process where the interpreter is on (tests); modules are cached by path, mtime and size.
    """
    from triton import knobs
    from triton.runtime.jit import JITFunction

    path = os.path.abspath(source_path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise SourceFileError(f"cannot read kernel source: {exc}", location=source_path) from None
    key = (path, st.st_mtime_ns, st.st_size)
    module = _MODULES.get(key)
    if module is None:
        name = "_tritonforge_static_" + hashlib.sha256(repr(key).encode()).hexdigest()[:12]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise SourceFileError("not an importable Python file", location=source_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        parent = os.path.dirname(path)
        sys.path.insert(0, parent)
        try:
            with knobs.runtime.scope():
                knobs.runtime.interpret = False
                spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's module may raise anything
            sys.modules.pop(name, None)
            raise SourceFileError(f"importing the kernel source failed: {type(exc).__name__}: {exc}",
                                  location=source_path,
                                  hint="the file must import without a GPU") from None
        finally:
            if sys.path and sys.path[0] == parent:
                sys.path.pop(0)
        _MODULES[key] = module
    obj = getattr(module, kernel_name, None)
    while obj is not None and not isinstance(obj, JITFunction) and hasattr(obj, "fn"):
        obj = obj.fn
    if not isinstance(obj, JITFunction):
        found = sorted(n for n, v in vars(module).items() if _unwrap(v) is not None)
        raise SourceFileError(f"no @triton.jit kernel named {kernel_name!r}", location=source_path,
                              hint="kernels in the file: " + (", ".join(found) or "none"))
    return obj


def _unwrap(obj: Any) -> Any:
    from triton.runtime.jit import JITFunction
    for _ in range(4):
        if isinstance(obj, JITFunction):
            return obj
        obj = getattr(obj, "fn", None)
    return None


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument described without a tensor: its dtype and whether it is 16-byte aligned."""

    dtype: str                       # "fp32", "bf16", "float16", "torch.int64", ...
    aligned: bool = True


_DTYPE_SHORT = {
    "float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "float64": "fp64", "double": "fp64", "int8": "i8", "int16": "i16", "int32": "i32",
    "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "float8_e4m3fnuz": "fp8e4b8",
    "float8_e5m2fnuz": "fp8e5b16",
}


def triton_dtype(name: str) -> str:
    """'torch.float32' / 'float32' / 'fp32' -> Triton's short name 'fp32'."""
    short = name.removeprefix("torch.")
    return _DTYPE_SHORT.get(short, short)


@dataclass(frozen=True)
class KernelSignature:
    """What ``ASTSource`` needs: each parameter's type, the constexpr values, the 16-divisible args."""

    types: tuple[tuple[str, str], ...]               # (param, "*fp32" | "i32" | "constexpr" | ...)
    constexprs: tuple[tuple[str, Any], ...] = ()
    divisible_by_16: tuple[str, ...] = ()


def _specialize(value: Any, is_const: bool, specialize: bool, align: bool) -> tuple[str, str | None]:
    """(type, "D" or None) for a runtime argument, as Triton's JIT specializes it."""
    if isinstance(value, TensorArg):
        return "*" + triton_dtype(value.dtype), ("D" if value.aligned and align else None)
    try:
        from triton._C.libtriton import native_specialize_impl
        try:
            from triton.backends.nvidia.compiler import CUDABackend as backend
        except ImportError:
            from triton.backends.compiler import BaseBackend as backend
        ty, attr = native_specialize_impl(backend, value, is_const, specialize, align)
        return ty, (attr if isinstance(attr, str) else None)
    except ImportError:
        pass
    if value is None:
        return "constexpr", None
    if isinstance(value, bool):
        return "u1", None
    if isinstance(value, int):
        if specialize and value == 1:
            return "constexpr", None
        ty = "i32" if -2**31 <= value < 2**31 else ("u64" if value >= 2**63 else "i64")
        return ty, ("D" if specialize and align and value % 16 == 0 else None)
    if isinstance(value, float):
        return "fp32", None
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        aligned = value.data_ptr() % 16 == 0
        return "*" + triton_dtype(str(value.dtype)), ("D" if aligned and align else None)
    raise TypeError(f"cannot describe argument {value!r} for Triton")


def signature_from_args(fn: Any, args: tuple = (), kwargs: Mapping[str, Any] | None = None) -> KernelSignature:
    """Describe a launch ``fn[grid](*args, **kwargs)`` the way Triton's JIT would specialize it.

    Tensors (or ``TensorArg``) become pointer types like ``*fp32``; ints become ``i32``/``i64``
    (the value 1 and None become constexprs, as the JIT does); ints divisible by 16 and 16-byte
    aligned pointers are marked divisible; constexpr parameters take their values. Launch options
    (num_warps, num_stages, ...) in ``kwargs`` are ignored here.
    """
    fn = _unwrap(fn) or fn
    kwargs = dict(kwargs or {})
    pysig = inspect.signature(fn.fn)
    names = list(pysig.parameters)
    if len(args) > len(names):
        raise TypeError(f"{fn.__name__} takes {len(names)} arguments, {len(args)} given")
    values = dict(zip(names, args))
    for name in names[len(args):]:
        if name in kwargs:
            values[name] = kwargs[name]
        elif pysig.parameters[name].default is not inspect.Parameter.empty:
            values[name] = pysig.parameters[name].default
        else:
            raise TypeError(f"{fn.__name__}: no value for parameter {name!r}")
    types: list[tuple[str, str]] = []
    constexprs: list[tuple[str, Any]] = []
    divisible: list[str] = []
    for p in fn.params:
        value = values[p.name]
        if p.is_constexpr:
            types.append((p.name, "constexpr"))
            constexprs.append((p.name, getattr(value, "value", value)))
            continue
        ty, attr = _specialize(value, p.is_const, not p.do_not_specialize,
                               not p.do_not_specialize_on_alignment)
        annotated = p.annotation_type
        if annotated and ty != "constexpr":
            ty = annotated
        types.append((p.name, ty))
        if ty == "constexpr":
            constexprs.append((p.name, value))
        elif attr and "D" in attr:
            divisible.append(p.name)
    return KernelSignature(tuple(types), tuple(constexprs), tuple(divisible))


def _as_signature(fn: Any, signature: Mapping[str, str] | KernelSignature,
                  constexprs: Mapping[str, Any], divisible_by_16: Iterable[str] | None) -> KernelSignature:
    if isinstance(signature, KernelSignature):
        merged = dict(signature.constexprs)
        merged.update(constexprs)
        return replace(signature, constexprs=tuple(merged.items()))
    types: list[tuple[str, str]] = []
    for p in fn.params:
        if p.is_constexpr or p.name in constexprs:
            types.append((p.name, "constexpr"))
        elif p.name in signature:
            types.append((p.name, signature[p.name]))
        else:
            raise SourceFileError(f"no type for parameter {p.name!r} of {fn.__name__}",
                                  hint='give it in the signature, e.g. {"x_ptr": "*fp32", "n": "i32"}')
    missing = [p.name for p in fn.params if p.is_constexpr and p.name not in constexprs
               and not (p.has_default)]
    if missing:
        raise SourceFileError(f"no value for constexpr parameter(s) {', '.join(missing)} of {fn.__name__}",
                              hint="pass them in constexprs")
    values = {p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}
    values.update(constexprs)
    if divisible_by_16 is None:      # pointers from torch allocations are aligned; ints unknown
        divisible_by_16 = [n for n, t in types if t.startswith("*")]
    return KernelSignature(tuple(types), tuple(values.items()), tuple(divisible_by_16))


# ---- compiling -------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompileRequest:
    """One kernel at one config for one target: what ``compile_many`` compiles."""

    source_path: str
    kernel_name: str
    signature: KernelSignature
    num_warps: int = 4
    num_stages: int = 3
    target: Target = DEFAULT_TARGET
    options: tuple[tuple[str, Any], ...] = ()


def compile_stats(
    source_path: str,
    kernel_name: str,
    signature: Mapping[str, str] | KernelSignature,
    constexprs: Mapping[str, Any] | None = None,
    num_warps: int = 4,
    num_stages: int = 3,
    target: Target = DEFAULT_TARGET,
    *,
    divisible_by_16: Iterable[str] | None = None,
    options: Mapping[str, Any] | None = None,
    isolate: bool | None = None,
) -> CompileStats:
    """Compile ``kernel_name`` of ``source_path`` for ``target`` and read its static stats.

    ``signature`` maps each runtime parameter to its Triton type (``"*fp32"``, ``"i32"``; constexpr
    parameters may be left out) or is a ``KernelSignature`` from ``signature_from_args``.
    ``divisible_by_16`` names the arguments Triton may assume divisible by 16 (default: every
    pointer). Raises SourceFileError for a file or kernel that cannot be loaded; a config that
    fails to compile comes back as ``CompileStats(error=...)``.

    ``isolate`` compiles in a child process. By default that happens only when this process runs
    Triton's interpreter (``TRITON_INTERPRET=1`` when triton was imported): then ``tl.sum`` and the
    rest of Triton's library are interpreter functions that the compiler cannot call.
    """
    fn = load_kernel(source_path, kernel_name)
    sig = _as_signature(fn, signature, constexprs or {}, divisible_by_16)
    request = CompileRequest(source_path, kernel_name, sig, num_warps, num_stages, target,
                             tuple((options or {}).items()))
    return compile_many([request], isolate=isolate)[0]


def compile_jit_stats(
    fn: Any,
    signature: Mapping[str, str] | KernelSignature,
    constexprs: Mapping[str, Any],
    num_warps: int = 4,
    num_stages: int = 3,
    target: Target = DEFAULT_TARGET,
    *,
    divisible_by_16: Iterable[str] | None = None,
    options: Mapping[str, Any] | None = None,
    isolate: bool | None = None,
) -> CompileStats:
    """``compile_stats`` for an already loaded JITFunction (its file is re-read when isolated)."""
    sig = _as_signature(fn, signature, constexprs, divisible_by_16)
    if isolate or (isolate is None and interpreter_active()):
        request = CompileRequest(inspect.getsourcefile(fn.fn) or "", fn.__name__, sig, num_warps,
                                 num_stages, target, tuple((options or {}).items()))
        return compile_many([request], isolate=True)[0]
    return compile_loaded(fn, sig, num_warps, num_stages, target, dict(options or {}))


def compile_many(requests: list[CompileRequest], *, isolate: bool | None = None,
                 timeout_s: float = 600.0, workers: int = 1,
                 children: Sequence[CompileChild] = ()) -> list[CompileStats]:
    """Compile several requests: in this process, in one child process, or (``workers`` > 1) in
    that many child processes at once, each taking every ``workers``-th request. Results come
    back in the order of ``requests``. ``children``: child processes started ahead
    (``CompileChild``), used before new ones are started (and then closed); given any, every
    request compiles in a child, where ``timeout_s`` holds (it cannot in this process)."""
    children = list(children)
    if not requests:
        for child in children:
            child.close()
        return []
    if children:
        isolate = True
    if isolate or (isolate is None and interpreter_active()) or (workers > 1 and len(requests) > 1):
        n = max(1, min(workers, len(requests)))
        slices = [requests[i::n] for i in range(n)]

        def run(i: int) -> list[CompileStats]:
            child = children[i] if i < len(children) else None
            return compile_in_child(slices[i], timeout_s=timeout_s, child=child)

        try:
            if n == 1:
                parts = [run(0)]
            else:
                with ThreadPoolExecutor(max_workers=n) as pool:
                    parts = list(pool.map(run, range(n)))
        finally:
            for child in children:
                child.close()
        results: list[CompileStats] = [None] * len(requests)  # type: ignore[list-item]
        for i, part in enumerate(parts):
            results[i::n] = part
        return results
    results = []
    for r in requests:
        fn = load_kernel(r.source_path, r.kernel_name)
        results.append(compile_loaded(fn, r.signature, r.num_warps, r.num_stages, r.target,
                                      dict(r.options)))
    return results


def interpreter_active() -> bool:
    """Whether Triton's own library was built for the interpreter in this process."""
    try:
        from triton.language import standard
        from triton.runtime.jit import JITFunction
    except ImportError:
        return False
    return not isinstance(standard.cdiv, JITFunction)


def compile_loaded(fn: Any, sig: KernelSignature, num_warps: int, num_stages: int,
                   target: Target, options: Mapping[str, Any]) -> CompileStats:
    """Compile in this process (the interpreter must be off; see ``interpreter_active``)."""
    try:
        import triton
        from triton import knobs
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError as exc:
        raise EnvironmentProblem(f"triton is not importable: {exc}", hint="pip install triton") from None
    backend, arch, warp_size = target
    index = {p.name: p.num for p in fn.params}
    const = dict(sig.constexprs)
    base = CompileStats(kernel=fn.__name__, target=f"{backend}:{arch}", num_warps=num_warps,
                        num_stages=num_stages, constexprs=tuple(sorted(const.items())))
    src = ASTSource(fn, dict(sig.types), constexprs=const,
                    attrs={(index[n],): _DIV16 for n in sig.divisible_by_16 if n in index})
    opts = {"num_warps": num_warps, "num_stages": num_stages, **dict(options)}
    try:
        with knobs.runtime.scope():       # the code generator reads the interpret knob too
            knobs.runtime.interpret = False
            compiled = triton.compile(src, target=GPUTarget(backend, arch, warp_size), options=opts)
    except Exception as exc:  # noqa: BLE001 - Triton raises many kinds; a failed config is data
        message = f"{type(exc).__name__}: {exc}".strip()
        log.info("compiling %s for %s failed: %s", fn.__name__, base.target, message.splitlines()[0])
        return replace(base, error=message[-4000:])
    return _stats_from_compiled(base, compiled, arch)


def _stats_from_compiled(base: CompileStats, compiled: Any, arch: int) -> CompileStats:
    asm = compiled.asm
    ptx = asm.get("ptx", "")
    ttir = asm.get("ttir", "") or ""
    kind = mma_kind(ptx)
    meta = compiled.metadata
    report = run_ptxas(ptx, arch) if ptx else None
    registers = report.registers if report else None
    if registers is None:
        registers = cuobjdump_registers(asm.get("cubin", b""))
    stats = replace(
        base,
        num_warps=getattr(meta, "num_warps", base.num_warps),
        num_stages=getattr(meta, "num_stages", base.num_stages),
        registers=registers,
        spills=(report.spill_stores + report.spill_loads) if report else None,
        stack_bytes=report.stack_bytes if report else None,
        shared_bytes=getattr(meta, "shared", None),
        uses_tensor_cores=kind is not None,
        mma_kind=kind,
        has_dot=bool(re.search(r"\btt\.dot\b|\btt\.dot_scaled\b", ttir)),
        vector_width_bytes=widest_global_access(ptx),
    )
    warnings = check_limits(stats, limits_for(arch))
    if stats.spills:
        warnings.append(f"spills {stats.spills} bytes per thread to local memory (stores + loads)")
    return replace(stats, warnings=tuple(warnings))


def compile_stats_from_launch(
    source_path: str,
    kernel_name: str,
    args: tuple,
    kwargs: Mapping[str, Any] | None = None,
    target: Target = DEFAULT_TARGET,
    *,
    isolate: bool | None = None,
) -> CompileStats:
    """Stats for a launch as written ``kernel[grid](*args, **kwargs)``; num_warps/num_stages in kwargs."""
    fn = load_kernel(source_path, kernel_name)
    kwargs = dict(kwargs or {})
    num_warps = int(kwargs.pop("num_warps", 4))
    num_stages = int(kwargs.pop("num_stages", 3))
    options = {k: kwargs.pop(k) for k in list(kwargs) if k in ("maxnreg", "num_ctas")}
    sig = signature_from_args(fn, tuple(args), kwargs)
    return compile_jit_stats(fn, sig, {}, num_warps, num_stages, target, options=options,
                             isolate=isolate)
