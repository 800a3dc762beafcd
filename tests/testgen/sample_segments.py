"""Segment sums over a permutation of rows: offsets (sorted, from 0) and a permutation must stay valid."""

import torch
import triton
import triton.language as tl


@triton.jit
def seg_sum_kernel(x_ptr, offs_ptr, perm_ptr, out_ptr, D: tl.constexpr):
    seg = tl.program_id(0)
    start = tl.load(offs_ptr + seg)
    end = tl.load(offs_ptr + seg + 1)
    cols = tl.arange(0, D)
    acc = tl.zeros([D], dtype=tl.float32)
    for i in range(start, end):
        row = tl.load(perm_ptr + i)
        acc += tl.load(x_ptr + row * D + cols)
    tl.store(out_ptr + seg * D + cols, acc)


def seg_sum(x, offsets, perm):
    out = torch.empty(offsets.numel() - 1, x.shape[1], device=x.device)
    seg_sum_kernel[(offsets.numel() - 1,)](x, offsets, perm, out, D=16)
    return out


def test_seg():
    x = torch.randn(12, 16, device="cuda")
    offsets = torch.tensor([0, 3, 7, 12], device="cuda")
    perm = torch.randperm(12, device="cuda")
    seg_sum(x, offsets, perm)
