"""Published: a stale output buffer that happens to hold the right values:
recomputes only when the input's address changes (the timer's inputs never do)."""

import torch
import triton
import triton.language as tl

FAMILY = 'softmax'
# keyed on the input's address: where the allocator gives a new input an old address the stale
# buffer is served and its module state grew (call_state), otherwise the returned buffer is an
# earlier call's result (aliased); which one depends on allocation order (both seen on the CPU)
EXPECT = ('cheat:aliased|call_state',)


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


_LAST = {}


def softmax(x):
    key = tuple(x.shape)
    ptr, y = _LAST.get(key, (None, None))
    if ptr == x.data_ptr():
        softmax_kernel[(0,)](x, y, 0, x.stride(0), y.stride(0), BLOCK=16)
        return y
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=4)
    _LAST[key] = (x.data_ptr(), y)
    return y
