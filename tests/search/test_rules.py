"""The rule proposer: ranked moves from the static analysis, new candidates only."""

from pathlib import Path

from tritonforge.model import Candidate, HardwareInfo, HistoryEntry, ProposalContext, Status
from tritonforge.search.rules import RuleProposer
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"


def _ctx(task, source, history=(), budget=4):
    return ProposalContext(task, Candidate(source, "original"), 1, HardwareInfo("cpu", True),
                           history=history, budget=budget)


def test_tiny_block_grows_first_and_round_is_diverse():
    task = task_from_file(EXAMPLE)
    cands = RuleProposer().propose(_ctx(task, task.source, budget=6))
    assert len(cands) == 6
    assert "BLOCK_SIZE 4 -> 1024" in cands[0].description
    kinds = {c.origin for c in cands}
    assert "rules:launch_params" in kinds           # not only block sizes in one round
    assert len({c.hash for c in cands}) == 6


def test_tried_candidates_are_not_proposed_again():
    task = task_from_file(EXAMPLE)
    first = RuleProposer().propose(_ctx(task, task.source, budget=2))
    history = tuple(HistoryEntry(c.hash, c.origin, c.description, Status.OK) for c in first)
    second = RuleProposer().propose(_ctx(task, task.source, history, budget=2))
    assert not {c.hash for c in first} & {c.hash for c in second}


DOT_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * BLOCK + offs[None, :])
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], tl.dot(a, b))


def mm(a, b):
    c = torch.empty_like(a)
    mm_kernel[(1,)](a, b, c, BLOCK=64, num_warps=8)
    return c
'''


def test_a_dot_kernel_keeps_at_least_four_warps():
    moves = RuleProposer().moves(DOT_KERNEL, None)
    warps = [m.description for m in moves if m.description.startswith("num_warps")]
    assert "num_warps 8 -> 4 at launch 0" in warps
    assert not [w for w in warps if w.split("-> ")[1].split()[0] in ("1", "2")]


def test_an_elementwise_kernel_may_go_down_to_one_warp():
    moves = RuleProposer().moves(EXAMPLE.read_text(), None)
    assert any(m.description.startswith("num_warps 4 -> 1") for m in moves)


LOOP_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def row_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def total(x):
    out = torch.empty(x.shape[0], device=x.device)
    row_sum[(x.shape[0],)](x, out, x.shape[1], BLOCK=256)
    return out
'''


def test_num_stages_is_moved_only_where_a_loop_loads():
    stages = lambda src: [m for m in RuleProposer().moves(src, None)   # noqa: E731
                          if m.description.startswith("num_stages")]
    assert stages(LOOP_KERNEL)                   # a loop over loads: pipelining can change it
    assert not stages(DOT_KERNEL)                # straight-line: every num_stages is the same code
    no_loop = task_from_file(EXAMPLE).source     # the sin example has no loop either
    assert not stages(no_loop)


ROW_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def row_scale(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols)
    tl.store(y_ptr + row * n_cols + offs, x * 2, mask=offs < n_cols)


def scale(x):
    y = torch.empty_like(x)
    row_scale[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
'''


def test_too_little_work_per_program_raises_the_persistent_grid():
    from tritonforge.model import Bound, Diagnosis, Hint

    def score(diagnosis):
        return next(m.score for m in RuleProposer().moves(ROW_KERNEL, diagnosis)
                    if m.transform == "persistent_grid")

    tiny = Diagnosis(Bound.LATENCY, "too little work per program",
                     hints=(Hint("larger_blocks", "many short waves", ("BLOCK", "num_warps"), 0.9),))
    other = Diagnosis(Bound.LATENCY, "narrow accesses", hints=(Hint("vectorize_accesses", "", (), 0.8),))
    assert score(tiny) > score(other) == score(None)
    assert score(tiny) > next(m.score for m in RuleProposer().moves(ROW_KERNEL, tiny)
                              if m.transform == "cache_hints")
