"""A kernel file that picks its kernel through a local alias, for the alias-launch tests.

``row_norm`` binds ``fx`` to one of two row kernels (``fx = _scaled_rows if offset else
_plain_rows``) and launches ``fx[(rows,)](...)``; ``row_norm_grad`` launches a third kernel
directly, and the entry never calls it (the shape of a forward/backward pair where only the
forward is timed). Written for these tests; TritonBench-G's files are never committed.
"""

ALIAS_ROWS = '''import torch
import triton
import triton.language as tl


@triton.jit
def _plain_rows(Y, X, W, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0)
    w = tl.load(W + cols, mask=mask, other=0.0)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(Y + row * stride + cols, x * inv * w, mask=mask)


@triton.jit
def _scaled_rows(Y, X, W, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0)
    w = tl.load(W + cols, mask=mask, other=0.0)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(Y + row * stride + cols, x * inv * (w + 1.0), mask=mask)


@triton.jit
def _rows_grad(DX, DY, X, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    dy = tl.load(DY + row * stride + cols, mask=mask, other=0.0)
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0)
    tl.store(DX + row * stride + cols, dy * x, mask=mask)


def row_norm(x, w, offset=False, eps=1e-6):
    rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(n_cols)
    fx = _scaled_rows if offset else _plain_rows
    fx[(rows,)](
        y, x, w,
        n_cols, x.stride(0), eps,
        BLOCK=BLOCK,
        num_warps=4,
    )
    return y


def row_norm_grad(dy, x):
    rows, n_cols = x.shape
    dx = torch.empty_like(x)
    _rows_grad[(rows,)](dx, dy, x, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
    return dx
'''

# Two tiled elementwise kernels picked by an alias; the tile size is a local literal.
ALIAS_TILES = '''import torch
import triton
import triton.language as tl


@triton.jit
def _add_one(X, Y, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(Y + offs, tl.load(X + offs, mask=mask) + 1.0, mask=mask)


@triton.jit
def _twice(X, Y, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(Y + offs, tl.load(X + offs, mask=mask) * 2.0, mask=mask)


def bump(x, double=False):
    y = torch.empty_like(x)
    n = x.numel()
    BLOCK = 64
    kernel = _twice if double else _add_one
    kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
    return y
'''
