"""Elementwise sin, launched with a tiny block (the paper's first case study).

BLOCK_SIZE = 4 puts 4 elements in each program: the GPU runs millions of programs with almost no
work each. TritonForge should find a much larger block (and tune num_warps) on a GPU.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def sin_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.sin(x), mask=mask)


def sin_triton(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    BLOCK_SIZE = 4
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    sin_kernel[grid](x, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


def torch_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x)
