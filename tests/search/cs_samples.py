"""Small kernels that no rule of the search was written for, with their wrappers and inputs: a
2-D five-point stencil, a fused row operation (scale, bias, ReLU, row max) and a gather. The
config-search tests run them and their rewrites through Triton's interpreter. ``HEURISTIC`` (a
kernel sized by ``@triton.heuristics``) is the transforms' sample of that name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "transforms"))
from tf_samples import HEURISTIC  # noqa: E402,F401

STENCIL = '''import torch
import triton
import triton.language as tl


@triton.jit
def stencil5(src, dst, H, W, stride, TILE_H: tl.constexpr, TILE_W: tl.constexpr):
    ph = tl.program_id(0)
    pw = tl.program_id(1)
    r = ph * TILE_H + tl.arange(0, TILE_H)[:, None]
    c = pw * TILE_W + tl.arange(0, TILE_W)[None, :]
    inside = (r < H) & (c < W)
    centre = tl.load(src + r * stride + c, mask=inside, other=0.0)
    up = tl.load(src + (r - 1) * stride + c, mask=inside & (r > 0), other=0.0)
    down = tl.load(src + (r + 1) * stride + c, mask=inside & (r + 1 < H), other=0.0)
    left = tl.load(src + r * stride + c - 1, mask=inside & (c > 0), other=0.0)
    right = tl.load(src + r * stride + c + 1, mask=inside & (c + 1 < W), other=0.0)
    tl.store(dst + r * stride + c, 4.0 * centre - up - down - left - right, mask=inside)


def laplace(x):
    H, W = x.shape
    out = torch.empty_like(x)
    grid = lambda META: (triton.cdiv(H, META["TILE_H"]), triton.cdiv(W, META["TILE_W"]))
    stencil5[grid](x, out, H, W, x.stride(0), TILE_H=8, TILE_W=16, num_warps=4)
    return out
'''

ROWOP = '''import torch
import triton
import triton.language as tl


@triton.jit
def scaled_relu_rowmax(x_ptr, y_ptr, m_ptr, n_cols, stride, scale, bias,
                       CHUNK: tl.constexpr):
    row = tl.program_id(0)
    best = tl.full((CHUNK,), float("-inf"), tl.float32)
    for start in range(0, n_cols, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        keep = cols < n_cols
        v = tl.load(x_ptr + row * stride + cols, mask=keep, other=0.0)
        v = tl.maximum(v * scale + bias, 0.0)
        tl.store(y_ptr + row * stride + cols, v, mask=keep)
        best = tl.maximum(best, tl.where(keep, v, float("-inf")))
    tl.store(m_ptr + row, tl.max(best, axis=0))


def fused_row(x, scale=1.5, bias=-0.25):
    rows, cols = x.shape
    y = torch.empty_like(x)
    m = torch.empty(rows, dtype=x.dtype)
    scaled_relu_rowmax[(rows,)](x, y, m, cols, x.stride(0), scale, bias, CHUNK=32,
                                num_warps=2, num_stages=2)
    return y, m
'''

GATHER = '''import torch
import triton
import triton.language as tl


@triton.jit
def gather_rows(table, idx, out, n_idx, dim, SPAN: tl.constexpr, WIDTH: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * SPAN + tl.arange(0, SPAN)
    ok = rows < n_idx
    which = tl.load(idx + rows, mask=ok, other=0)
    for d0 in range(0, dim, WIDTH):
        d = d0 + tl.arange(0, WIDTH)
        m = ok[:, None] & (d[None, :] < dim)
        v = tl.load(table + which[:, None] * dim + d[None, :], mask=m, other=0.0)
        tl.store(out + rows[:, None] * dim + d[None, :], v, mask=m)


def gather(table, idx):
    n, dim = idx.shape[0], table.shape[1]
    out = torch.empty((n, dim), dtype=table.dtype)
    SPAN = 4
    gather_rows[(triton.cdiv(n, SPAN),)](table, idx, out, n, dim, SPAN=SPAN, WIDTH=16)
    return out
'''




def inputs(name: str):
    import torch

    g = torch.Generator().manual_seed(0)
    if name == "STENCIL":
        return (torch.randn(37, 53, generator=g),)
    if name == "ROWOP":
        return (torch.randn(6, 101, generator=g),)
    if name == "HEURISTIC":
        return (torch.randn(1000, generator=g),)
    table = torch.randn(40, 45, generator=g)
    return (table, torch.randint(0, 40, (29,), generator=g))


ENTRIES = {"STENCIL": "laplace", "ROWOP": "fused_row", "GATHER": "gather", "HEURISTIC": "affine"}
SPECS = {
    "STENCIL": 'entry = "laplace"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [37, 53] }]\n'
               '[[case]]\nid = "p"\nrole = "performance"\nargs = [{ tensor = [4096, 4096] }]\n',
    "ROWOP": 'entry = "fused_row"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [6, 101] }]\n'
             '[[case]]\nid = "p"\nrole = "performance"\nargs = [{ tensor = [8192, 4096] }]\n',
    "GATHER": 'entry = "gather"\nseeds = 1\n[[case]]\nid = "c"\n'
              'args = [{ tensor = [40, 45] }, { tensor = [29], dtype = "int64", init = "randint", '
              'low = 0, high = 40 }]\n',
    "HEURISTIC": 'entry = "affine"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [1000] }]\n'
                 '[[case]]\nid = "p"\nrole = "performance"\nargs = [{ tensor = [1048576] }]\n',
}
