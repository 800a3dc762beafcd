"""Every op and kernel a call runs, as the PyTorch profiler sees them (worker side).

The dispatch-mode recorder (verify.guards) sees what Python dispatch shows it; a variant that runs
``torch.softmax`` inside ``torch._C._DisableTorchDispatch()`` hides from it, and from the
poisoning of ``torch.empty`` too. The profiler hooks the dispatcher below Python (RecordFunction),
so it still records ``aten::softmax`` there (checked on torch 2.13, CPU). On a GPU it also lists
every CUDA kernel (CUPTI activity): a kernel that no aten op launched and that is not one of the
variant's own Triton kernels came from a library reached some other way (cuBLAS through ctypes,
a prebuilt extension).

The first profile in a process costs about 3 s on the CPU (the profiler's own start-up); later
ones under a millisecond, so one call per verification is profiled, not every call.
"""

from __future__ import annotations

import logging
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

log = logging.getLogger(__name__)

# ops the profiler shows that move, convert or inspect data (beyond the dispatcher-level
# PLUMBING_OPS of verify.differential, which name what a TorchDispatchMode sees)
PROFILER_PLUMBING = frozenset({
    "aten.to", "aten._to_copy", "aten.item", "aten._local_scalar_dense", "aten.is_nonzero",
    "aten.result_type", "aten.resolve_conj", "aten.resolve_neg", "aten.detach_",
    "aten.lift_fresh_copy", "aten.view_as_real", "aten.view_as_complex", "aten.empty_like",
    "aten.zeros_like", "aten.ones_like", "aten.full_like", "aten.new_empty", "aten.fill_",
    "aten.zero_", "aten.copy_", "aten.clone", "aten.contiguous", "aten.record_stream",
    "aten.is_pinned", "aten.pin_memory", "aten._pin_memory", "aten.set_", "aten.equal",
})
# CUDA activities that are copies and fills, not computation
_COPY_KERNELS = ("Memcpy", "Memset", "memcpy", "memset")
# kernels of PyTorch's own (ATen, CUB): an aten op launched them even where the profiler did not
# tie them to it; what such an op computes is judged by the op census, not here
_ATEN_KERNEL_MARKS = ("at::", "at_cuda_detail", "cub::", "native::")


@dataclass
class Census:
    """What one profiled block ran: aten op names (``aten.mm``) with counts, and the names of CUDA
    kernels that no aten op launched (Triton's own launches among them)."""

    ops: dict[str, int] = field(default_factory=dict)
    loose_kernels: set[str] = field(default_factory=set)
    ok: bool = True                  # False: the profiler could not run; nothing is known


def _op(name: str) -> str:
    return name.replace("::", ".", 1)


@contextmanager
def op_census() -> Iterator[Census]:
    """Profile the block; the yielded Census is filled when the block ends."""
    census = Census()
    try:
        activities = [ProfilerActivity.CPU]
        on_gpu = torch.cuda.is_available() and torch.cuda.is_initialized()
        if on_gpu:
            activities.append(ProfilerActivity.CUDA)
        prof = profile(activities=activities)
        prof.__enter__()
    except Exception as exc:  # noqa: BLE001 - a profiler that will not start checks nothing
        log.warning("op census unavailable: %s", exc)
        census.ok = False
        yield census
        return
    try:
        yield census
    finally:
        try:
            if on_gpu:
                torch.cuda.synchronize()
            prof.__exit__(None, None, None)
            _fill(census, prof)
        except Exception as exc:  # noqa: BLE001
            log.warning("op census failed: %s", exc)
            census.ok = False


def _fill(census: Census, prof) -> None:
    launched_by_ops: set[str] = set()
    kernels: set[str] = set()
    for evt in prof.events():
        if evt.device_type == DeviceType.CPU and evt.name.startswith("aten::"):
            name = _op(evt.name)
            census.ops[name] = census.ops.get(name, 0) + 1
            for k in getattr(evt, "kernels", ()) or ():
                launched_by_ops.add(getattr(k, "name", str(k)))
        elif evt.device_type == DeviceType.CUDA:
            kernels.add(evt.name)
    census.loose_kernels = {k for k in kernels - launched_by_ops
                            if not k.startswith(_COPY_KERNELS)
                            and not any(mark in k for mark in _ATEN_KERNEL_MARKS)}


def triton_kernel_names(module: types.ModuleType) -> frozenset[str]:
    """Names of the @triton.jit functions a module defines (through autotune/heuristics)."""
    names = set()
    for value in vars(module).values():
        fn = value
        for _ in range(4):
            if hasattr(fn, "fn") and not isinstance(fn, types.FunctionType):
                fn = fn.fn
            else:
                break
        if fn is not value and isinstance(fn, types.FunctionType):
            names.add(fn.__name__)
    return frozenset(names)


def foreign_kernels(cand: Census, ref: Census, module: types.ModuleType) -> list[str]:
    """CUDA kernels of ``cand`` that no aten op launched, that are not the module's Triton
    kernels (Triton names a kernel after its function; a specialization may add a suffix), and
    that the original's census does not show either."""
    own = triton_kernel_names(module)
    return sorted(k for k in cand.loose_kernels - ref.loose_kernels
                  if not any(k == n or k.startswith(n + "_") for n in own))


__all__ = ["Census", "PROFILER_PLUMBING", "foreign_kernels", "op_census", "triton_kernel_names"]
