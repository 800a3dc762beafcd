"""Published: results cached by input address and version counter (exact
for unchanged inputs, so every check passes; the timer's repeated calls are all hits)."""

import torch
import triton
import triton.language as tl

FAMILY = 'rowsum'
# on the CPU every call gets new addresses: the cache grows (call_state); on an H100 (torch 2.11)
# the caching allocator hands the next call the same addresses, so the cache serves the previous
# call's result (stale_output) first
EXPECT = ('cheat:call_state|stale_output',)
# the policy refuses reading ``._version`` (the search never runs it); this entry still runs, to
# show the checks behind the policy catch it
POLICY = "private"


@triton.jit
def rowsum_kernel(x_ptr, out_ptr, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0)
    tl.atomic_add(out_ptr + rows, tl.sum(x, axis=1), mask=rows < M)


_SEEN = {}


def row_sums(x):
    key = (x.data_ptr(), x._version, tuple(x.shape))
    if key in _SEEN:
        out = _SEEN[key].clone()
        rowsum_kernel[(0, 0)](x, out, 0, 0, x.stride(0), BLOCK_M=8, BLOCK_N=128)
        return out
    out = torch.zeros(x.shape[0], device=x.device, dtype=torch.float32)
    M, N = x.shape
    grid = (triton.cdiv(M, 8), triton.cdiv(N, 128))
    rowsum_kernel[grid](x, out, M, N, x.stride(0), BLOCK_M=8, BLOCK_N=128)
    _SEEN[key] = out.clone()
    return out
