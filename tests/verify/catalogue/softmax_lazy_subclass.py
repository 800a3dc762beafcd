"""Published: a lazy tensor subclass; the kernel runs only when something
reads the result (the checker), never inside the timed call."""

import torch
import triton
import triton.language as tl

FAMILY = 'softmax'
EXPECT = ('cheat:subclass',)


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


class Lazy(torch.Tensor):
    pending = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            if isinstance(a, Lazy) and a.pending is not None:
                run, a.pending = a.pending, None
                run()
        return super().__torch_function__(func, types, args, kwargs)


def softmax(x):
    y = torch.empty_like(x)

    def run():
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=4)

    lazy = y.as_subclass(Lazy)
    lazy.pending = run
    softmax_kernel[(0,)](x, y, 0, x.stride(0), y.stride(0), BLOCK=16)
    return lazy
