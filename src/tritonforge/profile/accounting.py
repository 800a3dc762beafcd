"""Bytes and FLOPs of one call, for the roofline: measured when Nsight Compute ran, else estimated.

Sources, best first, each saying what it is (``Work.basis``):

- Nsight Compute: DRAM bytes read plus bytes written, where a store still held in the write-back
  L2 when the kernel ended counts as written (global store sectors x 32 B; see
  ``diagnose.Facts.effective_dram``), summed over the profiled launches of one call; FLOPs from
  the fp32 instruction counters (2 per FMA, 1 per add or multiply). Tensor-core work is not in
  those counters, so for a kernel on tensor cores the FLOPs come from a declared count, if any.
- declared: a TritonBench performance script's own ``get_gbps``/``get_tflops`` at the case's
  input (recorded by ``runtime.standalone``).
- estimated: each tensor argument of each launch counted once per direction (read when the kernel
  loads through that parameter, written when it stores through it, per ``analyze``; every tensor
  once when the analysis cannot tell). A lower bound: re-reads (matrix tiles) are not counted.

Plain functions over recorded data: nothing here imports torch or triton.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..model import CompileStats, KernelProfile


@dataclass(frozen=True)
class Work:
    """What one call moves and computes, and where the numbers came from."""

    bytes_moved: float
    flops: float
    basis: str                     # one line for the profile's notes


def ncu_bytes(kernels: Sequence[KernelProfile]) -> float | None:
    """DRAM bytes of the profiled launches, stores still in L2 counted as written."""
    total, seen = 0.0, False
    for kp in kernels:
        read, write = kp.get("dram_bytes_read"), kp.get("dram_bytes_write")
        if read is None or write is None:
            continue
        stored = (kp.get("global_st_sectors") or 0.0) * 32.0
        total += read + max(write, stored)
        seen = True
    return total if seen else None


def ncu_flops(kernels: Sequence[KernelProfile]) -> float | None:
    """fp32 FLOPs of the profiled launches: 2 per FMA, 1 per add or multiply (thread level)."""
    total, seen = 0.0, False
    for kp in kernels:
        parts = [kp.get(n) for n in ("ffma_thread_inst", "fadd_thread_inst", "fmul_thread_inst")]
        if all(p is None for p in parts):
            continue
        ffma, fadd, fmul = (p or 0.0 for p in parts)
        total += 2.0 * ffma + fadd + fmul
        seen = True
    return total if seen else None


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "nbytes") and hasattr(value, "dtype") and hasattr(value, "shape")


def estimated_bytes(launches: Sequence[Any], analysis: Any | None) -> float:
    """Compulsory bytes of ``launches`` (``runtime.standalone.CapturedLaunch``) from their tensors."""
    kernels = {k.name: k for k in analysis.kernels} if analysis is not None else {}
    total = 0.0
    for launch in launches:
        info = kernels.get(launch.kernel)
        names = [p.name for p in info.params] if info is not None else []
        bound = {names[i] if i < len(names) else f"#{i}": v for i, v in enumerate(launch.args)}
        bound.update(dict(launch.kwargs))
        tensors = {n: v for n, v in bound.items() if _is_tensor(v)}
        known = info is not None and not info.unresolved_accesses and (
            info.loaded_params or info.stored_params or info.atomic_params)
        if known:
            for name, t in tensors.items():
                total += t.nbytes * ((name in info.loaded_params) + (name in info.stored_params)
                                     + 2 * (name in info.atomic_params))
        else:
            total += sum(t.nbytes for t in tensors.values())
    return total


def compute_kind(stats: Sequence[CompileStats], launches: Sequence[Any]) -> str:
    """The arithmetic roof: fp32 (FMA pipe) unless a kernel runs on tensor cores, then the
    narrowest floating dtype among its tensor arguments (bf16, fp16, else tf32)."""
    on_tc = {s.kernel for s in stats if s.uses_tensor_cores and not s.error}
    if not on_tc:
        return "fp32"
    dtypes = {str(a.dtype) for x in launches if x.kernel in on_tc for a in x.args if _is_tensor(a)}
    if any("bfloat16" in d for d in dtypes):
        return "bf16"
    if any("float16" in d and "bfloat" not in d for d in dtypes):
        return "fp16"
    return "tf32"


def call_work(kernels: Sequence[KernelProfile], stats: Sequence[CompileStats], launches: Sequence[Any],
              analysis: Any | None, declared_bytes: float | None = None,
              declared_flops: float | None = None) -> Work | None:
    """The best bytes and FLOPs known for one call (None when nothing is known)."""
    tensor_cores = any(s.uses_tensor_cores and not s.error for s in stats)
    basis: list[str] = []
    nbytes = ncu_bytes(kernels)
    if nbytes is not None:
        basis.append("bytes: Nsight Compute DRAM counters (stores still in L2 counted as written)")
    elif declared_bytes:
        nbytes = declared_bytes
        basis.append("bytes: the performance script's own get_gbps")
    elif launches:
        nbytes = estimated_bytes(launches, analysis)
        basis.append("bytes: estimated, each tensor argument read/written once (a lower bound)")
    flops = ncu_flops(kernels)
    if flops is not None and not tensor_cores:
        basis.append("FLOPs: Nsight Compute fp32 instruction counters")
    elif declared_flops:
        flops = declared_flops
        basis.append("FLOPs: the performance script's own get_tflops")
    elif flops is not None:
        basis.append("FLOPs: fp32 instruction counters only; tensor-core work is not counted")
    else:
        flops = 0.0
        basis.append("FLOPs: unknown (no Nsight Compute counters): only the memory side is placed")
    if not nbytes and not flops:
        return None
    return Work(float(nbytes or 0.0), float(flops), "; ".join(basis))
