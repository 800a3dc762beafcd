"""Class 7, needs case variety: no max-subtraction (exp overflows on inputs
beyond about 88)."""

import torch
import triton
import triton.language as tl

FAMILY = 'softmax'
EXPECT = ('mismatch:nan|value',)
EXPECT_CASE = "large"


@triton.jit
def softmax_unshifted(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, num / den, mask=mask)


def softmax(x):
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    softmax_unshifted[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=4)
    return y
