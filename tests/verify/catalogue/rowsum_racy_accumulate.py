"""Class 8, order-dependent accumulation (a race): column tiles add into the
row sums with load + store, not an atomic; right on the interpreter, loses updates on a GPU."""

import torch
import triton
import triton.language as tl

FAMILY = 'rowsum'
EXPECT = ('mismatch:value|norm|cheat:race',)
DEVICES = ("cuda",)


@triton.jit
def rowsum_racy(x_ptr, out_ptr, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0)
    old = tl.load(out_ptr + rows, mask=rows < M, other=0.0)
    tl.store(out_ptr + rows, old + tl.sum(x, axis=1), mask=rows < M)


def row_sums(x):
    M, N = x.shape
    out = torch.zeros(M, device=x.device, dtype=torch.float32)
    grid = (triton.cdiv(M, 8), triton.cdiv(N, 32))
    rowsum_racy[grid](x, out, M, N, x.stride(0), BLOCK_M=8, BLOCK_N=32)
    return out
