"""Honest: the same kernel under @triton.autotune (what TritonForge's autotune injection produces).

Autotuning benchmarks every config on the caller's buffers; that work is Triton's, not the
variant's, and must not count as library calls or be poisoned. The interpreter cannot time
kernels, so there a stand-in do_bench runs each config once.
"""

import torch
import triton
import triton.language as tl

FAMILY = "softmax"
EXPECT = "honest"


def _run_once(fn, quantiles=None):
    fn()
    return [1.0, 1.0, 1.0]


@triton.autotune(configs=[triton.Config({}, num_warps=2), triton.Config({}, num_warps=8)],
                 key=["n_cols"], do_bench=_run_once if triton.knobs.runtime.interpret else None)
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
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block)
    return y
