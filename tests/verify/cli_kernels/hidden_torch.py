"""Cheat (hidden library op): torch.softmax with dispatch disabled."""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, num / den, mask=mask)


def softmax(x):
    with torch._C._DisableTorchDispatch():
        y = torch.softmax(x, dim=-1)
    softmax_kernel[(0,)](x, y, 0, x.stride(0), y.stride(0), BLOCK=16)
    return y


def test_softmax():
    x = torch.randn(8, 300)
    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=-1))
