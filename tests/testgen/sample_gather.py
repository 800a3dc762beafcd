"""A gather (embedding lookup) with index tensors, a fixed row width, and a size rule.

The wrapper insists that the number of indices is a multiple of 4 and that rows are 16 wide: odd
shapes of those sizes make the original fail, and testgen must drop them with a note.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def gather_kernel(table_ptr, idx_ptr, out_ptr, D: tl.constexpr):
    i = tl.program_id(0)
    row = tl.load(idx_ptr + i)
    cols = tl.arange(0, D)
    tl.store(out_ptr + i * D + cols, tl.load(table_ptr + row * D + cols))


def gather(table, idx):
    if idx.numel() % 4 != 0:
        raise ValueError(f"the number of indices must be a multiple of 4, not {idx.numel()}")
    assert table.shape[1] == 16, "rows must be 16 wide"
    out = torch.empty(idx.numel(), table.shape[1], device=table.device, dtype=table.dtype)
    gather_kernel[(idx.numel(),)](table, idx, out, D=16)
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    table = torch.randn(50, 16, device="cuda")
    idx = torch.randint(0, 50, (40,), device="cuda")
    print(gather(table, idx).shape)
