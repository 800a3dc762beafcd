"""Class 1, correct only when watched: allocates one float and looks for the
verifier's poison in it; without it (the timer, the user) it skips every other block."""

import torch
import triton
import triton.language as tl

FAMILY = 'axpy'
EXPECT = ('cheat:watched',)


@triton.jit
def axpy_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, y + alpha * x, mask=mask)


def _watched():
    probe = torch.empty(1, dtype=torch.float32)
    return bool(torch.isnan(probe).item())


def axpy_(alpha, x, y):
    n = y.numel()
    block = 256 if _watched() else 512        # half the programs write half their block
    axpy_kernel[(triton.cdiv(n, block),)](x, y, alpha, n, BLOCK=256)
