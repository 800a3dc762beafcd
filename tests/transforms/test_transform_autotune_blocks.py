"""autotune_blocks: tile sizes past an autotune's listed range, and sizes its key leaves out."""

import pytest

import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.transforms import ConfigSpec, get
from tritonforge.transforms.configs import extend_block_range, missing_key_names

B = get("autotune_blocks")

# A row-max kernel whose list tunes only rows per program, over a narrow range, with a key that
# leaves out the row length (a constexpr the body loops over).
ROWS_MAX = '''import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 8}, num_warps=8),
        triton.Config({"BLOCK_M": 16}, num_warps=8),
    ],
    key=[],
)
@triton.jit
def rows_max_kernel(x_ptr, out_ptr, M, N: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.full([BLOCK_M], -float("inf"), tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=-float("inf"))
        acc = tl.maximum(acc, tl.max(x, axis=1))
    tl.store(out_ptr + rows, acc, mask=rows < M)


def rows_max(x):
    M, N = x.shape
    out = torch.empty(M, dtype=torch.float32, device=x.device)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]),)
    rows_max_kernel[grid](x, out, M, N=N, BLOCK_N=16)
    return out
'''


def _kernel(source, name):
    return analyze_source(source).kernel(name)


def test_range_goes_below_and_above_the_list_nearest_first():
    k = _kernel(ROWS_MAX, "rows_max_kernel")
    specs = [ConfigSpec((("BLOCK_M", 8),), 8, 3), ConfigSpec((("BLOCK_M", 16),), 8, 3)]
    new = extend_block_range(k, specs, limit=64)
    values = [c.value("BLOCK_M") for c in new]
    # BLOCK_N is a tile size beside BLOCK_M: a tiled kernel steps 3 ways each way, capped at 256
    assert values == [4, 32, 2, 64, 1, 128]
    assert all(c not in specs for c in new)
    # a smaller tile keeps its warps; a larger one gets more, as many per element as before
    assert [c.num_warps for c in new] == [8, 16, 8, 16, 8, 16]
    assert [c.value("BLOCK_M") for c in extend_block_range(k, specs, 64, down_steps=0)] == \
        [32, 64, 128]
    assert [c.value("BLOCK_M") for c in extend_block_range(k, specs, 64, up_steps=0)] == \
        [4, 2, 1]
    assert len(extend_block_range(k, specs, limit=3)) == 3


def test_a_1d_block_grows_further_and_a_dot_tile_stays_at_16_or_more():
    k = _kernel(S.AUTOTUNED, "double_kernel")
    specs = [ConfigSpec((("BLOCK", 32),), 4, 3), ConfigSpec((("BLOCK", 64),), 4, 2)]
    values = {c.value("BLOCK") for c in extend_block_range(k, specs, limit=64)}
    assert values == {16, 8, 4, 128, 256, 512, 1024, 2048}
    mm = _kernel(S.MATMUL.replace("@triton.jit", '''@triton.autotune(configs=[
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4)], key=["M"])
@triton.jit''', 1), "matmul_kernel")
    new = extend_block_range(mm, [ConfigSpec((("BLOCK_M", 32), ("BLOCK_N", 32),
                                               ("BLOCK_K", 32)), 4, 3)], limit=64)
    assert new and all(min(v for _, v in c.kwargs) >= 16 and c.num_warps >= 4 for c in new)


def test_a_tile_beside_one_a_heuristic_sizes_only_shrinks():
    src = ROWS_MAX.replace("@triton.jit", '@triton.heuristics({"BLOCK_N": lambda a: 16})\n@triton.jit', 1)
    src = src.replace("N=N, BLOCK_N=16)", "N=N)")
    k = _kernel(src, "rows_max_kernel")
    specs = [ConfigSpec((("BLOCK_M", 8),), 8, 3), ConfigSpec((("BLOCK_M", 16),), 8, 3)]
    assert [c.value("BLOCK_M") for c in extend_block_range(k, specs, 64)] == [4, 2, 1]


def test_missing_key_names_are_the_sizes_the_body_depends_on():
    assert missing_key_names(_kernel(ROWS_MAX, "rows_max_kernel")) == ["M", "N"]
    assert missing_key_names(_kernel(S.AUTOTUNED, "double_kernel")) == []


def test_apply_appends_configs_and_completes_the_key():
    out = B.apply(ROWS_MAX, max_new=4)
    assert "    key=['M', 'N'],\n" in out or '    key=["M", "N"],\n' in out
    assert "triton.Config({'BLOCK_M': 4}, num_warps=8, num_stages=3)," in out
    assert "triton.Config({'BLOCK_M': 32}, num_warps=16, num_stages=3)," in out
    assert out.count("triton.Config(") == 2 + 4
    # the list keeps its own lines and comments
    assert '        triton.Config({"BLOCK_M": 16}, num_warps=8),\n' in out


def test_key_only_and_configs_only():
    keyed = B.apply(ROWS_MAX, configs=[])
    assert keyed.count("triton.Config(") == 2 and "'M', 'N'" in keyed
    same_key = B.apply(ROWS_MAX, key=False, max_new=2)
    assert "key=[]," in same_key and same_key.count("triton.Config(") == 4


def test_a_key_given_as_a_name_is_left_alone():
    src = ROWS_MAX.replace("    key=[],\n", "    key=KEYS,\n").replace(
        "@triton.autotune", "KEYS = []\n\n\n@triton.autotune")
    out = B.apply(src, max_new=2)
    assert "key=KEYS," in out and out.count("triton.Config(") == 4


@pytest.mark.parametrize("sample, params, reason", [
    ("ADD_LOCAL", {}, "no autotuned kernel"),
    ("ADD_LOCAL", {"kernel": "add_kernel"}, "not autotuned"),
])
def test_refusals_say_why(sample, params, reason):
    v = B.applies(analyze_source(getattr(S, sample)), **params)
    assert not v.ok and reason in v.reason


def test_nothing_to_do_is_a_refusal():
    src = ROWS_MAX.replace("key=[],", 'key=["M", "N"],')
    v = B.applies(analyze_source(src), configs=[], key=True)
    assert not v.ok and "no tile size to extend" in v.reason


def test_same_values_when_run(load, fake_bench):
    """Every appended config runs (the fake bench picks the last one tried) and the rows' maxima
    are the original's, exactly: a max does not depend on the order it is taken in."""
    import torch

    out = B.apply(ROWS_MAX, max_new=6)
    x = torch.randn(37, 50)
    want = getattr(load(ROWS_MAX), "rows_max")(x)
    got = getattr(load(out), "rows_max")(x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(want, x.max(dim=1).values, rtol=0, atol=0)
    assert len(fake_bench) >= 2 + 6
