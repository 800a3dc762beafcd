"""The bare-call and timed-call checks forgive a config's rounding (``shipped.gross_only``); an
exact-dtype output (integers, bools) has no norm to judge that by, and went unjudged: a quantizing
kernel that wrote half its int32 output from its tenth call on passed every check. It differs in
more than ``GROSS_SHARE`` of its elements, which no rounding does."""

from __future__ import annotations

from worker_runs import time_wrappers

from tritonforge.model import Mismatch, Status
from tritonforge.verify.config_variation import GROSS_SHARE
from tritonforge.verify.shipped import gross_only

QUANTIZE = '''"""Quantize to int32 (x * 100, truncated)."""

import torch
import triton
import triton.language as tl


@triton.jit
def q_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, (x * 100.0).to(tl.int32), mask=mask)


def quant(x):
    out = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    n = x.numel()
    q_kernel[(triton.cdiv(n, 4),)](x, out, n, BLOCK_SIZE=4)
    return out
'''
SPEC = ('entry = "quant"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [300] }]\n'
        '[[case]]\nid = "p"\nrole = "performance"\nargs = [{ tensor = [400] }]\n')
# its call count in a tensor only its own kernel writes: no version counter, too big for the
# module-state fingerprint; right on the verifier's calls, half the work from the tenth on
WORN_OUT = '''
_STATE = torch.zeros(64, dtype=torch.int64)


@triton.jit
def q_count_kernel(x_ptr, out_ptr, state_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    count = tl.load(state_ptr + 1)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < tl.where(count >= 10, n_elements // 2, n_elements)
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, (x * 100.0).to(tl.int32), mask=mask)
    if pid == tl.num_programs(0) - 1:
        tl.store(state_ptr + 1, count + 1)


def quant(x):
    out = torch.zeros(x.shape, dtype=torch.int32, device=x.device)
    n = x.numel()
    q_count_kernel[(triton.cdiv(n, 4),)](x, out, _STATE, n, BLOCK_SIZE=4)
    return out
'''
HONEST = '''
def quant(x):
    out = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    n = x.numel()
    q_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK_SIZE=64)
    return out
'''


def test_an_integer_output_worn_out_after_verification_is_a_cheat(tmp_path):
    got = time_wrappers(tmp_path, QUANTIZE, SPEC, "quant", {"worn_out": WORN_OUT, "honest": HONEST},
                        name="quant")
    assert got.result("worn_out").status is Status.CHEAT, got.result("worn_out")
    assert got.result("honest").status is Status.OK, got.result("honest")


def _int_mismatch(n_bad: int, n_total: int = 1000) -> Mismatch:
    return Mismatch("c", 0, "return", "value", f"{n_bad} of {n_total} elements differ",
                    n_bad=n_bad, n_total=n_total)


def test_an_exact_dtype_difference_is_gross_beyond_a_share_of_its_elements():
    few = int(GROSS_SHARE * 1000) // 2          # a rounding flip here and there
    assert gross_only([_int_mismatch(few)]) == []
    assert len(gross_only([_int_mismatch(500)])) == 1
