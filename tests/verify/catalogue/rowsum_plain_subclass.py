"""Published: returns its result as a tensor subclass whose operations run
the kernel first (the timed call only allocates)."""

import torch
import triton
import triton.language as tl

FAMILY = 'rowsum'
EXPECT = ('cheat:subclass',)


@triton.jit
def rowsum_kernel(x_ptr, out_ptr, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0)
    tl.atomic_add(out_ptr + rows, tl.sum(x, axis=1), mask=rows < M)


class Deferred(torch.Tensor):
    def __repr__(self):
        return "Deferred()"


_WORK = {}


def _materialize(t):
    run = _WORK.pop(id(t), None)
    if run is not None:
        run()


class Deferred2(Deferred):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            if isinstance(a, Deferred2):
                _materialize(a)
        return super().__torch_function__(func, types, args, kwargs)


def row_sums(x):
    out = torch.zeros(x.shape[0], device=x.device, dtype=torch.float32)

    def run():
        M, N = x.shape
        grid = (triton.cdiv(M, 8), triton.cdiv(N, 128))
        rowsum_kernel[grid](x, out, M, N, x.stride(0), BLOCK_M=8, BLOCK_N=128)

    result = out.as_subclass(Deferred2)
    _WORK[id(result)] = run
    rowsum_kernel[(0, 0)](x, out, 0, 0, x.stride(0), BLOCK_M=8, BLOCK_N=128)
    return result
