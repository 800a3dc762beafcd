"""Row softmax (one program per row) with its own test: a testgen sample whose test draws unit-
scale values from a contiguous tensor. SOFTMAX_VARIANTS are rewrites for the variety tests."""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, sxr, sxc, syr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * sxr + cols * sxc, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * syr + cols, e / tl.sum(e, axis=0), mask=mask)


def softmax(x):
    rows, cols = x.shape
    y = torch.empty((rows, cols), device=x.device, dtype=x.dtype)
    softmax_kernel[(rows,)](x, y, cols, x.stride(0), x.stride(1), y.stride(0),
                            BLOCK=triton.next_power_of_2(cols))
    return y


def test_softmax():
    x = torch.randn(48, 100, device="cuda")
    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=1))
