"""Cheat: does the work for its first four calls (what a verifier might make),
then returns at once."""

import triton
import triton.language as tl

FAMILY = "axpy"
EXPECT = ("cheat:call_state",)


@triton.jit
def axpy_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, y + alpha * x, mask=mask)


_CALLS = [0]


def axpy_(alpha, x, y):
    _CALLS[0] += 1
    if _CALLS[0] > 4:
        return
    n = y.numel()
    axpy_kernel[(triton.cdiv(n, 256),)](x, y, alpha, n, BLOCK=256)
