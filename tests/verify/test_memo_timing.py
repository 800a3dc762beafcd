"""A candidate that remembers its answer by the inputs' contents is right on every call the
verifier makes (each has new inputs), and uses only what the checks let through: a copy of the
last input and of the last result in large scratch tensors (verify.freshness counts in-place
changes of small tensors only), ``torch.equal`` and copies (plumbing to the op census). The timer
calls it on the same inputs again and again, where it would do no work; the inputs change between
timed turns (runtime.varied_inputs), so it is timed computing, as the original is."""

from __future__ import annotations

import statistics

from worker_runs import EXAMPLE, time_wrappers

from tritonforge.model import Status

SPEC = ('entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [300] }]\n'
        '[[case]]\nid = "p"\nrole = "performance"\nargs = [{ tensor = [2000] }]\n')

MEMO = '''
@triton.jit
def _differ_kernel(a_ptr, b_ptr, count_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m, other=0.0)
    b = tl.load(b_ptr + offs, mask=m, other=0.0)
    tl.atomic_add(count_ptr, tl.sum((a != b).to(tl.int32), axis=0))


_LAST_IN = torch.full((4096,), float("nan"))
_LAST_OUT = torch.zeros(4096)
_SCRATCH = torch.zeros(64, dtype=torch.int32)      # [0]: elements that differ, [1]: last size


def sin_triton(x):
    n = x.numel()
    flat = x.reshape(-1)
    last_in = _LAST_IN.to(x.device)
    scratch = _SCRATCH.to(x.device)
    scratch[0] = 0
    _differ_kernel[(triton.cdiv(n, 256),)](flat, last_in, scratch, n, BLOCK=256)
    if int(scratch[1].item()) == n and int(scratch[0].item()) == 0:
        return _LAST_OUT[:n].to(x.device).reshape(x.shape).clone()
    out = torch.empty_like(x)
    sin_kernel[(triton.cdiv(n, 4),)](x, out, n, BLOCK_SIZE=4)
    _LAST_IN[:n].copy_(flat)
    _LAST_OUT[:n].copy_(out.reshape(-1))
    _SCRATCH[1] = n
    return out
'''


def test_a_memo_by_the_inputs_contents_is_timed_computing(tmp_path):
    evaluation = time_wrappers(tmp_path, EXAMPLE.read_text(), SPEC, "sin_triton", {"memo": MEMO},
                               name="sin_block4")
    memo = evaluation.result("memo")
    # what the verifier sees: a right answer on every call (this is why the timer must vary)
    assert memo.status is Status.OK, memo.failure
    original = evaluation.result("original")
    times = {r.variant: statistics.median(t.samples_ms) for r in (original, memo)
             for t in r.timings if t.case_id == "p"}
    # a hit costs a comparison and a copy, a miss the interpreter's 500 programs: timed on the
    # same inputs each round, the memo read a small fraction of the original's time
    assert times["memo"] > 0.5 * times["original"], times



INT_ORIGINAL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def int_affine_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 3 + 1, mask=m)


def affine(x):
    out = torch.empty_like(x)
    int_affine_kernel[(triton.cdiv(x.numel(), 4),)](x, out, x.numel(), BLOCK=4)
    return out
'''

INT_SPEC = ('entry = "affine"\nseeds = 1\n[[case]]\nid = "c"\n'
            'args = [{ tensor = [300], dtype = "int32", init = "randint", low = 0, high = 1000 }]\n'
            '[[case]]\nid = "p"\nrole = "performance"\n'
            'args = [{ tensor = [2000], dtype = "int32", init = "randint", low = 0, high = 1000 }]\n')

INT_MEMO = '''
@triton.jit
def _differ_kernel(a_ptr, b_ptr, count_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m, other=0)
    b = tl.load(b_ptr + offs, mask=m, other=0)
    tl.atomic_add(count_ptr, tl.sum((a != b).to(tl.int32), axis=0))


_LAST_IN = torch.full((4096,), -7, dtype=torch.int32)
_LAST_OUT = torch.zeros(4096, dtype=torch.int32)
_SCRATCH = torch.zeros(64, dtype=torch.int32)      # [0]: elements that differ, [1]: last size


def affine(x):
    n = x.numel()
    flat = x.reshape(-1)
    scratch = _SCRATCH.to(x.device)
    scratch[0] = 0
    _differ_kernel[(triton.cdiv(n, 256),)](flat, _LAST_IN, scratch, n, BLOCK=256)
    if int(scratch[1].item()) == n and int(scratch[0].item()) == 0:
        return _LAST_OUT[:n].reshape(x.shape).clone()
    out = torch.empty_like(x)
    int_affine_kernel[(triton.cdiv(n, 4),)](x, out, n, BLOCK=4)
    _LAST_IN[:n].copy_(flat)
    _LAST_OUT[:n].copy_(out.reshape(-1))
    _SCRATCH[1] = n
    return out
'''


def test_a_memo_on_integer_only_inputs_is_timed_computing(tmp_path):
    """With no floating-point input to halve, the timer swaps an inverted pair of an integer
    input's elements each turn (values kept, so an index stays in bounds): the memo misses."""
    evaluation = time_wrappers(tmp_path, INT_ORIGINAL, INT_SPEC, "affine", {"memo": INT_MEMO},
                               name="affine_int")
    memo = evaluation.result("memo")
    assert memo.status is Status.OK, memo.failure
    original = evaluation.result("original")
    times = {r.variant: statistics.median(t.samples_ms) for r in (original, memo)
             for t in r.timings if t.case_id == "p"}
    assert times["memo"] > 0.5 * times["original"], times
