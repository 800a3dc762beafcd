"""Run CUDA-minded test code on the CPU interpreter: ``device='cuda'`` becomes the CPU.

TritonBench-G test sections (and many users' tests) create tensors with ``device='cuda'`` and call
``.cuda()``. In a CPU worker (``TRITON_INTERPRET=1``) this shim redirects those to the CPU so the
same code runs through Triton's interpreter. It is only ever installed in CPU workers; a GPU worker
runs code untouched.

Code that checks where its tensors live (``assert x.is_cuda``, ``x.device.type == "cuda"``) is
told CUDA: ``Tensor.is_cuda`` reads True and ``Tensor.device`` reads ``cuda:0`` for a CPU tensor.
A TritonBench-G wrapper that asserts ``x.is_cuda`` otherwise fails every case on the CPU, and
its record could not be verified there at all. A device read this way and passed back to torch
(``torch.empty(n, device=x.device)``, ``y.to(x.device)``) is redirected to the CPU like any other.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from triton.runtime.autotuner import Autotuner


def _is_cuda(device: Any) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.startswith("cuda")
    return isinstance(device, int) and not isinstance(device, bool)


_IS_CUDA = torch._C.TensorBase.__dict__["is_cuda"]
_DEVICE = torch._C.TensorBase.__dict__["device"]
_CUDA0 = torch.device("cuda", 0)


class _CudaToCpu(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        owner = getattr(func, "__self__", None)
        if owner is _IS_CUDA:
            return True
        if owner is _DEVICE:
            device = func(*args, **(kwargs or {}))
            return _CUDA0 if device.type == "cpu" else device
        kwargs = dict(kwargs or {})
        if func in (torch.Tensor.cuda,):
            return args[0]
        if "device" in kwargs and _is_cuda(kwargs["device"]):
            kwargs["device"] = "cpu"
        if func in (torch.Tensor.to,) and len(args) > 1 and _is_cuda(args[1]):
            args = (args[0], "cpu", *args[2:])
        return func(*args, **kwargs)


class _NoDevice:
    """``torch.cuda.device(...)`` as a context manager that selects nothing."""

    def __init__(self, device: Any = None) -> None:
        self.idx = 0

    def __enter__(self) -> "_NoDevice":
        return self

    def __exit__(self, *exc: object) -> bool:
        return False


_installed = False


def install() -> None:
    """Redirect CUDA device requests to the CPU for the rest of this process."""
    global _installed
    if _installed:
        return
    mode = _CudaToCpu()
    mode.__enter__()     # stays active for the worker's lifetime
    torch.cuda.synchronize = lambda *a, **k: None          # type: ignore[assignment]
    torch.cuda.is_available = lambda: False                # type: ignore[assignment]
    torch.cuda.empty_cache = lambda: None                  # type: ignore[assignment]
    # code that reads ``x.device`` (cuda:0 here) often selects it: a no-op on the CPU
    torch.cuda.device = _NoDevice                          # type: ignore[assignment,misc]
    torch.cuda.set_device = lambda *a, **k: None           # type: ignore[assignment]
    torch.cuda.current_device = lambda: 0                  # type: ignore[assignment]
    _autotune_on_cpu()
    _installed = True


def _autotune_on_cpu() -> None:
    """``@triton.autotune`` benchmarks through the GPU driver; here each config runs once and is
    timed by the wall clock (every config is still exercised, which is what correctness needs)."""
    def bench(kernel_call, quantiles=None, **_: object):
        start = time.perf_counter()
        kernel_call()
        t = (time.perf_counter() - start) * 1e3
        return [t, t, t] if quantiles else t

    Autotuner.do_bench = property(lambda self: bench)      # type: ignore[assignment]
