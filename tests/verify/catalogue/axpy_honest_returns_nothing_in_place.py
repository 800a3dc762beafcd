"""Honest: in place as the original, two elements per
thread through a bigger block."""

import torch
import triton
import triton.language as tl

FAMILY = 'axpy'
EXPECT = 'honest'


@triton.jit
def axpy_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, y + alpha * x, mask=mask)


def axpy_(alpha, x, y):
    n = y.numel()
    axpy_kernel[(triton.cdiv(n, 1024),)](x, y, alpha, n, BLOCK=1024, num_warps=4)
