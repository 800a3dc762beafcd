"""Fixtures for the LLM tests: a kernel file, a proposal context, a scripted server, a stub evaluate.

The ``evaluate`` fixture is the one seam to the rest of the system: today a stub that compiles
the source and reads markers; later it can be pointed at the real loop's worker evaluation
(``runtime``) without changing the tests that use it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402

from fake_server import ScriptedChatServer  # noqa: E402
from tritonforge.llm.client import OpenAIChatClient  # noqa: E402
from tritonforge.llm.usage import TokenBudget  # noqa: E402
from tritonforge.model import (  # noqa: E402
    Bound, Candidate, Case, CaseRole, Diagnosis, HardwareInfo, Hint, HistoryEntry,
    ProposalContext, Profile, SpecCall, Status, Task, TensorSpec,
)

KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    grid = (triton.cdiv(n, 1024),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024, num_warps=4, num_stages=4)
    return out
'''


def variant(marker: str, *, stages: int = 4, warps: int = 4, block: int = 1024) -> str:
    """A changed kernel file carrying ``marker`` (read by the stub evaluate) in a comment."""
    src = KERNEL.replace("BLOCK_SIZE=1024, num_warps=4, num_stages=4",
                         f"BLOCK_SIZE={block}, num_warps={warps}, num_stages={stages}")
    src = src.replace("cdiv(n, 1024)", f"cdiv(n, {block})")
    return src.replace("    pid = tl.program_id(0)\n",
                       f"    pid = tl.program_id(0)  # {marker}\n    pid = pid + 0\n")


SMEM_ERROR = ("triton.runtime.errors.OutOfResources: out of resource: shared memory, "
              "Required: 262144, Hardware limit: 232448. Reducing block sizes or `num_stages` "
              "may help.")


def stub_evaluate(candidate: Candidate) -> tuple[Status, str]:
    """Compile the source (no import, no run) and read markers the tests put in comments.

    MISMATCH marker -> the verifier's report; SMEM marker with num_stages > 2 -> OutOfResources;
    otherwise OK. A SyntaxError is an import error, as in the worker.
    """
    try:
        compile(candidate.source, "<candidate>", "exec")
    except SyntaxError as exc:
        return Status.IMPORT_ERROR, f"SyntaxError: {exc.msg} (line {exc.lineno})"
    if "MARK:MISMATCH" in candidate.source:
        return Status.MISMATCH, ("odd-1000 seed 1 return: value: 24 of 1000 elements differ, "
                                 "worst at (992,): 0.0 vs 1.37 (the tail is not written)")
    if "MARK:SMEM" in candidate.source and "num_stages=4" in candidate.source:
        return Status.COMPILE_ERROR, SMEM_ERROR
    return Status.OK, ""


@pytest.fixture
def evaluate():
    return stub_evaluate


def make_task() -> Task:
    x = TensorSpec(shape=(1000,))
    big = TensorSpec(shape=(1 << 24,))
    return Task(name="add", source=KERNEL, entries=("add",),
                cases=(Case("odd-1000", CaseRole.CORRECTNESS, SpecCall("add", (x, x))),
                       Case("perf-16M", CaseRole.PERFORMANCE, SpecCall("add", (big, big)),
                            label="float32[16777216], float32[16777216]")),
                origin="test")


def make_context(task: Task) -> ProposalContext:
    incumbent = Candidate(KERNEL, "original")
    diagnosis = Diagnosis(Bound.MEMORY, "too little memory parallelism",
                          evidence=("dram throughput 41% of peak",),
                          hints=(Hint("more_parallelism", "only 2 waves of blocks",
                                      ("BLOCK_SIZE", "num_warps"), 0.9),
                                 Hint("vectorize", "32-bit loads", ("BLOCK_SIZE",), 0.4)))
    profile = Profile(task="add", case_id="perf-16M", source="timing-only", diagnosis=diagnosis)
    history = (HistoryEntry("0123456789abcdef", "rules:num_warps", "num_warps 4 -> 8",
                            Status.OK, 1.02, "not faster beyond noise"),)
    return ProposalContext(task=task, incumbent=incumbent, round=1,
                           hardware=HardwareInfo("NVIDIA H200", False, 4800.0, 989.0, 132),
                           profile=profile, diagnosis=diagnosis, history=history, budget=2)


@pytest.fixture
def task() -> Task:
    return make_task()


@pytest.fixture
def context(task: Task) -> ProposalContext:
    return make_context(task)


@pytest.fixture
def server():
    with ScriptedChatServer() as srv:
        yield srv


@pytest.fixture
def client(server: ScriptedChatServer) -> OpenAIChatClient:
    return OpenAIChatClient(server.base_url, "fake-model", "test-key", timeout_s=2.0,
                            max_retries=2, backoff_s=0.01)


@pytest.fixture
def budget() -> TokenBudget:
    return TokenBudget(100_000)
