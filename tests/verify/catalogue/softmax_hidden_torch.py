"""Class 2, library op hidden from the recorder: torch.softmax under
torch._C._DisableTorchDispatch (the dispatch recorder and the empty-poisoning miss it), then a
no-op Triton kernel so that a launch is seen."""

import torch
import triton
import triton.language as tl

FAMILY = 'softmax'
EXPECT = ('policy:private', 'cheat:library_op',)


@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=mask), mask=mask)


def softmax(x):
    with torch._C._DisableTorchDispatch():
        y = torch.softmax(x, dim=-1)
    touch_kernel[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), BLOCK=1024)
    return y
