"""pid_swizzle and persistent_grid: they change which program computes which tile."""

import pytest

import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.errors import TransformError
from tritonforge.transforms import get

SWZ = get("pid_swizzle")
PER = get("persistent_grid")

TWO_D_UNTILED = '''import torch
import triton
import triton.language as tl


@triton.jit
def head_kernel(x_ptr, H, D: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    offs = (b * H + h) * D + tl.arange(0, D)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)


def heads(x):
    head_kernel[(x.shape[0], x.shape[1])](x, x.shape[1], D=x.shape[2])
    return x
'''


# ---------------------------------------------------------------- pid_swizzle

def test_swizzle_replaces_the_program_ids_and_adds_the_group_param():
    a = analyze_source(S.MATMUL)
    v = SWZ.applies(a)
    assert v.ok and v.targets == ("matmul_kernel (pid_m, pid_n)",)
    out = SWZ.apply(S.MATMUL, a, group_size=4)
    assert "BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr = 4):\n" in out
    assert "    _tf_lin = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)\n" in out
    assert "    pid_m = _tf_first_m + ((_tf_lin % _tf_in_group) % _tf_group_m)\n" \
           "    pid_n = (_tf_lin % _tf_in_group) // _tf_group_m\n" \
           "    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)\n" in out
    assert "pid_m = tl.program_id(0)" not in out and "pid_n = tl.program_id(1)" not in out
    assert out.split("def matmul(a, b):")[1] == S.MATMUL.split("def matmul(a, b):")[1]


@pytest.mark.parametrize("src, reason", [
    (S.ADD_LOCAL, "no kernel with 2-D program ids"),
    (TWO_D_UNTILED, "does not tile both grid axes"),
    (S.MATMUL.replace("offs_m = pid_m * BLOCK_M", "offs_m = tl.program_id(0) * BLOCK_M"),
     "more than once"),
])
def test_swizzle_refusals(src, reason):
    v = SWZ.applies(analyze_source(src))
    assert not v.ok and reason in v.reason, v.reason
    with pytest.raises(TransformError):
        SWZ.apply(src)


def test_swizzle_twice_is_refused():
    v = SWZ.applies(analyze_source(SWZ.apply(S.MATMUL)), kernel="matmul_kernel")
    assert not v.ok and "does not read tl.program_id(0) and tl.program_id(1)" in v.reason


@pytest.mark.parametrize("group_size", [1, 2, 8])
def test_swizzle_same_values_when_run(load, group_size):
    S.assert_same_results(load, "MATMUL", SWZ.apply(S.MATMUL, group_size=group_size),
                          rtol=0, atol=0)


# ---------------------------------------------------------------- persistent_grid

def test_persistent_wraps_the_body_and_rewrites_the_launch():
    a = analyze_source(S.ADD_LOCAL)
    assert PER.applies(a).targets == ("add_kernel",)
    out = PER.apply(S.ADD_LOCAL, a)
    assert ("def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr, "
            "tf_num_tiles):\n"
            "    for pid in range(tl.program_id(0), tf_num_tiles, tl.num_programs(0)):  # which tile\n"
            "        block_start = pid * BLOCK_SIZE\n") in out
    assert "    add_kernel[(min(_tf_num_sms(), num_blocks),)](x, y, out, n_elements, BLOCK_SIZE, " \
           "tf_num_tiles=num_blocks)\n" in out
    assert out.count("def _tf_num_sms():") == 1
    assert out.index("def _tf_num_sms():") < out.index("# Elementwise add")


def test_persistent_with_a_grid_variable():
    out = PER.apply(S.IN_PLACE.replace(
        "    axpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, a, n, BLOCK=BLOCK)",
        "    grid = (triton.cdiv(n, BLOCK),)\n    axpy_kernel[grid](x, y, a, n, BLOCK=BLOCK)"))
    assert "axpy_kernel[(min(_tf_num_sms(), grid[0]),)](x, y, a, n, BLOCK=BLOCK, " \
           "tf_num_tiles=grid[0])" in out
    # the program id was read inline: a loop variable replaces the call
    assert "def axpy_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr, tf_num_tiles):\n" \
           "    for _tf_pid in range(tl.program_id(0), tf_num_tiles, tl.num_programs(0)):\n" \
           "        offs = _tf_pid * BLOCK + tl.arange(0, BLOCK)\n" in out


@pytest.mark.parametrize("src, reason", [
    (S.EARLY_RETURN, "returns early"),
    (S.MATMUL, "exactly once"),
    (S.SCALE_KEYWORD, "not a 1-D tuple"),
    (S.ROW_SUM_PTR.replace("acc = tl.zeros", "_tf_x_ptr = x_ptr\n    acc = tl.zeros"),
     "already uses _tf_x_ptr"),
])
def test_persistent_refusals(src, reason):
    v = PER.applies(analyze_source(src))
    assert not v.ok and reason in v.reason, v.reason


@pytest.mark.parametrize("sample", ["ADD_LOCAL", "IN_PLACE", "ATOMIC_SUM", "ROW_SUM",
                                    "LITERAL_GRID", "ROW_SUM_PTR"])
def test_persistent_same_values_when_run(load, sample):
    src = getattr(S, sample)
    assert PER.applies(analyze_source(src)).ok
    S.assert_same_results(load, sample, PER.apply(src), rtol=1e-6, atol=1e-5)


def test_persistent_copies_a_reassigned_parameter_at_the_top_of_each_tile():
    out = PER.apply(S.ROW_SUM_PTR)
    assert ("    for row in range(tl.program_id(0), tf_num_tiles, tl.num_programs(0)):\n"
            "        _tf_x_ptr = x_ptr\n"
            "        _tf_out_ptr = out_ptr\n"
            "        _tf_x_ptr += row * stride\n"
            "        _tf_out_ptr = _tf_out_ptr + row\n") in out
    assert "tl.load(_tf_x_ptr + cols" in out and "tl.store(_tf_out_ptr, " in out
