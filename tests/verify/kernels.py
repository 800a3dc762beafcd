"""Small interpreted kernels shared by the verify unit tests (the catalogue has the real ones)."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_one_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"],
                 do_bench=lambda fn, quantiles: [fn() or 1.0] * 3)
@triton.jit
def add_one_tuned(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def add_one(x, out=None, rows=None):
    """y = x + 1 into ``out`` (allocated here when None); ``rows`` limits the elements written."""
    y = torch.empty_like(x) if out is None else out
    n = x.numel() if rows is None else rows
    add_one_kernel[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)
    return y


def add_one_autotuned(x):
    y = torch.empty_like(x)
    add_one_tuned[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
    return y
