"""Class 6, wrong only at sizes the cases never reach: the grid covers at most
8192 elements."""

import torch
import triton
import triton.language as tl

FAMILY = 'axpy'
EXPECT = ('mismatch:value',)
EXPECT_CASE = "n10000"

@triton.jit
def axpy_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, y + alpha * x, mask=mask)


def axpy_(alpha, x, y):
    n = y.numel()
    axpy_kernel[(min(triton.cdiv(n, 256), 32),)](x, y, alpha, n, BLOCK=256)
