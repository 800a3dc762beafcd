"""Published: the row length hard-coded to a test's (at most 1024 columns)."""

import torch
import triton
import triton.language as tl

FAMILY = 'softmax'
EXPECT = ('mismatch:value|unwritten|nan',)
EXPECT_CASE = "wide"

@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, num / den, mask=mask)


def softmax(x):
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_kernel[(n_rows,)](x, y, min(n_cols, 1024), x.stride(0), y.stride(0), BLOCK=1024,
                              num_warps=4)
    return y
