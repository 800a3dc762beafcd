"""Two small entry points with their own tests (traced by tests/testgen; not collected by pytest).

``axpy`` writes into an output it is given and takes ``n_elements``; ``log_rows`` takes logs, so
its inputs must stay positive, and sizes its block from the row length.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def axpy(x, y, alpha, out):
    n = x.numel()
    axpy_kernel[(triton.cdiv(n, 64),)](x, y, out, alpha, n, BLOCK=64)
    return out


@triton.jit
def log_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=1.0)
    tl.store(out_ptr + row * n_cols + cols, tl.log(x), mask=mask)


def log_rows(x):
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    log_rows_kernel[(n_rows,)](x, out, n_cols, BLOCK_N=triton.next_power_of_2(n_cols))
    return out


def test_axpy():
    x, y = torch.randn(100, device="cuda"), torch.randn(100, device="cuda")
    out = torch.zeros(100, device="cuda")
    axpy(x, y, 2.0, out)
    axpy(torch.randn(33, device="cuda"), torch.randn(33, device="cuda"), 0.5,
         torch.zeros(33, device="cuda"))


def test_log_rows():
    log_rows(torch.rand(4, 24, device="cuda") + 0.5)
    log_rows(torch.rand(3, 40, device="cuda") + 0.5)
