"""Class 8, order-dependent accumulation (a race): split-K whose programs
add their partial tiles with a plain load + store instead of an atomic. The interpreter runs
programs one at a time, so it is right there; on a GPU updates are lost."""

import torch
import triton
import triton.language as tl

FAMILY = 'matmul'
EXPECT = ('mismatch:value|norm|cheat:race',)
DEVICES = ("cuda",)


@triton.jit
def matmul_splitk(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    kk = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
    part = tl.dot(a, b)
    cmask = (rm[:, None] < M) & (rn[None, :] < N)
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, tl.load(c_ptrs, mask=cmask, other=0.0) + part, mask=cmask)


def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.zeros((M, N), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(M, 16), triton.cdiv(N, 16), triton.cdiv(K, 16))
    matmul_splitk[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
    return c
