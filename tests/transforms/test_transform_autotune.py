"""autotune (injection) and autotune_widen."""

import pytest

import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.errors import TransformError
from tritonforge.transforms import ConfigSpec, get

T = get("autotune")
W = get("autotune_widen")


def test_injects_decorator_and_meta_grid():
    out = T.apply(S.ADD_LOCAL)
    assert "# Elementwise add, one tile per program.\n@triton.autotune(\n    configs=[\n" \
           "        triton.Config({'BLOCK_SIZE': 64}, num_warps=4, num_stages=3),\n" in out
    assert "    key=['n_elements'],\n)\n@triton.jit\ndef add_kernel(" in out
    assert "    add_kernel[lambda META: ((n_elements + META['BLOCK_SIZE'] - 1) // " \
           "META['BLOCK_SIZE'],)](x, y, out, n_elements)\n" in out
    assert "restore_value" not in out and "reset_to_zero" not in out
    assert "BLOCK_SIZE = 64  # hand-picked" in out       # left for any other reader


def test_keyword_block_and_launch_options_leave_the_launch():
    out = T.apply(S.SCALE_KEYWORD)
    assert "scale_kernel[grid](\n        x, out, n, factor,\n    )" in out
    assert "triton.Config({'BLOCK_SIZE': 128}, num_warps=4, num_stages=3)" in out


def test_positional_blocks_removed_and_later_args_become_keywords():
    out = T.apply(S.MATMUL)
    assert "c.stride(0), c.stride(1))\n" in out
    assert "    grid = lambda META: (triton.cdiv(M, META['BLOCK_M']), " \
           "triton.cdiv(N, META['BLOCK_N']))\n    matmul_kernel[grid](" in out
    assert "'BLOCK_M': 8" not in out          # tl.dot needs tiles of at least 16
    assert "key=['M', 'N', 'K']" in out
    src = S.MATMUL.replace("c.stride(0), c.stride(1), BLOCK_M, BLOCK_N, BLOCK_K=16)",
                           "BLOCK_M, BLOCK_N, 16, c.stride(0), c.stride(1))")
    src = src.replace("stride_cm, stride_cn,\n                  BLOCK_M: tl.constexpr, "
                      "BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):",
                      "BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,\n"
                      "                  stride_cm, stride_cn):")
    out = T.apply(src, names=["BLOCK_M", "BLOCK_N"])
    flat = " ".join(out.split())
    assert "b.stride(1), BLOCK_K=16, stride_cm=c.stride(0), stride_cn=c.stride(1))" in flat


def test_in_place_and_atomic_buffers():
    assert "restore_value=['x_ptr']," in T.apply(S.IN_PLACE)
    out = T.apply(S.ATOMIC_SUM)
    assert "reset_to_zero=['out_ptr']," in out and "restore_value" not in out
    ones = S.ATOMIC_SUM.replace("torch.zeros(1,", "torch.ones(1,")
    assert "restore_value=['out_ptr']," in T.apply(ones)


def test_other_readers_of_the_block_keep_it_out_of_the_configs():
    src = S.ADD_LOCAL.replace("    return out\n", "    partial = torch.empty(num_blocks)\n"
                                                   "    return out\n")
    out = T.apply(src)
    assert "triton.Config({}, num_warps=4" in out and "add_kernel[(num_blocks,)]" in out
    with pytest.raises(TransformError, match="num_blocks is also read at line"):
        T.apply(src, names=["BLOCK_SIZE"])


@pytest.mark.parametrize("sample, params, reason", [
    ("AUTOTUNED", {}, "already autotuned"),
    ("NO_GRID_FOLLOW", {"names": ["BLOCK"]}, "does not read BLOCK"),
    ("ADD_LOCAL", {"names": ["BLOCK_SIZE"], "key": ["nope"]}, "not parameters"),
    ("ADD_LOCAL", {"names": ["BLOCK_SIZE"], "configs": [ConfigSpec((("X", 1),))]},
     "does not set exactly"),
])
def test_refusals_say_why(sample, params, reason):
    src = getattr(S, sample)
    v = T.applies(analyze_source(src), **params)
    if v.ok:        # some reasons need the source (grids), visible only to apply
        with pytest.raises(TransformError, match=reason):
            T.apply(src, **params)
    else:
        assert reason in v.reason


def test_star_args_launch_is_refused():
    src = S.ADD_LOCAL.replace("(x, y, out, n_elements, BLOCK_SIZE)",
                              "(*(x, y, out, n_elements, BLOCK_SIZE))")
    v = T.applies(analyze_source(src))
    assert not v.ok and "*args" in v.reason


@pytest.mark.parametrize("sample", ["ADD_LOCAL", "SCALE_KEYWORD", "IN_PLACE", "ATOMIC_SUM",
                                    "ROW_SUM", "MATMUL", "NO_GRID_FOLLOW"])
def test_same_values_when_run(load, fake_bench, sample):
    out = T.apply(getattr(S, sample))
    S.assert_same_results(load, sample, out, rtol=1e-4, atol=1e-4)
    assert len(fake_bench) > 1          # several configs really ran


def test_restore_value_is_what_keeps_in_place_kernels_right(load, fake_bench):
    out = T.apply(S.IN_PLACE).replace("    restore_value=['x_ptr'],\n", "")
    with pytest.raises(AssertionError):
        S.assert_same_results(load, "IN_PLACE", out)


# ---------------------------------------------------------------- widen

def test_widen_appends_in_the_list_layout():
    out = W.apply(S.AUTOTUNED, max_new=2)
    assert ("        triton.Config({'BLOCK': 64}, num_warps=4, num_stages=2),\n"
            "        triton.Config({'BLOCK': 32}, num_warps=8, num_stages=3),\n"
            "        triton.Config({'BLOCK': 64}, num_warps=8, num_stages=2),\n"
            "    ],\n") in out
    assert "triton.Config({'BLOCK': 32}, num_warps=4),  # small\n" in out


def test_widen_with_explicit_configs():
    new = ConfigSpec((("BLOCK", 128),), num_warps=8, num_stages=4)
    out = W.apply(S.AUTOTUNED, configs=[new])
    assert new.render() + ",\n    ],\n" in out


@pytest.mark.parametrize("sample, params, reason", [
    ("ADD_LOCAL", {"kernel": "add_kernel"}, "not autotuned"),
    ("ADD_LOCAL", {}, "no autotuned kernel"),
    ("AUTOTUNED", {"configs": [ConfigSpec((("BLOCK", 32),), 4, 3)]}, "already there"),
])
def test_widen_refusals(sample, params, reason):
    v = W.applies(analyze_source(getattr(S, sample)), **params)
    assert not v.ok and reason in v.reason


def test_widen_refuses_generated_configs():
    src = S.AUTOTUNED.replace("configs=[", "configs=make_configs() + [", 1)
    v = W.applies(analyze_source(src))
    assert not v.ok and "not a list of triton.Config calls" in v.reason


def test_widen_same_values_when_run(load, fake_bench):
    S.assert_same_results(load, "AUTOTUNED", W.apply(S.AUTOTUNED), rtol=0, atol=0)
    assert len(fake_bench) >= 3


LOOPED = S.AUTOTUNED.replace(
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)\n",
    "    for start in range(0, n, BLOCK):\n"
    "        offs = start + tl.arange(0, BLOCK)\n"
    "        tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)\n")


def _stages_by_block(src):
    from tritonforge.transforms.autotune_widen import existing_specs

    k = analyze_source(src).kernel("double_kernel")
    return {(dict(c.kwargs)["BLOCK"], c.num_stages) for c in existing_specs(k)}


def test_widen_varies_num_stages_only_where_the_kernel_has_a_loop():
    assert LOOPED != S.AUTOTUNED
    before = _stages_by_block(S.AUTOTUNED)                       # {(32, 3), (64, 2)}
    loopless = _stages_by_block(W.apply(S.AUTOTUNED, max_new=8))
    assert loopless == before                                    # only num_warps moved
    looped = _stages_by_block(W.apply(LOOPED, max_new=8))
    assert looped > before and {(32, 4), (64, 1)} <= looped
