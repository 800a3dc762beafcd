"""launch_params: num_warps/num_stages at launches, or on autotune configs."""

import pytest
import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.errors import TransformError
from tritonforge.transforms import get

T = get("launch_params")


def test_appends_keywords_keeping_comments():
    out = T.apply(S.ADD_LOCAL, num_warps=8, num_stages=2)
    assert "    add_kernel[(num_blocks,)](x, y, out, n_elements, BLOCK_SIZE, num_warps=8, " \
           "num_stages=2)\n" in out
    assert "BLOCK_SIZE = 64  # hand-picked" in out and "# Launch the kernel" in out
    assert out.replace(", num_warps=8, num_stages=2", "") == S.ADD_LOCAL


def test_replaces_in_place_in_multiline_call():
    out = T.apply(S.SCALE_KEYWORD, num_warps=8, num_stages=3)
    assert ("        BLOCK_SIZE=128,  # keep\n"
            "        num_warps=8,\n"
            "        num_stages=3,\n"
            "    )\n") in out


def test_autotuned_kernel_edits_every_config():
    a = analyze_source(S.AUTOTUNED)
    v = T.applies(a, num_stages=4)
    assert v.ok and v.targets == ("autotune configs of double_kernel",)
    out = T.apply(S.AUTOTUNED, a, num_stages=4)
    assert "triton.Config({'BLOCK': 32}, num_warps=4, num_stages=4),  # small" in out
    assert "triton.Config({'BLOCK': 64}, num_warps=4, num_stages=4)," in out
    assert "double_kernel[lambda META: (triton.cdiv(n, META['BLOCK']),)](x, out, n)" in out


@pytest.mark.parametrize("params, reason", [
    ({}, "give num_warps and/or num_stages"),
    ({"num_warps": 3}, "power of two"),
    ({"num_stages": 0}, "from 1 to 8"),
    ({"num_warps": 4, "site": 0}, "already has these values"),
    ({"num_warps": 4, "bogus": 1}, "unknown parameter"),
])
def test_refusals_say_why(params, reason):
    v = T.applies(analyze_source(S.SCALE_KEYWORD), **params)
    assert not v.ok and reason in v.reason
    with pytest.raises(TransformError, match=reason):
        T.apply(S.SCALE_KEYWORD, **params)


def test_refuses_what_heuristics_set():
    src = S.ADD_LOCAL.replace("@triton.jit\n",
                              "@triton.heuristics({'num_warps': lambda args: 2})\n@triton.jit\n")
    v = T.applies(analyze_source(src), num_warps=8)
    assert not v.ok and "@triton.heuristics sets num_warps" in v.reason
    assert T.applies(analyze_source(src), num_stages=2).ok


@pytest.mark.parametrize("configs", ["make_configs() or [", "make_configs() + ["])
def test_refuses_configs_it_cannot_edit(configs):
    src = S.AUTOTUNED.replace("configs=[", "configs=" + configs, 1)
    v = T.applies(analyze_source(src), num_warps=8)
    assert not v.ok and "not editable in place" in v.reason


def test_edits_the_config_of_a_comprehension():
    src = S.AUTOTUNED.replace("""configs=[
        triton.Config({'BLOCK': 32}, num_warps=4),  # small
        triton.Config({'BLOCK': 64}, num_warps=4, num_stages=2),
    ],""", """configs=[triton.Config({'BLOCK': b}, num_warps=w) for b in (32, 64) for w in (2, 4)],""")
    out = T.apply(src, num_warps=8)
    assert "[triton.Config({'BLOCK': b}, num_warps=8) for b in (32, 64) for w in (2, 4)]" in out


@pytest.mark.parametrize("sample", ["ADD_LOCAL", "SCALE_KEYWORD", "AUTOTUNED"])
def test_same_values_when_run(load, fake_bench, sample):
    S.assert_same_results(load, sample, T.apply(getattr(S, sample), num_warps=2, num_stages=1),
                          rtol=0, atol=0)
