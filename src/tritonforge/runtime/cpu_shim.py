"""Run CUDA-minded test code on the CPU interpreter: ``device='cuda'`` becomes the CPU.

TritonBench-G test sections (and many users' tests) create tensors with ``device='cuda'`` and call
``.cuda()``. In a CPU worker (``TRITON_INTERPRET=1``) this shim redirects those to the CPU so the
same code runs through Triton's interpreter. It is only ever installed in CPU workers; a GPU worker
runs code untouched.
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


class _CudaToCpu(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in (torch.Tensor.cuda,):
            return args[0]
        if "device" in kwargs and _is_cuda(kwargs["device"]):
            kwargs["device"] = "cpu"
        if func in (torch.Tensor.to,) and len(args) > 1 and _is_cuda(args[1]):
            args = (args[0], "cpu", *args[2:])
        return func(*args, **kwargs)


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
