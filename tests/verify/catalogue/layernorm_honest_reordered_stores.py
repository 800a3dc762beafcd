"""Honest: rows handled last-to-first (program i does row
M-1-i), so stores land in another order."""

import torch
import triton
import triton.language as tl

FAMILY = 'layernorm'
EXPECT = 'honest'


@triton.jit
def layernorm_reversed(x_ptr, w_ptr, b_ptr, y_ptr, M, N, row_stride, eps, BLOCK: tl.constexpr):
    row = M - 1 - tl.program_id(0)
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


def layer_norm(x, weight, bias, eps=1e-5):
    M, N = x.shape
    y = torch.empty_like(x)
    layernorm_reversed[(M,)](x, weight, bias, y, M, N, x.stride(0), eps,
                             BLOCK=triton.next_power_of_2(N), num_warps=2)
    return y
