"""Honest: another block size and warp count; the same special value treated
like any other."""

import torch
import triton
import triton.language as tl

FAMILY = 'scale'
EXPECT = 'honest'


@triton.jit
def scale_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a, mask=mask)


def scale(x, a):
    y = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 128),)](x, y, a, n, BLOCK=128, num_warps=2)
    return y
