"""constexpr_override: change a literal block size; the grid must follow it."""

import pytest
import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.errors import TransformError
from tritonforge.transforms import get

T = get("constexpr_override")


def test_local_assignment_is_changed_where_it_is_written():
    a = analyze_source(S.ADD_LOCAL)
    v = T.applies(a, name="BLOCK_SIZE", value=256)
    assert v.ok and v.targets == ("BLOCK_SIZE = ... in add",)
    out = T.apply(S.ADD_LOCAL, a, name="BLOCK_SIZE", value=256)
    assert out == S.ADD_LOCAL.replace("BLOCK_SIZE = 64  # hand-picked",
                                      "BLOCK_SIZE = 256  # hand-picked")


def test_keyword_literal_with_meta_grid():
    out = T.apply(S.SCALE_KEYWORD, name="BLOCK_SIZE", value=512)
    assert out == S.SCALE_KEYWORD.replace("BLOCK_SIZE=128,  # keep", "BLOCK_SIZE=512,  # keep")


def test_literal_grid_is_rewritten_with_the_positional_literal():
    a = analyze_source(S.LITERAL_GRID)
    v = T.applies(a, name="BLOCK", value=64)
    assert v.ok and "grid literal" in v.targets[0]
    out = T.apply(S.LITERAL_GRID, a, name="BLOCK", value=64)
    assert "neg_kernel[(triton.cdiv(n, 64),)](x, out, n, 64)" in out


@pytest.mark.parametrize("src, params, reason", [
    (S.NO_GRID_FOLLOW, {"name": "BLOCK", "value": 128}, "not written in terms of it"),
    (S.ADD_LOCAL, {"name": "BLOCK_SIZE", "value": 96}, "power of two"),
    (S.ADD_LOCAL, {"name": "BLOCK_SIZE", "value": 64}, "already 64"),
    (S.ADD_LOCAL, {"name": "NOPE", "value": 64}, "no launch of a kernel with constexpr 'NOPE'"),
    (S.ADD_LOCAL, {"name": "NOPE", "value": 64, "site": 0}, "has no constexpr 'NOPE'"),
    (S.AUTOTUNED, {"name": "BLOCK", "value": 64}, "chosen by @triton.autotune"),
    (S.ADD_LOCAL, {}, "give the constexpr name"),
])
def test_refusals_say_why(src, params, reason):
    v = T.applies(analyze_source(src), **params)
    assert not v.ok and reason in v.reason, v.reason
    with pytest.raises(TransformError):
        T.apply(src, **params)


def test_computed_value_is_refused():
    src = S.ADD_LOCAL.replace("BLOCK_SIZE = 64  # hand-picked",
                              "BLOCK_SIZE = triton.next_power_of_2(64)")
    v = T.applies(analyze_source(src), name="BLOCK_SIZE", value=128)
    assert not v.ok and "computed at the launch" in v.reason


def test_problem_constants_are_refused_unless_forced():
    src = S.ROW_SUM.replace("BLOCK_N: tl.constexpr", "BLOCK_N: tl.constexpr, SCALE: tl.constexpr")
    src = src.replace("BLOCK_N=16,", "BLOCK_N=16, SCALE=2,")
    a = analyze_source(src)
    v = T.applies(a, name="SCALE", value=3)
    assert not v.ok and "not a tile size" in v.reason
    assert T.applies(a, name="SCALE", value=3, force=True).ok


@pytest.mark.parametrize("sample, name, value", [
    ("ADD_LOCAL", "BLOCK_SIZE", 16),
    ("SCALE_KEYWORD", "BLOCK_SIZE", 32),
    ("LITERAL_GRID", "BLOCK", 64),
    ("ROW_SUM", "BLOCK_N", 64),
])
def test_same_values_when_run(load, sample, name, value):
    S.assert_same_results(load, sample, T.apply(getattr(S, sample), name=name, value=value))
