"""tile_scale: a tile size the wrapper computes, scaled where it is computed so the grid follows
(or at the launch, for a tile that does not tile the grid); the rewrites compute the same on the
interpreter, and a tile whose grid would not follow is left alone."""

import pytest
from tritonforge.analyze import analyze_source
from tritonforge.transforms.tile_scale import scale_computed_tile

COMPUTED = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@triton.jit
def row_sum(x_ptr, out_ptr, cols, stride, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((CHUNK,), tl.float32)
    for start in range(0, cols, CHUNK):
        offs = start + tl.arange(0, CHUNK)
        acc += tl.load(x_ptr + row * stride + offs, mask=offs < cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    block = min(256, triton.next_power_of_2(n))
    add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK_SIZE=block)
    return out


def sums(x):
    out = torch.empty(x.shape[0], dtype=x.dtype)
    rows, cols = x.shape
    row_sum[(rows,)](x, out, cols, x.stride(0), CHUNK=min(64, triton.next_power_of_2(cols)))
    return out


def add_fixed_grid(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    block = min(256, triton.next_power_of_2(n))
    add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK_SIZE=block)
    return out
'''


def _site(analysis, function):
    return next(s.index for s in analysis.launch_sites if s.function == function)


@pytest.mark.parametrize("factor", [2, -2, 4])
def test_the_tile_is_scaled_where_it_is_computed_and_the_grid_follows(load, factor):
    import torch

    a = analyze_source(COMPUTED)
    out = scale_computed_tile(COMPUTED, a, _site(a, "add"), "BLOCK_SIZE", factor)
    want = {2: "block = min(256, triton.next_power_of_2(n)) * 2",
            -2: "block = max(1, min(256, triton.next_power_of_2(n)) // 2)",
            4: "block = min(256, triton.next_power_of_2(n)) * 4"}[factor]
    assert want in out and "BLOCK_SIZE=block)" in out
    g = torch.Generator().manual_seed(0)
    for n in (100, 1000):
        x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
        torch.testing.assert_close(load(out).add(x, y), x + y)


def test_a_loop_step_is_scaled_at_the_launch(load):
    import torch

    a = analyze_source(COMPUTED)
    out = scale_computed_tile(COMPUTED, a, _site(a, "sums"), "CHUNK", -2)
    assert "CHUNK=max(1, min(64, triton.next_power_of_2(cols)) // 2))" in out
    x = torch.randn(5, 300, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(load(out).sums(x), x.sum(dim=1), rtol=1e-5, atol=1e-5)


def test_a_grid_that_would_not_follow_is_left_alone():
    a = analyze_source(COMPUTED)
    site = a.site(_site(a, "add_fixed_grid"))
    knob = next(c for c in site.knobs.constexprs if c.name == "BLOCK_SIZE")
    assert knob.tiles_grid and not knob.grid_follows
    from tritonforge.search.scaled_configs import computed_tile_configs

    assert computed_tile_configs(a, site.knobs) == []
    assert [c.description() for c in computed_tile_configs(a, a.site(_site(a, "add")).knobs)][:2] \
        == ["BLOCK_SIZE (computed) x2 at launch 0 (add_kernel)",
            "BLOCK_SIZE (computed) /2 at launch 0 (add_kernel)"]


def test_a_parameter_of_the_wrapper_is_not_scaled_here():
    src = COMPUTED.replace("def add(x, y):\n    out = torch.empty_like(x)\n    n = x.numel()\n"
                           "    block = min(256, triton.next_power_of_2(n))\n",
                           "def add(x, y, block=128):\n    out = torch.empty_like(x)\n"
                           "    n = x.numel()\n")
    assert "def add(x, y, block=128)" in src
    a = analyze_source(src)
    assert scale_computed_tile(src, a, _site(a, "add"), "BLOCK_SIZE", 2) is None
