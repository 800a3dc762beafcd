"""Wrong: writes the result to a new tensor and returns it; y is never updated."""

import torch
import triton
import triton.language as tl

FAMILY = "axpy"
EXPECT = ("mismatch:value",)
EXPECT_OUTPUT = "arg[2]"


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, y + alpha * x, mask=mask)


def axpy_(alpha, x, y):
    n = y.numel()
    out = torch.empty_like(y)
    axpy_kernel[(triton.cdiv(n, 256),)](x, y, out, alpha, n, BLOCK=256)
    return out
