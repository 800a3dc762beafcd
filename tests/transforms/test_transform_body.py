"""loop_pipelining, offset_hints and cache_hints: compiler hints inside kernel bodies."""

import textwrap

import pytest

import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.errors import TransformError
from tritonforge.transforms import get

PIPE = get("loop_pipelining")
OFFS = get("offset_hints")
CACHE = get("cache_hints")


# ---------------------------------------------------------------- loop_pipelining

def test_pipelining_rewrites_the_loop_header_only():
    out = PIPE.apply(S.ROW_SUM, num_stages=4)
    assert out == S.ROW_SUM.replace(
        "for off in range(0, n_cols, BLOCK_N):  # walk the row",
        "for off in tl.range(0, n_cols, BLOCK_N, num_stages=4):  # walk the row")
    out = PIPE.apply(S.MATMUL)
    assert "for k in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=3):" in out


def test_pipelining_changes_num_stages_of_a_tl_range():
    src = S.ROW_SUM.replace("range(0, n_cols, BLOCK_N)", "tl.range(0, n_cols, BLOCK_N, num_stages=2)")
    a = analyze_source(src)
    assert not PIPE.applies(a, num_stages=2).ok
    assert "num_stages=5)" in PIPE.apply(src, a, num_stages=5)


@pytest.mark.parametrize("src, params, reason", [
    (S.ADD_LOCAL, {}, "no loop in a kernel"),
    (S.ROW_SUM.replace("for off in range(", "for off in tl.static_range("), {},
     "tl.static_range loop"),
    (S.ROW_SUM, {"num_stages": 0}, "from 1 to 8"),
    (S.ROW_SUM.replace("acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, "
                       "other=0.0)", "acc += cols"), {}, "loads nothing"),
])
def test_pipelining_refusals(src, params, reason):
    v = PIPE.applies(analyze_source(src), **params)
    assert not v.ok and reason in v.reason, v.reason


def test_pipelining_innermost_only_by_default():
    src = S.ROW_SUM.replace(
        "    for off in range(0, n_cols, BLOCK_N):  # walk the row\n",
        "    for rep in range(2):\n      for off in range(0, n_cols, BLOCK_N):  # walk the row\n")
    src = src.replace("        cols = off", "          cols = off").replace(
        "        acc += tl.load", "          acc += tl.load")
    a = analyze_source(src)
    v = PIPE.applies(a)
    assert v.targets == ("row_sum_kernel loop 1 (line 11)",)
    assert "holds another loop" in v.reason
    assert len(PIPE.applies(a, innermost_only=False).targets) == 2


@pytest.mark.parametrize("sample", ["ROW_SUM", "MATMUL"])
def test_pipelining_same_values_when_run(load, sample):
    S.assert_same_results(load, sample, PIPE.apply(getattr(S, sample)), rtol=0, atol=0)


# ---------------------------------------------------------------- offset_hints

def test_offset_hints_added_after_the_offsets():
    out = OFFS.apply(S.ADD_LOCAL)
    assert ("    offsets = block_start + tl.arange(0, BLOCK_SIZE)\n"
            "    offsets = tl.max_contiguous(tl.multiple_of(offsets, BLOCK_SIZE), BLOCK_SIZE)\n"
            "    mask = offsets < n_elements\n") in out
    out = OFFS.apply(S.MATMUL)
    assert "offs_m = tl.max_contiguous(tl.multiple_of(offs_m, BLOCK_M), BLOCK_M)" in out
    assert "offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)" in out
    assert "tl.multiple_of(offs_k" not in out          # not program-id based


def test_offset_hints_in_a_nested_kernel_keep_indentation():
    src = "import torch\nimport triton\nimport triton.language as tl\n\n\ndef make():\n" + \
        textwrap.indent(S.SCALE_KEYWORD.split("\n\n\n")[1], "    ") + "\n    return scale_kernel\n"
    out = OFFS.apply(src)
    assert "        offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK_SIZE), BLOCK_SIZE)\n" \
        in out
    assert out.replace("        offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK_SIZE), "
                       "BLOCK_SIZE)\n", "") == src


def test_offset_hints_refusals():
    hinted = OFFS.apply(S.ADD_LOCAL)
    v = OFFS.applies(analyze_source(hinted))
    assert not v.ok and "already has alignment hints" in v.reason
    v = OFFS.applies(analyze_source(S.ROW_SUM))
    assert not v.ok and "offset in this source" in v.reason
    with pytest.raises(TransformError):
        OFFS.apply(S.ROW_SUM)


@pytest.mark.parametrize("sample", ["ADD_LOCAL", "SCALE_KEYWORD", "MATMUL"])
def test_offset_hints_same_values_when_run(load, sample):
    S.assert_same_results(load, sample, OFFS.apply(getattr(S, sample)), rtol=0, atol=0)


# ---------------------------------------------------------------- cache_hints

def test_cache_hints_on_streamed_loads():
    out = CACHE.apply(S.ADD_LOCAL)
    assert 'x = tl.load(x_ptr + offsets, mask=mask, eviction_policy="evict_first")' in out
    assert 'y = tl.load(y_ptr + offsets, mask=mask, eviction_policy="evict_first")' in out
    out = CACHE.apply(S.ADD_LOCAL, policy=None, cache_modifier=".cg")
    assert 'x = tl.load(x_ptr + offsets, mask=mask, cache_modifier=".cg")' in out


def test_cache_hints_skip_loops_and_dot_unless_asked():
    v = CACHE.applies(analyze_source(S.ROW_SUM))
    assert not v.ok and "every load sits in a loop" in v.reason
    v = CACHE.applies(analyze_source(S.MATMUL))
    assert not v.ok and "uses tl.dot" in v.reason
    out = CACHE.apply(S.ROW_SUM, scope="all", policy="evict_last")
    assert 'other=0.0, eviction_policy="evict_last")' in out


def test_cache_hints_refusals():
    v = CACHE.applies(analyze_source(S.ADD_LOCAL), policy="sometimes")
    assert not v.ok and "policy must be one of" in v.reason
    hinted = CACHE.apply(S.ADD_LOCAL)
    v = CACHE.applies(analyze_source(hinted))
    assert not v.ok and "already has hints" in v.reason


@pytest.mark.parametrize("sample, params", [("ADD_LOCAL", {}), ("IN_PLACE", {}),
                                            ("ROW_SUM", {"scope": "all",
                                                         "cache_modifier": ".cg"})])
def test_cache_hints_same_values_when_run(load, sample, params):
    S.assert_same_results(load, sample, CACHE.apply(getattr(S, sample), **params), rtol=0, atol=0)
