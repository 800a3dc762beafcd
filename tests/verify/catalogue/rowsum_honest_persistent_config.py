"""Honest: a module-level config cache filled once per shape
(state that changes only on a new shape), a smaller tile."""

import torch
import triton
import triton.language as tl

FAMILY = 'rowsum'
EXPECT = 'honest'


@triton.jit
def rowsum_kernel(x_ptr, out_ptr, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0)
    tl.atomic_add(out_ptr + rows, tl.sum(x, axis=1), mask=rows < M)


_CONFIGS = {}


def _config(n):
    if n not in _CONFIGS:
        _CONFIGS[n] = 64 if n < 512 else 128
    return _CONFIGS[n]


def row_sums(x):
    M, N = x.shape
    block_n = _config(N)
    out = torch.zeros(M, device=x.device, dtype=torch.float32)
    grid = (triton.cdiv(M, 4), triton.cdiv(N, block_n))
    rowsum_kernel[grid](x, out, M, N, x.stride(0), BLOCK_M=4, BLOCK_N=block_n)
    return out
