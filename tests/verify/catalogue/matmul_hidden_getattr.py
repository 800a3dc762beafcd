"""Class 2, library op hidden from the recorder: reaches torch._C through
getattr (no attribute chain to read) and computes with torch.matmul with dispatch disabled."""

import torch
import triton
import triton.language as tl

FAMILY = 'matmul'
EXPECT = ('policy:private', 'cheat:library_op',)


@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=mask), mask=mask)


_HIDE = getattr(torch, "_" + "C")


def matmul(a, b):
    with getattr(_HIDE, "_DisableTorchDispatch")():
        c = torch.matmul(a, b)
    touch_kernel[(triton.cdiv(c.numel(), 1024),)](c, c.numel(), BLOCK=1024)
    return c
