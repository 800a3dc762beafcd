"""Whole GEMM tiles for tl.dot kernels (``search.gemm``) and the floor of 16 on their tiles.

The kernels here are written for these tests in the pattern of an autotuned batched GEMM whose
configs all hold a K tile of 32 and 4 warps; fp32 inputs (bf16 tl.dot is wrong in the
interpreter).
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from tritonforge.analyze import analyze_source  # noqa: E402
from tritonforge.model import Candidate, HardwareInfo, ProposalContext  # noqa: E402
from tritonforge.profile.limits import limits_for  # noqa: E402
from tritonforge.search.gemm import (GEMM_SCORE, HOPPER_TILES, fitting_configs,  # noqa: E402
                                     gemm_move, gemm_tiles)
from tritonforge.search.prune import Fit, _check, prune_specs  # noqa: E402
from tritonforge.search.rules import RuleProposer  # noqa: E402
from tritonforge.transforms import ConfigSpec, get  # noqa: E402
from tritonforge.transforms.autotune_widen import existing_specs  # noqa: E402
from tritonforge.transforms.configs import extend_block_range  # noqa: E402
from tritonforge.transforms.constexpr import check_block_value  # noqa: E402

CONFIGS = '''        triton.Config({"TILE_M": 32, "TILE_N": 32, "TILE_K": 32, "GROUP_M": 1}, num_warps=4,
                      num_stages=2),
        triton.Config({"TILE_M": 64, "TILE_N": 32, "TILE_K": 32, "GROUP_M": 2}, num_warps=4,
                      num_stages=3),
        triton.Config({"TILE_M": 64, "TILE_N": 64, "TILE_K": 32, "GROUP_M": 2}, num_warps=4,
                      num_stages=3),
'''

# the K tile only bounds the loop through a name and advances the pointers (no range step)
BATCHED_MM = '''import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
CONFIGS    ],
    key=["M", "N", "K"],
)
@triton.jit
def batched_mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, TILE_M: tl.constexpr, TILE_N: tl.constexpr,
                      TILE_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_b = tl.program_id(2)
    a_ptr += pid_b * M * K
    b_ptr += pid_b * K * N
    c_ptr += pid_b * M * N
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    offs_m = pid_m * TILE_M + tl.arange(0, TILE_M)
    offs_n = pid_n * TILE_N + tl.arange(0, TILE_N)
    offs_k = tl.arange(0, TILE_K)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
    num_iters = tl.cdiv(K, TILE_K)
    acc = tl.zeros((TILE_M, TILE_N), dtype=tl.float32)
    for _ in range(num_iters):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b, allow_tf32=False)
        offs_k += TILE_K
        a_ptrs += TILE_K
        b_ptrs += TILE_K * N
    c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def batched_mm(a, b):
    batch, M, K = a.shape
    N = b.shape[2]
    out = torch.empty((batch, M, N), dtype=torch.float32, device=a.device)
    grid = lambda meta: (triton.cdiv(M, meta["TILE_M"]), triton.cdiv(N, meta["TILE_N"]), batch)
    batched_mm_kernel[grid](a, b, out, M, N, K)
    return out
'''.replace("CONFIGS", CONFIGS)

# the same with a Hopper-sized config already in the list
ALREADY_LARGE = BATCHED_MM.replace(CONFIGS, CONFIGS + '''        triton.Config({"TILE_M": 128, "TILE_N": 128, "TILE_K": 64, "GROUP_M": 2}, num_warps=8,
                      num_stages=3),
''')

# two dots sized by different tiles (attention): no one GEMM to tile
TWO_DOTS = '''import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_D": 32})],
                 key=["L"])
@triton.jit
def attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, L, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_D: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q = tl.load(q_ptr + offs_m[:, None] * BLOCK_D + offs_d[None, :], mask=offs_m[:, None] < L)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for start in range(0, L, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + offs_d[:, None] + offs_n[None, :] * BLOCK_D,
                     mask=offs_n[None, :] < L)
        v = tl.load(v_ptr + offs_n[:, None] * BLOCK_D + offs_d[None, :], mask=offs_n[:, None] < L)
        s = tl.dot(q, kt)
        acc += tl.dot(s, v)
    tl.store(o_ptr + offs_m[:, None] * BLOCK_D + offs_d[None, :], acc, mask=offs_m[:, None] < L)


def attn(q, k, v):
    L, D = q.shape
    o = torch.empty_like(q)
    attn_kernel[lambda m: (triton.cdiv(L, m["BLOCK_M"]),)](q, k, v, o, L)
    return o
'''

# a GEMM whose K dimension is a fixed HEAD_DIM, not a tuned tile
FIXED_K = BATCHED_MM.replace('"TILE_K": 32, ', "").replace(
    "TILE_K: tl.constexpr", "HEAD_DIM: tl.constexpr").replace("TILE_K", "HEAD_DIM")

# a plain GEMM launched with literal tiles (no autotune)
PLAIN_MM = '''import torch
import triton
import triton.language as tl


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :],
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * N + offs_n[None, :],
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b, allow_tf32=False)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def mm(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32)
    BLOCK_M = 32
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, 32))
    mm_kernel[grid](a, b, c, M, N, K, BLOCK_M=BLOCK_M, BLOCK_N=32, BLOCK_K=32, num_warps=4)
    return c
'''


def _kernel(source, name):
    return analyze_source(source).kernel(name)


def test_the_m_n_and_k_tiles_are_told_apart():
    k = _kernel(BATCHED_MM, "batched_mm_kernel")
    tiles = gemm_tiles(BATCHED_MM, k, k.autotune.tuned_names)
    assert (tiles.m, tiles.n, tiles.k) == ("TILE_M", "TILE_N", "TILE_K") and tiles.found
    plain = _kernel(PLAIN_MM, "mm_kernel")
    tiles = gemm_tiles(PLAIN_MM, plain, ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    assert (tiles.m, tiles.n, tiles.k) == ("BLOCK_M", "BLOCK_N", "BLOCK_K")


def test_ambiguous_tiles_get_no_move_with_a_reason():
    two = _kernel(TWO_DOTS, "attn_kernel")
    tiles = gemm_tiles(TWO_DOTS, two, two.autotune.tuned_names)
    assert not tiles.found and "different tiles" in tiles.reason
    assert "different tiles" in gemm_move(TWO_DOTS, analyze_source(TWO_DOTS), "attn_kernel")
    fixed = _kernel(FIXED_K, "batched_mm_kernel")
    tiles = gemm_tiles(FIXED_K, fixed, fixed.autotune.tuned_names)
    assert not tiles.found and "tile size" in tiles.reason
    for source in (TWO_DOTS, FIXED_K):
        assert not [m for m in RuleProposer().moves(source, None) if "GEMM" in m.description]


def test_the_move_appends_hopper_configs_first_and_only_where_none_is_large():
    moves = RuleProposer().moves(BATCHED_MM, None)
    assert moves[0].transform == "autotune_blocks" and moves[0].score == GEMM_SCORE
    assert "TILE_K 64" in moves[0].description
    configs = dict(moves[0].params)["configs"]
    assert [(c.value("TILE_M"), c.value("TILE_N"), c.value("TILE_K"), c.num_warps,
             c.num_stages) for c in configs] == list(HOPPER_TILES)
    assert all(c.value("GROUP_M") == 2 for c in configs)   # from the widest existing config
    assert isinstance(gemm_move(ALREADY_LARGE, analyze_source(ALREADY_LARGE),
                                "batched_mm_kernel"), str)
    assert not [m for m in RuleProposer().moves(ALREADY_LARGE, None) if "GEMM" in m.description]


def test_configs_over_the_shared_memory_are_left_out():
    move = gemm_move(BATCHED_MM, analyze_source(BATCHED_MM), "batched_mm_kernel")
    small = limits_for(75)                  # 64 KiB of shared memory per block
    kept = fitting_configs(move.transform, move.kernel, move.configs, BATCHED_MM, small, (4, 4))
    _, dropped = prune_specs(BATCHED_MM, move.kernel, list(move.configs), small, (4, 4))
    # fp32: one buffer of 128x64 @ 64x256 operands is 96 KiB, of 256x64 @ 64x128 too
    assert kept and len(kept) + len(dropped) == len(move.configs) and len(dropped) == 2
    import ast
    tree = ast.parse(BATCHED_MM)
    for c in move.configs:
        fit = _check(tree, move.kernel, None, dict(c.kwargs), c.num_warps, c.num_stages, small,
                     (4, 4)).fit
        assert (c in kept) == (fit is not Fit.OVER)
    # on sm_90 every one fits
    assert fitting_configs(move.transform, move.kernel, move.configs, BATCHED_MM,
                           limits_for(90), (4, 4)) == move.configs


def test_the_proposer_appends_them_and_the_file_matches_the_original(load, fake_bench):
    from tritonforge.tasks.loader import task_from_file
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / \
        "sin_block4.py"
    task = task_from_file(example)
    ctx = ProposalContext(task, Candidate(BATCHED_MM, "original"), 1, HardwareInfo("cpu", True),
                          budget=3)
    cands = RuleProposer().propose(ctx)
    cand = next(c for c in cands if "GEMM" in c.description)
    assert cand is cands[0]
    after = existing_specs(_kernel(cand.source, "batched_mm_kernel"))
    before = existing_specs(_kernel(BATCHED_MM, "batched_mm_kernel"))
    assert after[:len(before)] == before and len(after) == len(before) + len(HOPPER_TILES)
    torch.manual_seed(0)
    a, b = torch.randn(2, 37, 45), torch.randn(2, 45, 29)
    want = load(BATCHED_MM).batched_mm(a, b)
    new = load(cand.source)
    got = new.batched_mm(a, b)
    best = new.batched_mm_kernel.best_config.kwargs
    assert tuple(best[n] for n in ("TILE_M", "TILE_N", "TILE_K")) == HOPPER_TILES[-1][:3]
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got, torch.bmm(a, b), atol=1e-4, rtol=1e-4)


def test_a_kernel_launched_with_literal_tiles_gets_an_autotune_over_them(load,
                                                                         fake_bench):
    move = gemm_move(PLAIN_MM, analyze_source(PLAIN_MM), "mm_kernel")
    assert move.transform == "autotune"
    assert move.configs[0] == ConfigSpec((("BLOCK_M", 32), ("BLOCK_N", 32), ("BLOCK_K", 32)),
                                         4, 3)
    params = dict(move.params)
    new = get("autotune").apply(PLAIN_MM, analyze_source(PLAIN_MM), **params)
    assert len(_kernel(new, "mm_kernel").autotune.configs) == 1 + len(HOPPER_TILES)
    torch.manual_seed(1)
    a, b = torch.randn(37, 45), torch.randn(45, 29)
    got = load(new).mm(a, b)
    torch.testing.assert_close(got, load(PLAIN_MM).mm(a, b), atol=1e-4, rtol=1e-4)
    assert len(fake_bench) == 1 + len(HOPPER_TILES)
    # once autotuned over a large config, no second move
    assert isinstance(gemm_move(new, analyze_source(new), "mm_kernel"), str)


def test_a_range_extension_never_takes_a_dot_tile_below_16():
    k = _kernel(BATCHED_MM, "batched_mm_kernel")
    for name in ("TILE_M", "TILE_N", "TILE_K"):
        assert check_block_value(k, name, 8) is not None
        assert check_block_value(k, name, 16) is None
    specs = existing_specs(k) + [ConfigSpec((("TILE_M", 16), ("TILE_N", 16), ("TILE_K", 16),
                                             ("GROUP_M", 1)), 4, 2)]
    new = extend_block_range(k, specs, limit=64)
    assert new
    for c in new:
        assert all(c.value(n) >= 16 for n in ("TILE_M", "TILE_N", "TILE_K")), c.render()
    # and what the proposer's range extension appends to the file
    ctx_source = BATCHED_MM
    analysis = analyze_source(ctx_source)
    configs = RuleProposer()._block_configs(analysis, "batched_mm_kernel", ctx_source,
                                            limits_for(90), (4, 4), {})
    assert configs and min(c.value("TILE_K") for c in configs) == 16
