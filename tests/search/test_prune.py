"""Resource pruning: configs over the device's shared memory or registers are dropped before any
compile, by the estimate alone, and the loop's history shows them."""

from pathlib import Path

import pytest

from tritonforge.config import Settings
from tritonforge.model import Candidate, HardwareInfo, ProposalContext, Status
from tritonforge.profile.limits import limits_for
from tritonforge.search.prune import Fit, check_source, prune_candidate, prune_specs, task_element_bytes
from tritonforge.search.resources import estimate
from tritonforge.search.rules import RuleProposer
from tritonforge.tasks.loader import task_from_file
from tritonforge.transforms.configs import ConfigSpec

MATMUL = '''import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] + k < K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] + k < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]), triton.cdiv(N, META["BLOCK_N"]))
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,
                        num_warps=4, num_stages=4)
    return c
'''
SPEC = '''entry = "matmul"
seeds = 1
[[case]]
id = "c"
args = [{ tensor = [16, 16] }, { tensor = [16, 16] }]
'''
SM90 = limits_for(90)
FP32 = (4, 4)


def config(m, n, k, warps=4, stages=4, source=MATMUL):
    return (source.replace("BLOCK_M=64, BLOCK_N=64, BLOCK_K=32", f"BLOCK_M={m}, BLOCK_N={n}, BLOCK_K={k}")
            .replace("num_warps=4, num_stages=4", f"num_warps={warps}, num_stages={stages}"))


@pytest.fixture()
def task(tmp_path):
    (tmp_path / "mm.py").write_text(MATMUL)
    (tmp_path / "mm.toml").write_text(SPEC)
    return task_from_file(tmp_path / "mm.py", tmp_path / "mm.toml")


def test_estimate_matches_the_sm90_compile_for_fp32_operands():
    # measured with profile.static for sm_90: 65536 B shared at 64x64x32 / 4 stages in fp32
    e = estimate(MATMUL, "matmul_kernel", {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, 4, 4,
                 default_bytes=FP32)
    assert e.shared_bytes == (16384, 65536)
    assert e.registers[0] == 64 * 64 // 128      # the fp32 accumulator, 128 threads
    assert not e.unresolved and len(e.dots) == 1


def test_big_fp32_tiles_are_pruned_for_shared_memory_and_small_ones_survive():
    parent = MATMUL
    big = Candidate(config(256, 256, 128), "rules", description="256x256x128")
    pruned = prune_candidate(big, parent, SM90, FP32)
    assert pruned is not None and "shared" in pruned.resources
    assert "shared memory" in pruned.reason and "227 KiB" in pruned.reason
    assert prune_candidate(Candidate(config(64, 64, 32), "rules"), config(32, 32, 32), SM90, FP32) is None
    # in an unknown dtype (maybe fp8: one buffer is 64 KiB) shared memory is not certain, but
    # the 256x256 fp32 accumulator still cannot be held by 128 threads
    unknown = prune_candidate(big, parent, SM90, (1, 4))
    assert unknown is not None and unknown.resources == ("registers",)


def test_an_accumulator_too_big_for_the_warps_is_pruned_for_registers():
    cand = Candidate(config(128, 128, 64, warps=1, stages=2), "rules", description="1 warp")
    pruned = prune_candidate(cand, MATMUL, SM90, FP32)
    assert pruned is not None and pruned.resources == ("registers",)
    assert "512 registers per thread" in pruned.reason and "spill" in pruned.reason
    ok = Candidate(config(128, 128, 64, warps=8, stages=2), "rules")
    assert prune_candidate(ok, MATMUL, SM90, FP32) is None


def test_a_parent_already_over_by_the_estimate_does_not_block_its_children():
    parent = config(128, 128, 64, warps=1, stages=2)       # "over" on registers by the estimate
    child = Candidate(config(128, 128, 64, warps=1, stages=3), "rules")
    assert prune_candidate(child, parent, SM90, FP32) is None


def test_rule_proposer_never_returns_configs_over_the_limits(task):
    source = config(128, 128, 64, warps=8, stages=4)
    ctx = ProposalContext(task, Candidate(source, "original"), 1, HardwareInfo("cpu", True), budget=8)
    proposer = RuleProposer()
    cands = proposer.propose(ctx)
    pruned = proposer.take_pruned()
    assert len(cands) == 8 and pruned
    descriptions = {p.description: p for p in pruned}
    assert "shared" in descriptions["BLOCK_K 64 -> 256 at launch 0"].resources
    # a dot kernel is never offered fewer than 4 warps (search.rules), so nothing to prune there;
    # register pruning itself: test_an_accumulator_too_big_for_the_warps_is_pruned_for_registers
    offered = {c.description for c in cands} | set(descriptions)
    assert not {"num_warps 8 -> 2 at launch 0", "num_warps 8 -> 1 at launch 0"} & offered
    assert all(p.history_entry().status is Status.PRUNED for p in pruned)
    assert not {c.hash for c in cands} & {p.candidate for p in pruned}
    for c in cands:
        assert all(chk.fit is not Fit.OVER for chk in check_source(c.source, SM90, FP32))
    assert proposer.take_pruned() == []              # drained
    # on an sm_75 device (64 KiB shared) more is out of reach
    ctx75 = ProposalContext(task, Candidate(source, "original"), 1,
                            HardwareInfo("t4", False, capability="7.5"), budget=8)
    proposer.propose(ctx75)
    assert len(proposer.take_pruned()) > len(pruned)


def test_autotune_specs_over_the_limits_are_left_out():
    names = ("BLOCK_M", "BLOCK_N", "BLOCK_K")
    specs = [ConfigSpec(tuple(zip(names, (64, 64, 32))), 4, 4),
             ConfigSpec(tuple(zip(names, (256, 256, 128))), 4, 4)]
    kept, dropped = prune_specs(MATMUL, "matmul_kernel", specs, SM90, FP32)
    assert kept == specs[:1] and len(dropped) == 1 and "shared memory" in dropped[0]


def test_task_dtypes_give_the_element_size(task):
    assert task_element_bytes(task) == FP32


class FixedProposer:
    name = "fixed"

    def __init__(self, sources):
        self.sources, self.done = sources, False

    def propose(self, context):
        if self.done:
            return []
        self.done = True
        return [Candidate(s, "fixed", context.incumbent.hash, d) for s, d in self.sources]

    def repair(self, request):
        return None


def test_the_loop_records_pruned_candidates_in_its_history(task, tmp_path):
    from tritonforge.runtime.evaluator import Evaluator
    from tritonforge.search.loop import Optimizer

    big = config(256, 256, 128)
    settings = Settings(device="cpu", max_rounds=1, patience=1, case_timeout_s=120, profile="off")
    ev = Evaluator(settings, tmp_path / "w0", None, device="cpu")
    try:
        result = Optimizer(task, settings, [ev], [FixedProposer([(big, "tiles 256x256x128")])],
                           None).run()
    finally:
        ev.close()
    assert [h.status for h in result.history] == [Status.PRUNED]
    entry = result.history[0]
    assert entry.description == "tiles 256x256x128" and "shared memory" in entry.reason
    assert result.stop_reason == "no new candidates"
    assert any(n.startswith("pruned tiles 256x256x128") for n in result.notes)


def test_a_dot_in_a_helper_keeps_the_rules_at_four_warps_or_more(tmp_path):
    """The kernel's tl.dot moved into a jit helper (as attention kernels keep their inner loop):
    the rules still never offer it fewer than 4 warps (attn_fwd_causal's num_warps 8 -> 1 ran one
    case for 55 s on an H100)."""
    helper = MATMUL.replace("@triton.jit\ndef matmul_kernel", "@triton.jit\ndef _mma(a, b, acc):\n"
                            "    return acc + tl.dot(a, b)\n\n\n@triton.jit\ndef matmul_kernel")
    helper = helper.replace("acc += tl.dot(a, b)", "acc = _mma(a, b, acc)")
    source = config(128, 128, 64, warps=8, stages=4, source=helper)
    assert "_mma(a, b, acc)" in source and source.count("tl.dot") == 1
    (tmp_path / "mm.py").write_text(source)
    (tmp_path / "mm.toml").write_text(SPEC)
    task = task_from_file(tmp_path / "mm.py", tmp_path / "mm.toml")
    ctx = ProposalContext(task, Candidate(source, "original"), 1, HardwareInfo("cpu", True), budget=40)
    proposer = RuleProposer()
    offered = {c.description for c in proposer.propose(ctx)}
    offered |= {p.description for p in proposer.take_pruned()}
    assert any(d.startswith("num_warps 8 -> ") for d in offered)
    assert not {"num_warps 8 -> 2 at launch 0", "num_warps 8 -> 1 at launch 0"} & offered
