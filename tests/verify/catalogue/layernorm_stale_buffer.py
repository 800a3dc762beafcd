"""Published: a stale output buffer: one per shape, refilled only when the
first element of the input changes."""

import torch
import triton
import triton.language as tl

FAMILY = 'layernorm'
EXPECT = ('cheat:aliased', 'cheat:stateful',)


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / N
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * row_stride + cols, diff * rstd * w + b, mask=mask)


_OUT = {}


def layer_norm(x, weight, bias, eps=1e-5):
    M, N = x.shape
    key = (M, N)
    first, y = _OUT.get(key, (None, None))
    if y is None:
        y = torch.empty_like(x)
    elif first == float(x[0, 0]):
        return y
    layernorm_kernel[(M,)](x, weight, bias, y, N, x.stride(0), eps,
                           BLOCK=triton.next_power_of_2(N), num_warps=4)
    _OUT[key] = (float(x[0, 0]), y)
    return y
