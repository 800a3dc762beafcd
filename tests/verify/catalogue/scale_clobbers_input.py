"""Wrong: computes y = a * x right, then uses its input as scratch (halves it in place) where
the original leaves it as it was; a caller reading x afterwards gets other numbers."""

import torch
import triton
import triton.language as tl

FAMILY = "scale"
EXPECT = ("mismatch:input_mutated",)


@triton.jit
def scale_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * a, mask=mask)
    tl.store(x_ptr + offs, x * 0.5, mask=mask)


def scale(x, a):
    y = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 512),)](x, y, a, n, BLOCK=512)
    return y
