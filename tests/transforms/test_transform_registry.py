"""The transforms facade: registry, lookup, parameter checks, analysis/source agreement."""

import pytest

import tf_samples as S
import tritonforge.analyze as analyze
import tritonforge.transforms as transforms
from tritonforge.analyze import analyze_source
from tritonforge.errors import TransformError, TritonForgeError
from tritonforge.transforms import REGISTRY, Applicability, Transform, get

NAMES = {"launch_params", "constexpr_override", "param_block_override", "autotune",
         "autotune_widen", "autotune_blocks", "autotune_pin", "loop_pipelining", "offset_hints", "cache_hints", "pid_swizzle",
         "persistent_grid", "rows_per_program", "streaming_reduction", "drop_zero_fill", "hoist_namedtuple",
         "hoist_invariant_loads", "static_unroll", "heuristic_scale"}


def test_public_names():
    assert set(REGISTRY) == NAMES
    assert {"REGISTRY", "get", "Transform", "Applicability", "ConfigSpec",
            "TransformError"} <= set(transforms.__all__)
    assert {"analyze_source", "SourceAnalysis", "KernelInfo", "LaunchSite", "LaunchKnobs",
            "ConstexprKnob"} <= set(analyze.__all__)
    assert issubclass(TransformError, TritonForgeError)


def test_every_transform_is_described():
    for name, t in REGISTRY.items():
        assert isinstance(t, Transform) and t.name == name
        assert t.summary and isinstance(t.preserves_semantics, bool)
        assert set(t.example_params) <= set(t.param_names)
        assert get(name) is t


def test_unknown_transform_lists_the_known_ones():
    with pytest.raises(TransformError) as exc:
        get("unroll_everything")
    assert "unknown transform 'unroll_everything'" in str(exc.value)
    assert "launch_params" in str(exc.value)


def test_unknown_parameter_is_a_refusal():
    v = get("offset_hints").applies(analyze_source(S.ADD_LOCAL), kernal="add_kernel")
    assert not v.ok and "unknown parameter" in v.reason and "kernal" in v.reason


def test_analysis_of_another_source_is_rejected():
    other = analyze_source(S.SCALE_KEYWORD)
    with pytest.raises(TransformError, match="analysis is of another source"):
        get("offset_hints").apply(S.ADD_LOCAL, other)


def test_applicability_is_truthy_only_when_ok():
    assert Applicability.yes(["x"]) and not Applicability.no("why")
    assert Applicability.no("why").reason == "why"


@pytest.mark.parametrize("name", sorted(NAMES))
def test_every_transform_applies_to_some_sample_and_keeps_the_rest(name):
    t = REGISTRY[name]
    hits = 0
    for sample in S.ENTRIES:
        src = getattr(S, sample)
        a = analyze_source(src)
        for params in t.examples(a):
            if t.applies(a, **params).ok:
                out = t.apply(src, a, **params)
                assert out != src
                after = analyze_source(out)
                assert [k.name for k in after.kernels] == [k.name for k in a.kernels]
                hits += 1
                break
    assert hits >= 1
