"""rows_per_program: a one-row-per-program kernel handles several rows per program."""

import pytest

import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.transforms import get

R = get("rows_per_program")

# a row kernel in the style of the norms: the pointers move to the row, a scalar per row is
# loaded, two reductions (max, then sum), a row-dependent store; rows of 37 columns
SOFTMAX = '''import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(X, Y, scale_ptr, stride, n_cols, BLOCK: tl.constexpr):
    """One row per program."""
    row = tl.program_id(0)
    X += row * stride
    Y = Y + row * stride
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    scale = tl.load(scale_ptr + row)
    z = (x - tl.max(x, axis=0)) * scale
    num = tl.exp(z)
    tl.store(Y + cols, num / tl.sum(num), mask=cols < n_cols)


def softmax(x, scale):
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_kernel[(n_rows,)](x, y, scale, x.stride(0), n_cols, BLOCK=64)
    return y
'''


# the row index widened, as kldiv_ops, logsumexp_fwd and the Liger kernels write it
WIDE = SOFTMAX.replace("    row = tl.program_id(0)\n", "    row = tl.program_id(0).to(tl.int64)\n")


def _run(load, source, *args):
    return getattr(load(source), "softmax")(*args)


def test_the_row_becomes_a_column_of_rows():
    out = R.apply(S.ROW_SQNORM, elements=1024)
    assert "row = (tl.program_id(0) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM))[:, None]" in out
    assert "_tf_row_ok = row < _tf_rows" in out
    assert "mask=(cols < n_cols) & _tf_row_ok, other=0.0)" in out
    assert "tl.sum(x * x, axis=1, keep_dims=True), mask=_tf_row_ok)" in out
    assert "_tf_rows, ROWS_PER_PROGRAM: tl.constexpr):" in out
    # the grid covers the rows R at a time; R from the widest tile the launch passes
    assert "[(triton.cdiv(x.shape[0], max(1, 1024 // (triton.next_power_of_2(n_cols)))),)]" in out
    assert "_tf_rows=x.shape[0]" in out
    assert "ROWS_PER_PROGRAM=max(1, 1024 // (triton.next_power_of_2(n_cols)))" in out


@pytest.mark.parametrize("elements", [64, 128, 1024, 4096])
def test_same_values_when_run(load, elements):
    """7 rows of 300 (BLOCK_N 512): one row per program at 64 and 128 elements, 2 at 1024 (the
    last program has one row past the end), 8 at 4096 (one program, one valid row in eight)."""
    S.assert_same_results(load, "ROW_SQNORM", R.apply(S.ROW_SQNORM, elements=elements),
                          rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 5, 16])
def test_two_reductions_moved_pointers_and_a_scalar_per_row(load, rows):
    import torch

    out = R.apply(SOFTMAX, elements=256)      # 4 rows of 64 per program
    assert "X += row * stride" in out and "tl.load(scale_ptr + row, mask=_tf_row_ok)" in out
    assert "tl.max(x, axis=1, keep_dims=True)" in out and "tl.sum(num, axis=1, keep_dims=True)" in out
    g = torch.Generator().manual_seed(rows)
    x, scale = torch.randn(rows, 37, generator=g), torch.rand(rows, generator=g) + 0.5
    want = _run(load, SOFTMAX, x, scale)
    torch.testing.assert_close(_run(load, out, x, scale), want, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(want, torch.softmax(x * scale[:, None], dim=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("source, reason", [
    (S.ADD_LOCAL, "a larger block does the same"),
    (S.ROW_SUM, "calls zeros"),
    (SOFTMAX.replace("    num = tl.exp(z)\n", "    num = tl.exp(z)\n    for i in range(2):\n"
                     "        num = num * 1\n"), "for statement"),
    (S.GUARDED_ROWS, "if statement"),
    (S.AUTOTUNED, "exactly once into a name"),
    (SOFTMAX.replace("    num = tl.exp(z)\n", "    num = tl.exp(z)[None, :]\n"),
     "an index of a tile that depends on the row"),
    (SOFTMAX.replace("tl.max(x, axis=0)", "tl.max(x, axis=-1)"), "reduces over axis -1"),
    (SOFTMAX.replace("tl.store(Y + cols", "tl.store(scale_ptr + cols"),
     "does not depend on the row"),
    (SOFTMAX.replace("BLOCK=64)", "BLOCK=pick(n_cols))"), "evaluate twice"),
    (SOFTMAX.replace("BLOCK: tl.constexpr)", "BLOCK: tl.constexpr, FLAG: tl.constexpr = 0)")
     .replace("n_cols, BLOCK=64)", "n_cols, 64, 1)"), "defaults by position"),
    # a row index cast to int64: refused where reassigned or tiled by its width, as a plain one
    (WIDE.replace("    X += row * stride\n", "    X += row * stride\n    row = row + 0\n"),
     "exactly once into a name"),
    (WIDE.replace("    cols = tl.arange(0, BLOCK)\n", "    cols = row * BLOCK + tl.arange(0, BLOCK)\n"),
     "a larger block does the same"),
])
def test_refusals_say_why(source, reason):
    v = R.applies(analyze_source(source))
    assert not v.ok and reason in v.reason, v.reason


def test_elements_must_be_a_power_of_two():
    from tritonforge.errors import TransformError

    with pytest.raises(TransformError, match="power of two"):
        R.apply(S.ROW_SQNORM, elements=1000)


@pytest.mark.parametrize("rows", [1, 5, 16])
def test_a_row_index_cast_to_int64_stays_cast_and_gives_the_same_values(load, rows):
    """``row = tl.program_id(0).to(tl.int64)`` (kldiv_ops, logsumexp_fwd: row * stride cannot
    overflow on a large tensor) is a row kernel too; the rows are computed in int64."""
    import torch

    out = R.apply(WIDE, elements=256)
    assert "row = (tl.program_id(0).to(tl.int64) * ROWS_PER_PROGRAM + " \
           "tl.arange(0, ROWS_PER_PROGRAM))[:, None]" in out
    assert "tl.load(scale_ptr + row, mask=_tf_row_ok)" in out
    g = torch.Generator().manual_seed(rows)
    x, scale = torch.randn(rows, 37, generator=g), torch.rand(rows, generator=g) + 0.5
    torch.testing.assert_close(_run(load, out, x, scale), _run(load, WIDE, x, scale),
                               rtol=1e-6, atol=1e-6)
