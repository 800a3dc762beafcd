"""A validation time budget on the interpreter: quick cases first, and sizes are judged only by
cases the original really failed on (not by ones left unrun or timed out)."""

import textwrap
from pathlib import Path

from tritonforge.config import Settings
from tritonforge.model import Case, CaseRole, SpecCall
from tritonforge.testgen.generate import TestgenOptions, generate, validation_order
from tritonforge.testgen.model import Dropped, GeneratedCase

SLOW_WRAPPER = '''
import time
import torch
import triton
import triton.language as tl

@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=mask), mask=mask)

def double(x):
    if x.numel() >= 150:
        time.sleep(2.0)          # a call that is slow here (a big grid in the interpreter)
    out = torch.empty_like(x)
    double_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out

def test_double():
    double(torch.randn(200, device="cuda"))
'''


def _case(case_id: str, est_s: float, nbytes: int) -> GeneratedCase:
    call = SpecCall("f", (), ())
    return GeneratedCase(Case(case_id, CaseRole.CORRECTNESS, call, (0,), ""), "odd", "", nbytes, (), None, est_s)


def test_validation_order_is_cheapest_first_only_on_the_interpreter():
    cases = [_case("trace-1", 5.0, 800), _case("odd-np2", 7.0, 1204), _case("odd-one", 5.0, 4)]
    assert validation_order(cases, True) == ("odd-one", "trace-1", "odd-np2")
    assert validation_order(cases, False) == ("trace-1", "odd-np2", "odd-one")


def test_only_failures_are_refusals():
    assert Dropped("a", "the original failed (runtime_error): x").refused
    assert not Dropped("a", "not run: the validation time budget ran out", "not_run").refused
    assert not Dropped("a", "the original failed (timeout): killed", "timeout").refused


def test_a_spent_budget_keeps_quick_cases_and_rejects_no_size(tmp_path: Path):
    path = tmp_path / "slow_double.py"
    path.write_text(textwrap.dedent(SLOW_WRAPPER))
    settings = Settings(device="cpu", run_dir=str(tmp_path), case_timeout_s=60)
    result = generate(path, settings, tmp_path, device="cpu",
                      options=TestgenOptions(stability=False, perf=False, seeds=1, budget_s=0.5))
    kept = {c.case.id for c in result.correctness}
    assert "odd-x.0-one" in kept                  # the quick case ran before the budget was spent
    unrun = [d for d in result.dropped if d.kind == "not_run"]
    assert unrun and all("budget" in d.reason for d in unrun)
    assert "trace-1" in {d.case_id for d in unrun}
    kinds = {s.name: s.kind for _, syms in result.symbols for s in syms}
    assert kinds["x.0"] != "rejected", kinds     # unrun cases say nothing about the sizes it takes
    assert not any("probe" in d.case_id for d in result.dropped)
