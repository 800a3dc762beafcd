"""autotune_pin: @triton.autotune replaced by one config passed at the kernel's launches."""

import pytest

import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.transforms import ConfigSpec, get

P = get("autotune_pin")
BLOCK64 = ConfigSpec((("BLOCK", 64),), num_warps=2, num_stages=2)


def test_the_decorator_leaves_and_every_launch_takes_the_config():
    out = P.apply(S.AUTOTUNED, kernel="double_kernel", config=BLOCK64)
    assert "@triton.autotune" not in out and "triton.Config" not in out
    assert "](x, out, n, BLOCK=64, num_warps=2, num_stages=2)" in out
    assert "@triton.jit\ndef double_kernel(" in out
    analysis = analyze_source(out)
    assert analysis.kernel("double_kernel").autotune is None
    site = analysis.launch_sites[0]
    assert site.num_warps is not None and site.arg_for("BLOCK") is not None


def test_examples_are_the_listed_configs():
    ex = P.examples(analyze_source(S.AUTOTUNED))
    assert ex == [{"kernel": "double_kernel", "config": ConfigSpec((("BLOCK", 32),), 4, 3)}]


def test_same_values_when_run(load, fake_bench):
    """The META grid reads BLOCK from the launch's keywords: the pinned kernel covers every
    element, exactly as the autotuned one does."""
    for config in (BLOCK64, ConfigSpec((("BLOCK", 32),), 4, 3)):
        S.assert_same_results(load, "AUTOTUNED",
                              P.apply(S.AUTOTUNED, kernel="double_kernel", config=config),
                              rtol=0, atol=0)


HOOKED = S.AUTOTUNED.replace("    key=['n'],\n", "    key=['n'],\n    pre_hook=lambda args: None,\n")
STAR = S.AUTOTUNED.replace("(x, out, n)", "(x, out, *rest)").replace("def double(x):",
                                                                       "def double(x, *rest):")


@pytest.mark.parametrize("source, params, reason", [
    (S.ADD_LOCAL, {"kernel": "add_kernel", "config": BLOCK64}, "not autotuned"),
    (S.AUTOTUNED, {"kernel": "nope", "config": BLOCK64}, "no kernel 'nope'"),
    (S.AUTOTUNED, {"kernel": "double_kernel"}, "give the config"),
    (S.AUTOTUNED, {"config": BLOCK64}, "give the kernel"),
    (S.AUTOTUNED, {"kernel": "double_kernel", "config": ConfigSpec((("BLOCK_N", 64),), 4, 3)},
     "the config sets ['BLOCK_N']"),
    (HOOKED, {"kernel": "double_kernel", "config": BLOCK64}, "pre_hook/post_hook"),
    (STAR, {"kernel": "double_kernel", "config": BLOCK64}, "*args/**kwargs"),
])
def test_refusals_say_why(source, params, reason):
    v = P.applies(analyze_source(source), **params)
    assert not v.ok and reason in v.reason, v.reason


def test_keep_decorator_lists_the_config_alone_and_leaves_the_launches():
    out = P.apply(S.AUTOTUNED, kernel="double_kernel", config=BLOCK64, keep_decorator=True)
    analysis = analyze_source(out)
    tuned = analysis.kernel("double_kernel").autotune
    assert tuned is not None and len(tuned.configs) == 1
    assert dict(tuned.configs[0].kwargs) == {"BLOCK": 64}
    assert "num_warps=2, num_stages=2" in out
    assert "](x, out, n)" in out                           # the launch passes nothing new
    assert "key=['n']" in out                              # the rest of the autotune stays


def test_keep_decorator_pins_where_a_launch_could_not_take_the_config():
    assert not P.applies(analyze_source(STAR), kernel="double_kernel", config=BLOCK64).ok
    v = P.applies(analyze_source(STAR), kernel="double_kernel", config=BLOCK64, keep_decorator=True)
    assert v.ok, v.reason


def test_keep_decorator_same_values_when_run(load, fake_bench):
    S.assert_same_results(load, "AUTOTUNED",
                          P.apply(S.AUTOTUNED, kernel="double_kernel", config=BLOCK64,
                                  keep_decorator=True), rtol=0, atol=0)
