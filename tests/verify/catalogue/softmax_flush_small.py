"""Cheat: outputs under 1e-4 flushed to zero. Every element stays within
atol=1e-4 of the original (the outputs are ~1/4096); only the norm test sees it."""

import torch
import triton
import triton.language as tl

FAMILY = "softmax"
EXPECT = ("mismatch:norm",)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    y = num / den
    y = tl.where(y < 1e-4, 0.0, y)
    tl.store(y_ptr + row * y_row_stride + cols, y, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=4)
    return y
