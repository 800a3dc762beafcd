"""Batched matrix-vector product written with 3-D broadcasting (the paper's second case study).

y[b, m] = sum_n A[b, m, n] * x[b, n]. Each program loads a whole [1, BLOCK_M, N] slab of A and
the whole vector at once and reduces with tl.sum: simple, but every row of A is held in registers
(N up to 8192 here), so the compiler spills or runs with very few warps' worth of parallelism.
The paper restructured it into a streaming reduction over N (1.74x). TritonForge's rule engine
proposes the same restructuring (the ``streaming_reduction`` transform, on register/spill hints)
besides block and launch retuning; on an H100 it verified but was 0.84x, as the original already
sits near the DRAM roofline there (H100, 2026-11-23: `tritonforge optimize` of this file).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def bgemv_kernel(a_ptr, x_ptr, y_ptr, M, N, stride_ab, stride_am, stride_xb, stride_yb,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_b = tl.program_id(0)
    pid_m = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    # 3-D broadcast: [1, BLOCK_M, 1] rows x [1, 1, BLOCK_N] columns
    rows = offs_m[None, :, None]
    cols = offs_n[None, None, :]
    mask = (rows < M) & (cols < N)
    a = tl.load(a_ptr + pid_b * stride_ab + rows * stride_am + cols, mask=mask, other=0.0)
    x = tl.load(x_ptr + pid_b * stride_xb + cols, mask=cols < N, other=0.0)
    y = tl.sum(a.to(tl.float32) * x.to(tl.float32), axis=2)      # [1, BLOCK_M]
    out = offs_m[None, :]
    tl.store(y_ptr + pid_b * stride_yb + out, y.to(y_ptr.dtype.element_ty), mask=out < M)


def batched_gemv(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    B, M, N = a.shape
    a = a.contiguous()
    x = x.contiguous()
    y = torch.empty((B, M), device=a.device, dtype=a.dtype)
    BLOCK_M = 4
    BLOCK_N = triton.next_power_of_2(N)
    grid = (B, triton.cdiv(M, BLOCK_M))
    bgemv_kernel[grid](a, x, y, M, N, a.stride(0), a.stride(1), x.stride(0), y.stride(0),
                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return y


def torch_reference(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a.float(), x.float()[:, :, None])[:, :, 0].to(a.dtype)
