"""Class 3, aliasing: on the special value a == 1 it returns the input itself
(same values, but a later change of x changes the 'result')."""

import torch
import triton
import triton.language as tl

FAMILY = 'scale'
EXPECT = ('cheat:aliased',)


@triton.jit
def scale_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a, mask=mask)


def scale(x, a):
    if a == 1.0:
        scale_kernel[(1,)](x, x, a, 0, BLOCK=512)     # a launch, nothing written
        return x
    y = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 512),)](x, y, a, n, BLOCK=512)
    return y
