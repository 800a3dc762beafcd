"""Cheat: memoizes the output by shape and returns the last call's result."""

import torch
import triton
import triton.language as tl

FAMILY = "softmax"
# the candidate's first, bare calls (verify.shipped_checks.bare_first) fill its cache: the guarded
# calls after them are all hits that launch nothing; with no call before them, the second guarded
# call returned the first's result (stale_output)
EXPECT = ("cheat:stale_output|no_launch",)


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


_CACHE = {}


def softmax(x):
    key = (tuple(x.shape), x.dtype)
    if key in _CACHE:
        return _CACHE[key]
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=4)
    _CACHE[key] = y
    return y
