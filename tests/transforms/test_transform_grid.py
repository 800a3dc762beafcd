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
    assert "    add_kernel[(min(_tf_num_sms() * 8, num_blocks),)](x, y, out, n_elements, BLOCK_SIZE, " \
           "tf_num_tiles=num_blocks)\n" in out
    assert out.count("def _tf_num_sms(") == 1
    assert out.index("def _tf_num_sms(") < out.index("# Elementwise add")


def test_persistent_with_a_grid_variable():
    out = PER.apply(S.IN_PLACE.replace(
        "    axpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, a, n, BLOCK=BLOCK)",
        "    grid = (triton.cdiv(n, BLOCK),)\n    axpy_kernel[grid](x, y, a, n, BLOCK=BLOCK)"))
    assert "axpy_kernel[(min(_tf_num_sms() * 8, grid[0]),)](x, y, a, n, BLOCK=BLOCK, " \
           "tf_num_tiles=grid[0])" in out
    # the program id was read inline: a loop variable replaces the call
    assert "def axpy_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr, tf_num_tiles):\n" \
           "    for _tf_pid in range(tl.program_id(0), tf_num_tiles, tl.num_programs(0)):\n" \
           "        offs = _tf_pid * BLOCK + tl.arange(0, BLOCK)\n" in out


@pytest.mark.parametrize("src, reason", [
    (S.EARLY_RETURN.replace("    if pid * BLOCK >= n:\n        return\n",
                            "    if pid * BLOCK >= n:\n        if n > 0:\n            return\n"),
     "returns early other than by `if cond: return` directly in its body"),
    (S.EARLY_RETURN.replace("        return\n", "        return\n    else:\n        n = n + 0\n"),
     "returns early other than"),
    (S.MATMUL, "exactly once"),
    (S.GRID_3D.replace(", 1, 1)", ", 2, 1)"),
     "axes after the first must be a literal 1"),
    (S.AUTOTUNED, "reads META['BLOCK'], which @triton.autotune sets"),
    (S.SCALE_KEYWORD.replace("        BLOCK_SIZE=128,  # keep\n", ""),
     "reads META['BLOCK_SIZE'], which the launch does not pass"),
    (S.SCALE_KEYWORD.replace("BLOCK_SIZE=128,", "BLOCK_SIZE=triton.next_power_of_2(n),"),
     "a call, which the rewrite would evaluate twice"),
    (S.SCALE_KEYWORD.replace("(triton.cdiv(n, meta['BLOCK_SIZE']),)",
                             "(triton.cdiv(n, meta.get('BLOCK_SIZE')),)"),
     "reads META other than as META['KEY']"),
    (S.GRID_3D_LOCAL.replace("    grid = (triton.cdiv(n, 64), 1, 1)\n",
                             "    grid = (triton.cdiv(n, 64), 1, 1)\n    if n > 512:\n"
                             "        grid = (triton.cdiv(n, 64),)\n"),
     "not assigned exactly once before the launch"),
    (S.ROW_SUM_PTR.replace("acc = tl.zeros", "_tf_x_ptr = x_ptr\n    acc = tl.zeros"),
     "already uses _tf_x_ptr"),
])
def test_persistent_refusals(src, reason):
    v = PER.applies(analyze_source(src))
    assert not v.ok and reason in v.reason, v.reason


@pytest.mark.parametrize("sample", ["ADD_LOCAL", "IN_PLACE", "ATOMIC_SUM", "ROW_SUM",
                                    "LITERAL_GRID", "ROW_SUM_PTR", "SCALE_KEYWORD", "ROWS_LAMBDA",
                                    "GRID_3D", "GRID_3D_LOCAL", "EARLY_RETURN", "GUARDED_ROWS"])
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


# ---------------------------------------------------------------- persistent_grid: wider shapes
# (each runs above, in test_persistent_same_values_when_run, with more tiles than the 4 programs
# _tf_num_sms() gives without a GPU)

def test_persistent_lambda_grid_counts_tiles_with_the_launch_arguments():
    out = PER.apply(S.SCALE_KEYWORD)
    # META['BLOCK_SIZE'] is the BLOCK_SIZE=128 the launch passes: the same count, read at the launch
    assert "    scale_kernel[(min(_tf_num_sms() * 8, triton.cdiv(n, 128)),)](\n" in out
    assert "        num_warps=4,\n        tf_num_tiles=triton.cdiv(n, 128),\n    )" in out


def test_persistent_lambda_grid_without_meta():
    out = PER.apply(S.ROWS_LAMBDA)
    assert "    row_sum_kernel[(min(_tf_num_sms() * 16, x.shape[0]),)](x, out, x.shape[1], " \
           "x.stride(0), BLOCK_N=16, num_warps=2, tf_num_tiles=x.shape[0])" in out


def test_persistent_programs_per_sm_follow_the_warps_or_the_parameter():
    """32 warps' worth of programs per SM by default (one program per SM left a memory-bound row
    kernel with 4 warps per SM: 371% slower, H100); programs_per_sm sets it."""
    from tritonforge.transforms.persistent import default_programs_per_sm

    assert [default_programs_per_sm(w) for w in (1, 2, 4, 8, 16, 32, None)] == [32, 16, 8, 4, 2, 1, 8]
    assert "neg_kernel[(min(_tf_num_sms(), triton.cdiv(n, 64)), 1, 1)]" in \
        PER.apply(S.GRID_3D, programs_per_sm=1)
    assert "neg_kernel[(min(_tf_num_sms() * 3, triton.cdiv(n, 64)), 1, 1)]" in \
        PER.apply(S.GRID_3D, programs_per_sm=3)
    for bad in (0, -2, 1.5, True):
        with pytest.raises(TransformError, match="programs_per_sm"):
            PER.apply(S.GRID_3D, programs_per_sm=bad)


def test_persistent_sm_count_is_read_once_per_device(monkeypatch):
    """The helper the rewrite adds asks torch for the SM count once per device, not per launch."""
    import torch

    namespace: dict = {}
    exec(PER.apply(S.GRID_3D).split("@triton.jit")[0], namespace)
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda d: calls.append(d) or type("P", (), {"multi_processor_count": 132})())
    assert [namespace["_tf_num_sms"]() for _ in range(3)] == [132, 132, 132]
    assert calls == [0]


def test_persistent_keeps_trailing_unit_axes():
    out = PER.apply(S.GRID_3D)
    assert "neg_kernel[(min(_tf_num_sms() * 8, triton.cdiv(n, 64)), 1, 1)](x, out, n, 64, " \
           "tf_num_tiles=triton.cdiv(n, 64))" in out
    out = PER.apply(S.GRID_3D_LOCAL)
    assert "neg_kernel[(min(_tf_num_sms() * 8, grid[0]), 1, 1)](x, out, n, 64, " \
           "tf_num_tiles=grid[0])" in out


def test_persistent_grid_reassigned_just_before_the_launch():
    # assigned twice, but the launch's value is that of the statement just before it
    src = S.GRID_3D_LOCAL.replace("    grid = (triton.cdiv(n, 64), 1, 1)\n",
                                  "    grid = (1, 2)\n    grid = (triton.cdiv(n, 64), 1, 1)\n")
    assert PER.applies(analyze_source(src)).ok


def test_persistent_early_returns_skip_only_their_tile():
    out = PER.apply(S.GUARDED_ROWS)
    assert ("    for row in range(tl.program_id(0), tf_num_tiles, tl.num_programs(0)):\n"
            "        # programs past the last row do nothing\n"
            "        _tf_x_ptr = x_ptr\n"
            "        if not (row >= n_rows):\n"
            "            _tf_x_ptr += row * stride\n") in out
    assert ("            if not (tl.sum(x, axis=0) < 0):  # rows of negative sum stay zero\n"
            "                tl.store(out_ptr + row * stride + cols, x, mask=cols < n_cols)\n"
            "\n\ndef keep_rows(x):") in out
    assert "return\n" not in out.split("def keep_rows_kernel")[1].split("def keep_rows(")[0]


@pytest.mark.parametrize("sample, kernel, signature, constexprs", [
    ("GUARDED_ROWS", "keep_rows_kernel",
     {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32", "stride": "i32",
      "BLOCK_N": "constexpr", "tf_num_tiles": "i32"}, {"BLOCK_N": 8}),
    ("SCALE_KEYWORD", "scale_kernel",
     {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "factor": "fp32",
      "BLOCK_SIZE": "constexpr", "tf_num_tiles": "i32"}, {"BLOCK_SIZE": 128}),
])
def test_persistent_output_compiles_for_sm90(tmp_path, sample, kernel, signature, constexprs):
    """The interpreter runs Python; the compiler is stricter: compile the rewrite for sm_90."""
    S.assert_compiles_for_sm90(tmp_path / f"{sample.lower()}_persistent.py",
                               PER.apply(getattr(S, sample)), kernel, signature, constexprs)


def test_persistent_param_goes_before_the_closing_line_of_a_multiline_signature():
    src = S.EARLY_RETURN.replace("def guarded_kernel(x_ptr, n, BLOCK: tl.constexpr):",
                                 "def guarded_kernel(\n    x_ptr, n,\n    BLOCK: tl.constexpr\n):")
    assert "    BLOCK: tl.constexpr,\n    tf_num_tiles\n):\n    for pid in range(" in PER.apply(src)
