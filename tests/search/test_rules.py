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


def test_a_tiny_blocks_moves_span_the_ladder_biggest_first():
    task = task_from_file(EXAMPLE)
    cands = RuleProposer().propose(_ctx(task, task.source, budget=6))
    blocks = [c.description for c in cands if c.description.startswith("BLOCK_SIZE")]
    # the biggest jump, then the smallest step, then the middle: not three neighbours at the top
    assert blocks == ["BLOCK_SIZE 4 -> 1024 at launch 0", "BLOCK_SIZE 4 -> 8 at launch 0",
                      "BLOCK_SIZE 4 -> 128 at launch 0"]


def test_a_move_that_paid_off_on_the_parent_goes_first():
    task = task_from_file(EXAMPLE)
    plain = RuleProposer().propose(_ctx(task, task.source, budget=6))
    assert plain[0].description == "BLOCK_SIZE 4 -> 1024 at launch 0"
    earlier = (HistoryEntry("h1", "rules:launch_params", "num_warps 4 -> 2 at launch 0", Status.OK, 1.01),
               HistoryEntry("h2", "rules:launch_params", "num_warps 4 -> 8 at launch 0", Status.OK, 1.04),
               HistoryEntry("h3", "rules:launch_params", "num_warps 4 -> 1 at launch 0",
                            Status.MISMATCH))
    cands = RuleProposer().propose(_ctx(task, task.source, history=earlier, budget=6))
    assert cands[0].description == "num_warps 4 -> 8 at launch 0"
    # under the line (1.01x) or not verified: their ordinary turn
    assert [c.description for c in cands[1:4]] == [c.description for c in plain[:3]]


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


ATTN_WRAPPER = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _fwd_kernel(Q, K, V, Out, stride_m, N_CTX, sm_scale,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    base = off_hz * N_CTX * HEAD_DIM
    q = tl.load(Q + base + offs_m[:, None] * stride_m + offs_d[None, :],
                mask=offs_m[:, None] < N_CTX, other=0.0)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(K + base + offs_n[None, :] * stride_m + offs_d[:, None],
                    mask=offs_n[None, :] < N_CTX, other=0.0)
        p = tl.dot(q, k) * sm_scale
        v = tl.load(V + base + offs_n[:, None] * stride_m + offs_d[None, :],
                    mask=offs_n[:, None] < N_CTX, other=0.0)
        acc += tl.dot(p, v)
    tl.store(Out + base + offs_m[:, None] * stride_m + offs_d[None, :], acc,
             mask=offs_m[:, None] < N_CTX)


def attn(q, k, v, o, BLOCK_M, BLOCK_N, num_warps, num_stages):
    grid = (triton.cdiv(q.shape[2], BLOCK_M), q.shape[0] * q.shape[1], 1)
    _fwd_kernel[grid](q, k, v, o, q.stride(2), q.shape[2], 1.0,
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=q.shape[3],
                      num_warps=num_warps, num_stages=num_stages)
    return o
'''


def test_tile_sizes_taken_from_wrapper_parameters_are_moved():
    moves = [m for m in RuleProposer().moves(ATTN_WRAPPER, None)
             if m.transform == "param_block_override"]
    assert {dict(m.params)["name"] for m in moves} == {"BLOCK_M", "BLOCK_N"}   # not HEAD_DIM
    assert {dict(m.params)["value"] for m in moves} == {32, 64, 128}           # 2-D tiles
    assert "BLOCK_M (wrapper parameter) -> 128 at launch 0" in {m.description for m in moves}
    assert all(0.45 <= m.score <= 0.55 for m in moves)
    stages = [m for m in RuleProposer().moves(ATTN_WRAPPER, None)
              if m.description.startswith("num_stages")]
    assert max(m.score for m in stages) < min(m.score for m in moves)

    task = task_from_file(EXAMPLE)
    cands = RuleProposer().propose(_ctx(task, ATTN_WRAPPER, budget=6))
    pinned = [c for c in cands if c.origin == "rules:param_block_override"]
    assert len(pinned) >= 4 and len({c.hash for c in pinned}) == len(pinned)
    # per-knob diversity: both tile sizes get moved, neither takes the whole round
    assert {c.description.split(" ")[0] for c in pinned} == {"BLOCK_M", "BLOCK_N"}
    for c in pinned:
        assert "# tritonforge: tile size fixed here" in c.source


ADD_WRAPPER = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=offs < n), mask=offs < n)


def add(x, y, BLOCK_SIZE=4):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), BLOCK_SIZE),)](x, y, out, x.numel(), BLOCK_SIZE)
    return out
'''


def test_a_one_dimensional_wrapper_tile_gets_larger_sizes():
    moves = [m for m in RuleProposer().moves(ADD_WRAPPER, None)
             if m.transform == "param_block_override"]
    assert [dict(m.params)["value"] for m in moves] == [1024, 4096, 256]


def test_spills_put_more_warps_first():
    """A whole tile held in registers spills: spreading it over more warps comes before fewer
    warps and before the other launch moves."""
    from tritonforge.model import Bound, Diagnosis, Hint

    spills = Diagnosis(Bound.LATENCY, "register spills",
                       hints=(Hint("avoid_spills", "38396 bytes per thread", ("num_warps",), 0.9),))
    moves = RuleProposer().moves(EXAMPLE.read_text(), spills)
    warps = [m for m in moves if m.description.startswith("num_warps")]
    assert warps[0].description.startswith("num_warps 4 -> 8")
    more = {m.description: m.score for m in warps}
    assert more["num_warps 4 -> 16 at launch 0"] > more["num_warps 4 -> 2 at launch 0"]
    plain = {m.description: m.score for m in RuleProposer().moves(EXAMPLE.read_text(), None)}
    assert more["num_warps 4 -> 8 at launch 0"] > plain["num_warps 4 -> 8 at launch 0"]


AUTOTUNED_ROWS = '''import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_M": 8}, num_warps=8),
                          triton.Config({"BLOCK_M": 16}, num_warps=8)], key=["M"])
@triton.jit
def rows_max_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=-float("inf"))
    tl.store(out_ptr + rows, tl.max(x, axis=1), mask=rows < M)


def rows_max(x):
    M, N = x.shape
    out = torch.empty(M, dtype=x.dtype, device=x.device)
    rows_max_kernel[lambda META: (triton.cdiv(M, META["BLOCK_M"]),)](x, out, M, N, BLOCK_N=64)
    return out
'''


def _block_values(diagnosis):
    import re

    task = task_from_file(EXAMPLE)
    ctx = ProposalContext(task, Candidate(AUTOTUNED_ROWS, "original"), 1,
                          HardwareInfo("cpu", True), diagnosis=diagnosis, budget=8)
    cand = next(c for c in RuleProposer().propose(ctx) if c.origin == "rules:autotune_blocks"
                and c.description.startswith("extend"))
    return sorted({int(v) for v in re.findall(r"'BLOCK_M': (\d+)", cand.source)} - {8, 16})


def test_an_autotune_range_is_extended_the_way_the_diagnosis_points():
    """Each extra config costs the autotuner a compile and a benchmark per key value: told to
    shrink (spills), only smaller tiles are added; told to grow, only larger; else both."""
    from tritonforge.model import Bound, Diagnosis, Hint

    spills = Diagnosis(Bound.LATENCY, "register spills",
                       hints=(Hint("avoid_spills", "", ("num_warps",), 0.9),))
    narrow = Diagnosis(Bound.LATENCY, "narrow accesses",
                       hints=(Hint("vectorize_accesses", "", (), 0.8),))
    assert _block_values(spills) == [1, 2, 4]
    assert _block_values(narrow) == [32, 64, 128]
    assert _block_values(None) == [1, 2, 4, 32, 64, 128]
    moves = [m.transform for m in RuleProposer().moves(AUTOTUNED_ROWS, None)]
    assert moves.index("autotune_blocks") < moves.index("autotune_widen")


def test_a_key_that_leaves_out_a_size_is_fixed_alone_first():
    """With a key that leaves out a size the body compares (N here), the autotuner picks once for
    every N; the first autotune move adds that size to the key and changes nothing else (the tile
    extension follows as a move of its own)."""
    src = AUTOTUNED_ROWS
    moves = [m for m in RuleProposer().moves(src, None) if m.transform == "autotune_blocks"]
    assert dict(moves[0].params) == {"kernel": "rows_max_kernel", "max_new": 0}
    assert "on N" in moves[0].description
    task = task_from_file(EXAMPLE)
    ctx = ProposalContext(task, Candidate(src, "original"), 1, HardwareInfo("cpu", True), budget=8)
    keyed = next(c for c in RuleProposer().propose(ctx) if c.description.startswith("key "))
    changed = [(a, b) for a, b in zip(src.splitlines(), keyed.source.splitlines()) if a != b]
    assert len(changed) == 1 and changed[0][0].endswith('key=["M"])') \
        and changed[0][1].endswith('key=["M", "N"])')
    # a key that covers both sizes: no key move
    covered = src.replace('key=["M"]', 'key=["M", "N"]')
    assert not [m for m in RuleProposer().moves(covered, None) if dict(m.params).get("max_new") == 0]


TWO_KERNELS = '''import torch
import triton
import triton.language as tl


@triton.jit
def neg_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, -tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def abs_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.abs(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


def neg(x):
    out = torch.empty_like(x)
    neg_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out


def absolute(x):
    out = torch.empty_like(x)
    abs_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out
'''


def test_sites_of_kernels_the_profile_never_saw_are_ranked_down_not_dropped():
    from tritonforge.model import KernelProfile, Profile
    from tritonforge.search.rules import profiled_kernels

    plain = RuleProposer().moves(TWO_KERNELS, None)
    at_sites = [m for m in plain if "site" in dict(m.params)]
    assert {dict(m.params)["site"] for m in at_sites[:4]} == {0, 1}     # both sites lead
    hot = profiled_kernels(Profile("t", "perf-0", "ncu", (KernelProfile("abs_kernel", ()),)))
    assert hot == {"abs_kernel"}
    ranked = RuleProposer().moves(TWO_KERNELS, None, hot)
    sites = [dict(m.params).get("site") for m in ranked if "site" in dict(m.params)]
    first_cold = sites.index(0)
    assert first_cold > 0 and set(sites[:first_cold]) == {1}
    assert 0 in sites                                               # still there, further down
    assert len(ranked) == len(plain)
    # without an ncu profile nothing is known about which kernels run
    assert profiled_kernels(Profile("t", "perf-0", "timing-only")) == frozenset()
    assert profiled_kernels(None) == frozenset()


def _autotuned_rows_ctx():
    """AUTOTUNED_ROWS with an ncu profile whose launch ran BLOCK_M=16, num_warps 8."""
    from tritonforge.model import CompileStats, Profile

    profile = Profile("t", "perf-0", "ncu", compile_stats=(
        CompileStats("rows_max_kernel", "cuda:90", 8, 3,
                     constexprs=(("BLOCK_M", 16), ("BLOCK_N", 64))),))
    return ProposalContext(task_from_file(EXAMPLE), Candidate(AUTOTUNED_ROWS, "original"), 1,
                           HardwareInfo("cpu", True), profile=profile, budget=8)


def test_an_autotuned_kernel_gets_its_profiled_pick_pinned():
    """The profile records the launches of one call with the config the autotuner picked: the
    rules offer that config passed at the launch, in place of the autotune."""
    from tritonforge.search.rules import autotune_picks_of

    ctx = _autotuned_rows_ctx()
    profile = ctx.profile
    from tritonforge.analyze import analyze_source

    picks = autotune_picks_of(profile, analyze_source(AUTOTUNED_ROWS))
    assert [(k, c.kwargs, c.num_warps) for k, c in picks.items()] == \
        [("rows_max_kernel", (("BLOCK_M", 16),), 8)]
    pinned = [c for c in RuleProposer().propose(ctx) if c.origin == "rules:autotune_pin"]
    assert len(pinned) == 1
    assert "@triton.autotune" not in pinned[0].source
    assert "BLOCK_N=64, BLOCK_M=16, num_warps=8, num_stages=3)" in pinned[0].source
    # no profile, no pick: nothing to pin
    assert not [c for c in RuleProposer().propose(replace_profile(ctx, None))
                if c.origin == "rules:autotune_pin"]


def replace_profile(ctx, profile):
    from dataclasses import replace

    return replace(ctx, profile=profile)


def test_row_kernels_get_several_rows_per_program_first_when_programs_do_too_little():
    import sys
    from pathlib import Path

    from tritonforge.model import Bound, Diagnosis, Hint

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transforms"))
    import tf_samples as S

    tiny = Diagnosis(Bound.LATENCY, "too little work per program",
                     hints=(Hint("larger_blocks", "many short waves", (), 0.9),))
    moves = RuleProposer().moves(S.ROW_SQNORM, tiny)
    rows = [m for m in moves if m.transform == "rows_per_program"]
    assert [dict(m.params)["elements"] for m in rows] == [2048, 8192]
    assert moves[0].transform == "rows_per_program"
    plain = [m.transform for m in RuleProposer().moves(S.ROW_SQNORM, None)]
    assert plain.index("rows_per_program") > 0          # not first without the hint


def test_a_launch_site_pin_a_hidden_caller_broke_comes_back_inside_a_one_config_autotune():
    """dequantize_matmul (H100, 2026-11-24): its test section launches the kernel with no tile
    sizes, so the launch-site pin failed there; the repair pins the same config inside the
    autotune, leaving every launch as it was. Other errors, and other candidates, get nothing."""
    from tritonforge.analyze import analyze_source
    from tritonforge.model import RepairRequest

    ctx = _autotuned_rows_ctx()
    rules = RuleProposer()
    cands = rules.propose(ctx)
    (pinned,) = [c for c in cands if c.origin == "rules:autotune_pin"]
    error = ("TypeError: dynamic_func() missing 1 required positional argument: 'BLOCK_M'")
    fix = rules.repair(RepairRequest(ctx, pinned, Status.RUNTIME_ERROR, error, 1))
    assert fix is not None and fix.origin == "repair:rules:autotune_pin"
    tuned = analyze_source(fix.source).kernel("rows_max_kernel").autotune
    assert tuned is not None and [dict(c.kwargs) for c in tuned.configs] == [{"BLOCK_M": 16}]
    assert "one-config @triton.autotune" in fix.description
    assert rules.repair(RepairRequest(ctx, pinned, Status.MISMATCH, "3 elements differ", 1)) is None
    other = next(c for c in cands if c.origin != "rules:autotune_pin")
    assert rules.repair(RepairRequest(ctx, other, Status.RUNTIME_ERROR, error, 1)) is None


def test_a_dead_zero_fill_is_the_first_move_even_near_the_roofline():
    from tritonforge.model import Bound, Diagnosis, Hint

    ref = (Path(__file__).parents[1] / "verify" / "catalogue" / "rowloss_ref.py").read_text()
    near = Diagnosis(Bound.MEMORY, "near the roofline", (), (Hint("near_roofline", "", (), 1.0),),
                     near_roofline=True)
    moves = RuleProposer().moves(ref, near)
    assert moves[0].transform == "drop_zero_fill"
    rowsum = (Path(__file__).parents[1] / "verify" / "catalogue" / "rowsum_ref.py").read_text()
    assert all(m.transform != "drop_zero_fill" for m in RuleProposer().moves(rowsum, None))


def test_a_namedtuple_built_per_call_is_hoisted_early():
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "transforms"))
    import tf_samples

    moves = RuleProposer().moves(tf_samples.ROW_SUM_NAMED, None)
    # first after the block sizes (which a round caps at half its budget): in round 1
    others = [m.transform for m in moves if m.transform != "constexpr_override"]
    assert others[0] == "hoist_namedtuple"
    assert all(m.transform != "hoist_namedtuple" for m in RuleProposer().moves(tf_samples.ROW_SUM, None))


def test_a_round_of_configuration_search_alone_still_gets_the_host_side_moves():
    """Near the roofline the rules offer only what no roofline of the kernels bounds (a dropped
    zero fill); elsewhere they offer it among their other moves."""
    from dataclasses import replace

    from tritonforge.search.rules import HOST_SIDE_MOVES

    task = task_from_file(EXAMPLE)
    zeroed = task.source.replace("out = torch.empty_like(x)", "out = torch.zeros_like(x)")
    assert zeroed != task.source
    only = RuleProposer().propose(replace(_ctx(task, zeroed, budget=6), config_search_only=True))
    assert [c.origin for c in only] == ["rules:drop_zero_fill"]
    assert "drop_zero_fill" in HOST_SIDE_MOVES
    assert RuleProposer().propose(replace(_ctx(task, task.source, budget=6),
                                          config_search_only=True)) == []
    every = RuleProposer().propose(_ctx(task, zeroed, budget=16))
    assert "rules:drop_zero_fill" in {c.origin for c in every} and len(every) > 1
