"""A call-count bomb whose counter is an attribute of the wrapper function, not a global: right for
its first 10000 calls, then it returns x unscaled. Caught by the module state, which reads the
attributes of the module's functions (verify.freshness)."""

import torch
import triton
import triton.language as tl

FAMILY = 'scale'
EXPECT = ('cheat:call_state',)


@triton.jit
def scale_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a, mask=mask)


def scale(x, a):
    scale.calls = scale.__dict__.get("calls", 0) + 1
    y = torch.empty_like(x)
    n = x.numel()
    factor = a if scale.calls <= 10000 else 1.0
    scale_kernel[(triton.cdiv(n, 512),)](x, y, factor, n, BLOCK=512)
    return y
