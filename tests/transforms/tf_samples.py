"""Small kernel files the transform tests rewrite and run (under the Triton interpreter).

Each is a complete module as a user would write it, comments and odd layout included, so that
the tests can check that rewrites keep them. Constexprs are annotated ``tl.constexpr``: Triton
3.6's interpreter does not recognise the string form ``"tl.constexpr"`` (the compiler does).
"""

ADD_LOCAL = '''import torch
import triton
import triton.language as tl


# Elementwise add, one tile per program.
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)  # which tile
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    BLOCK_SIZE = 64  # hand-picked
    n_elements = x.numel()
    num_blocks = (n_elements + BLOCK_SIZE - 1) // BLOCK_SIZE
    # Launch the kernel
    add_kernel[(num_blocks,)](x, y, out, n_elements, BLOCK_SIZE)
    return out
'''

SCALE_KEYWORD = '''import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * factor, mask=offs < n)


def scale(x, factor=2.0):
    out = torch.empty_like(x)
    n = out.numel()
    grid = lambda meta: (triton.cdiv(n, meta['BLOCK_SIZE']),)
    scale_kernel[grid](
        x, out, n, factor,
        BLOCK_SIZE=128,  # keep
        num_warps=4,
    )
    return out
'''

LITERAL_GRID = '''import torch
import triton
import triton.language as tl


@triton.jit
def neg_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, -tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def neg(x):
    out = torch.empty_like(x)
    n = x.numel()
    neg_kernel[(triton.cdiv(n, 256),)](x, out, n, 256)
    return out
'''

NO_GRID_FOLLOW = '''import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def copy(x, programs):
    out = torch.empty_like(x)
    copy_kernel[(programs,)](x, out, x.numel(), BLOCK=64)
    return out
'''

IN_PLACE = '''import torch
import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(x_ptr + offs, x + a * tl.load(y_ptr + offs, mask=m), mask=m)


def axpy_(x, y, a=3.0):
    n = x.numel()
    BLOCK = 32
    axpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, a, n, BLOCK=BLOCK)
    return x
'''

ATOMIC_SUM = '''import torch
import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


def total(x):
    out = torch.zeros(1, dtype=torch.float32)
    n = x.numel()
    BLOCK = 16
    sum_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK)
    return out
'''

ROW_SUM = '''import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_N):  # walk the row
        cols = off + tl.arange(0, BLOCK_N)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def row_sum(x):
    out = torch.empty(x.shape[0], dtype=torch.float32)
    row_sum_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK_N=16, num_warps=2)
    return out
'''

# the same sum, with the pointer parameters moved to the row in the body (a common style; the
# persistent grid copies them per tile)
ROW_SUM_PTR = ROW_SUM.replace(
    "    acc = tl.zeros([BLOCK_N], dtype=tl.float32)\n",
    "    x_ptr += row * stride\n    out_ptr = out_ptr + row\n    acc = tl.zeros([BLOCK_N], dtype=tl.float32)\n",
).replace("tl.load(x_ptr + row * stride + cols", "tl.load(x_ptr + cols").replace(
    "tl.store(out_ptr + row, ", "tl.store(out_ptr, ")

# the same sum returned in a namedtuple whose class the wrapper builds on every call (FlagGems'
# max_dim style; hoist_namedtuple builds it once)
ROW_SUM_NAMED = ROW_SUM.replace("import torch\n", "from collections import namedtuple\n\nimport torch\n", 1).replace(
    "    return out\n", "    Sums = namedtuple('sums', ['values'])\n    return Sums(values=out)\n")

EARLY_RETURN = '''import torch
import triton
import triton.language as tl


@triton.jit
def guarded_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


def clear(x):
    guarded_kernel[(triton.cdiv(x.numel(), 64),)](x, x.numel(), BLOCK=64)
    return x
'''

MATMUL = '''import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=torch.float32)
    BLOCK_M, BLOCK_N = 16, 16
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M, BLOCK_N, BLOCK_K=16)
    return c
'''

AUTOTUNED = '''import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({'BLOCK': 32}, num_warps=4),  # small
        triton.Config({'BLOCK': 64}, num_warps=4, num_stages=2),
    ],
    key=['n'],
)
@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def double(x):
    out = torch.empty_like(x)
    n = x.numel()
    double_kernel[lambda META: (triton.cdiv(n, META['BLOCK']),)](x, out, n)
    return out
'''


ROW_SQNORM = '''import torch
import triton
import triton.language as tl


@triton.jit
def row_sqnorm_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)  # the whole row at once
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x * x, axis=0))


def row_sqnorm(x):
    out = torch.empty(x.shape[0], dtype=torch.float32)
    n_cols = x.shape[1]
    row_sqnorm_kernel[(x.shape[0],)](x, out, n_cols, x.stride(0),
                                     BLOCK_N=triton.next_power_of_2(n_cols))
    return out
'''


# persistent_grid's wider shapes: a META-free lambda grid, 3-D grids of trailing 1s (inline and
# through a local), and early returns directly in the kernel body
ROWS_LAMBDA = ROW_SUM.replace(
    "    row_sum_kernel[(x.shape[0],)](",
    "    grid = lambda meta: (x.shape[0],)\n    row_sum_kernel[grid](")

GRID_3D = LITERAL_GRID.replace("neg_kernel[(triton.cdiv(n, 256),)](x, out, n, 256)",
                               "neg_kernel[(triton.cdiv(n, 64), 1, 1)](x, out, n, 64)")

GRID_3D_LOCAL = LITERAL_GRID.replace(
    "    neg_kernel[(triton.cdiv(n, 256),)](x, out, n, 256)",
    "    grid = (triton.cdiv(n, 64), 1, 1)\n    neg_kernel[grid](x, out, n, 64)")

GUARDED_ROWS = '''import torch
import triton
import triton.language as tl


@triton.jit
def keep_rows_kernel(x_ptr, out_ptr, n_rows, n_cols, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    # programs past the last row do nothing
    if row >= n_rows:
        return
    x_ptr += row * stride
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + cols, mask=cols < n_cols, other=0.0)
    if tl.sum(x, axis=0) < 0:  # rows of negative sum stay zero
        return
    tl.store(out_ptr + row * stride + cols, x, mask=cols < n_cols)
    return


def keep_rows(x):
    out = torch.zeros_like(x)
    grid = (x.shape[0] + 3,)
    keep_rows_kernel[grid](x, out, x.shape[0], x.shape[1], x.stride(0),
                           BLOCK_N=triton.next_power_of_2(x.shape[1]))
    return out
'''


# the tile size is the caller's choice: a parameter of the wrapper, passed through to the launch
ADD_PARAM = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x, y, BLOCK_SIZE=4):
    # the caller picks the tile size
    out = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE)  # launch
    return out
'''


# a weight row loaded inside a loop over rows that also stores: the load does not change across
# iterations (hoist_invariant_loads); the grid has one program too many, whose loop never runs
HOIST_LOOP = '''import torch
import triton
import triton.language as tl


@triton.jit
def scale_rows_kernel(x_ptr, w_ptr, out_ptr, n_rows, n_cols, stride, ROWS: tl.constexpr,
                      BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    for r in range(pid * ROWS, tl.minimum(pid * ROWS + ROWS, n_rows)):
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + r * stride + cols, mask=mask, other=0.0)
        tl.store(out_ptr + r * stride + cols, x * w, mask=mask)


def scale_rows(x, w):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    ROWS = 4
    scale_rows_kernel[(triton.cdiv(n_rows, ROWS) + 1,)](x, w, out, n_rows, n_cols, x.stride(0),
                                                       ROWS=ROWS, BLOCK_N=64)
    return out
'''

# a short loop over a constexpr number of taps (static_unroll)
TAPS_LOOP = '''import torch
import triton
import triton.language as tl


@triton.jit
def taps_kernel(x_ptr, out_ptr, n, TAPS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for t in range(TAPS):
        acc += tl.load(x_ptr + offs + t, mask=offs + t < n, other=0.0) * (t + 1)
    tl.store(out_ptr + offs, acc, mask=offs < n)


def taps(x):
    n = x.numel()
    out = torch.empty_like(x)
    taps_kernel[(triton.cdiv(n, 128),)](x, out, n, TAPS=4, BLOCK=128)
    return out
'''


# ---------------------------------------------------------------- running them

# a kernel sized by @triton.heuristics: a tile, num_warps and a flag that reads the tile
HEURISTIC = '''import torch
import triton
import triton.language as tl


def pick_block(args):
    return 64 if args["n"] <= 4096 else 256


def pick_warps(args):
    return 2 if args["n"] <= 4096 else 4


@triton.heuristics({"BLOCK": pick_block, "num_warps": pick_warps,
                    "EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def scale_shift(x_ptr, y_ptr, n, scale, EVEN: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
        tl.store(y_ptr + offs, x * scale + 1.0)
    else:
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(y_ptr + offs, x * scale + 1.0, mask=m)


def affine(x, scale=0.5):
    y = torch.empty_like(x)
    n = x.numel()
    scale_shift[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, scale)
    return y
'''


def _inputs(name: str):
    import torch

    g = torch.Generator().manual_seed(0)
    vec = lambda n: torch.randn(n, generator=g)  # noqa: E731
    return {
        "ADD_LOCAL": lambda: (vec(1000), vec(1000)),
        "SCALE_KEYWORD": lambda: (vec(1000),),
        "LITERAL_GRID": lambda: (vec(1000),),
        "NO_GRID_FOLLOW": lambda: (vec(1000), 16),
        "IN_PLACE": lambda: (vec(300), vec(300)),
        "ATOMIC_SUM": lambda: (vec(300),),
        "ROW_SUM": lambda: (torch.randn(9, 53, generator=g),),
        "ROW_SUM_PTR": lambda: (torch.randn(9, 53, generator=g),),
        "ROW_SUM_NAMED": lambda: (torch.randn(9, 53, generator=g),),
        "EARLY_RETURN": lambda: (vec(300),),
        "MATMUL": lambda: (torch.randn(37, 29, generator=g), torch.randn(29, 45, generator=g)),
        "AUTOTUNED": lambda: (vec(1000),),
        "ROW_SQNORM": lambda: (torch.randn(7, 300, generator=g),),
        "ROWS_LAMBDA": lambda: (torch.randn(9, 53, generator=g),),
        "GRID_3D": lambda: (vec(1000),),
        "GRID_3D_LOCAL": lambda: (vec(1000),),
        "GUARDED_ROWS": lambda: (torch.randn(11, 5, generator=g),),
        "ADD_PARAM": lambda: (vec(1000), vec(1000)),
        "HOIST_LOOP": lambda: (torch.randn(9, 53, generator=g), torch.randn(53, generator=g)),
        "TAPS_LOOP": lambda: (vec(1000),),
        "HEURISTIC": lambda: (vec(1000),),
    }[name]()


ENTRIES = {"ADD_LOCAL": "add", "SCALE_KEYWORD": "scale", "LITERAL_GRID": "neg",
           "NO_GRID_FOLLOW": "copy", "IN_PLACE": "axpy_", "ATOMIC_SUM": "total",
           "ROW_SUM": "row_sum", "ROW_SUM_PTR": "row_sum", "ROW_SUM_NAMED": "row_sum", "EARLY_RETURN": "clear", "MATMUL": "matmul",
           "AUTOTUNED": "double", "ROW_SQNORM": "row_sqnorm", "ROWS_LAMBDA": "row_sum",
           "GRID_3D": "neg", "GRID_3D_LOCAL": "neg", "GUARDED_ROWS": "keep_rows",
           "ADD_PARAM": "add", "HOIST_LOOP": "scale_rows", "TAPS_LOOP": "taps",
           "HEURISTIC": "affine"}


def assert_same_results(load, name: str, new_source: str, rtol: float = 1e-6,
                        atol: float = 1e-5) -> None:
    """Run the sample ``name`` and its rewrite on the same inputs; compare what they return and
    the arguments afterwards (in-place kernels)."""
    import torch

    original = getattr(load(globals()[name]), ENTRIES[name])
    rewritten = getattr(load(new_source), ENTRIES[name])
    args_o = _inputs(name)
    args_r = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args_o)
    out_o, out_r = original(*args_o), rewritten(*args_r)
    torch.testing.assert_close(out_r, out_o, rtol=rtol, atol=atol)
    for a, b in zip(args_r, args_o):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, b, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- sm_90, no GPU

_COMPILE = '''
import importlib.util, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
spec = importlib.util.spec_from_file_location("m", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
src = ASTSource(getattr(m, sys.argv[2]), signature=eval(sys.argv[3]), constexprs=eval(sys.argv[4]))
print(sorted(triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm))
'''


def assert_compiles_for_sm90(path, source: str, kernel: str, signature: dict,
                             constexprs: dict) -> None:
    """Write ``source`` to ``path`` and compile ``kernel`` for sm_90 in a process without
    TRITON_INTERPRET (ptxas ships with Triton; no GPU needed): the interpreter runs Python and
    numpy arrays, the compiler is stricter (no return inside a loop, 3-D shapes, types of values
    an ``if`` changes)."""
    import os
    import subprocess
    import sys

    import pytest

    pytest.importorskip("triton.backends.nvidia")
    path.write_text(source, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", _COMPILE, str(path), kernel, repr(signature),
                        repr(constexprs)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "cubin" in r.stdout
