"""param_block_override: pin a tile size the launching function takes as a parameter."""

import ast
import dataclasses

import pytest
import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.errors import TransformError
from tritonforge.transforms import get
from tritonforge.transforms.param_block import MARKER, function_facts

T = get("param_block_override")

PIN_64 = ("    BLOCK_SIZE = 64  # tritonforge: tile size fixed here (the caller's BLOCK_SIZE is a "
          "performance hint)\n")


def pins(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if MARKER in line]


def test_the_parameter_is_pinned_first_in_the_function():
    a = analyze_source(S.ADD_PARAM)
    v = T.applies(a, name="BLOCK_SIZE", value=64)
    assert v.ok and v.targets == ("BLOCK_SIZE in add (launch 0)",)
    out = T.apply(S.ADD_PARAM, a, name="BLOCK_SIZE", value=64)
    # the pin goes above the body's first comment, which stays with its statement
    assert out == S.ADD_PARAM.replace("def add(x, y, BLOCK_SIZE=4):\n",
                                      "def add(x, y, BLOCK_SIZE=4):\n" + PIN_64)
    ast.parse(out)
    assert "# the caller picks the tile size" in out and "  # launch" in out


def test_the_rewrite_computes_the_same_whatever_the_caller_passes(load):
    out = T.apply(S.ADD_PARAM, name="BLOCK_SIZE", value=64)
    S.assert_same_results(load, "ADD_PARAM", out)        # n = 1000: not a multiple of 64
    import torch

    x, y = torch.randn(1000), torch.randn(1000)
    add = load(out).add
    torch.testing.assert_close(add(x, y, BLOCK_SIZE=16), x + y)   # the caller's 16 is a hint


def test_keyword_only_parameter_and_a_renamed_argument():
    src = S.ADD_PARAM.replace("def add(x, y, BLOCK_SIZE=4):", "def add(x, y, *, block=4):") \
        .replace("cdiv(n, BLOCK_SIZE)", "cdiv(n, block)").replace("BLOCK_SIZE=BLOCK_SIZE",
                                                                   "BLOCK_SIZE=block")
    v = T.applies(analyze_source(src), name="BLOCK_SIZE", value=256)
    assert v.ok and v.targets == ("block in add (launch 0)",)
    assert pins(T.apply(src, name="BLOCK_SIZE", value=256)) == [
        "block = 256  # tritonforge: tile size fixed here (the caller's block is a performance "
        "hint)"]


def test_after_the_docstring():
    src = S.ADD_PARAM.replace("    # the caller picks the tile size\n",
                              '    """x + y, in tiles of BLOCK_SIZE."""\n\n')
    out = T.apply(src, name="BLOCK_SIZE", value=64)
    assert '    """x + y, in tiles of BLOCK_SIZE."""\n' + PIN_64 + "\n    out = " in out


METHOD = S.ADD_PARAM.split("def add(")[0] + '''class Adder:
    """Adds in tiles."""

    def __call__(self, x, y, BLOCK_SIZE=4):
        out = torch.empty_like(x)  # result
        n = x.numel()
        add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, n, BLOCK_SIZE)
        return out


def add(x, y):
    return Adder()(x, y)
'''


def test_a_method_of_a_class(load):
    a = analyze_source(METHOD)
    assert a.launch_sites[0].function == "Adder.__call__"
    v = T.applies(a, name="BLOCK_SIZE", value=64)
    assert v.ok and v.targets == ("BLOCK_SIZE in Adder.__call__ (launch 0)",)
    out = T.apply(METHOD, a, name="BLOCK_SIZE", value=64)
    assert out == METHOD.replace("BLOCK_SIZE=4):\n", "BLOCK_SIZE=4):\n    " + PIN_64)
    S.assert_same_results(load, "ADD_PARAM", out)


def test_applying_again_rewrites_the_pin():
    once = T.apply(S.ADD_PARAM, name="BLOCK_SIZE", value=64)
    a = analyze_source(once)
    again = T.applies(a, name="BLOCK_SIZE", value=64)
    assert not again.ok and "already pinned to 64" in again.reason
    v = T.applies(a, name="BLOCK_SIZE", value=128)
    assert v.ok and v.targets == ("BLOCK_SIZE in add (launch 0, pinned to 64 before)",)
    twice = T.apply(once, a, name="BLOCK_SIZE", value=128)
    assert twice == once.replace("BLOCK_SIZE = 64  #", "BLOCK_SIZE = 128  #")
    assert len(pins(twice)) == 1


def test_a_hand_written_first_rebinding_counts_as_the_pin():
    src = S.ADD_PARAM.replace("    # the caller picks the tile size\n",
                              "    BLOCK_SIZE = 32  # what the caller gets\n")
    out = T.apply(src, name="BLOCK_SIZE", value=512)
    assert "    BLOCK_SIZE = 512  # what the caller gets\n" in out and not pins(out)


TWO_PARAMS = S.MATMUL.replace("def matmul(a, b):", "def matmul(a, b, BLOCK_M=16, BLOCK_N=16):") \
    .replace("    BLOCK_M, BLOCK_N = 16, 16\n", "")


def test_two_pins_keep_their_order(load):
    first = T.apply(TWO_PARAMS, name="BLOCK_N", value=32)
    both = T.apply(first, name="BLOCK_M", value=64)
    assert [p.split("  #")[0] for p in pins(both)] == ["BLOCK_N = 32", "BLOCK_M = 64"]
    assert T.apply(both, name="BLOCK_N", value=16).count(MARKER) == 2
    S.assert_same_results(load, "MATMUL", both, rtol=1e-4, atol=1e-4)


def test_one_pin_serves_every_launch_of_the_function():
    src = S.ADD_PARAM.replace(
        "    return out\n",
        "    add_kernel[grid](out, y, out, n, BLOCK_SIZE)\n    return out\n")
    a = analyze_source(src)
    v = T.applies(a, name="BLOCK_SIZE", value=64, site=1)
    assert v.ok and v.targets == ("BLOCK_SIZE in add (launches 0, 1)",)
    assert len(pins(T.apply(src, a, name="BLOCK_SIZE", value=64))) == 1


def test_a_computed_local_is_refused():
    src = S.ADD_PARAM.replace("def add(x, y, BLOCK_SIZE=4):", "def add(x, y):").replace(
        "    grid = ", "    BLOCK_SIZE = triton.next_power_of_2(n)\n    grid = ")
    v = T.applies(analyze_source(src), name="BLOCK_SIZE", value=64)
    assert not v.ok
    assert "BLOCK_SIZE is computed in add (`BLOCK_SIZE = triton.next_power_of_2(n)`)" \
        in v.reason and "not taken from a parameter" in v.reason


NON_BLOCK = S.ADD_PARAM.replace("BLOCK_SIZE: tl.constexpr):", "BLOCK_SIZE: tl.constexpr, "
                                "SCALE: tl.constexpr):").replace(
    "x + y, mask", "(x + y) * SCALE, mask").replace(
    "def add(x, y, BLOCK_SIZE=4):", "def add(x, y, BLOCK_SIZE=4, scale=2):").replace(
    "BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE, SCALE=scale)")


REFUSALS = [
    (S.ADD_LOCAL, {"name": "BLOCK_SIZE", "value": 128},
     "BLOCK_SIZE is the literal `BLOCK_SIZE` here, not a parameter: constexpr_override"),
    (S.SCALE_KEYWORD, {"name": "BLOCK_SIZE", "value": 256}, "constexpr_override changes it"),
    (NON_BLOCK, {"name": "SCALE", "value": 4}, "SCALE is not a tile size"),
    (S.ADD_PARAM, {"name": "BLOCK_SIZE", "value": 96}, "used in tl.arange, which needs a power"),
    (S.ADD_PARAM, {"name": "BLOCK_SIZE", "value": 0}, "must be a positive integer"),
    (S.ADD_PARAM.replace("BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE * 2)"),
     {"name": "BLOCK_SIZE", "value": 64}, "computed at the launch (`BLOCK_SIZE * 2`)"),
    (S.ADD_PARAM.replace("    grid = ", "    BLOCK_SIZE = max(BLOCK_SIZE, 16)\n    grid = "),
     {"name": "BLOCK_SIZE", "value": 64}, "add assigns its parameter BLOCK_SIZE again (line 20)"),
    (S.ADD_PARAM.replace("def add(x, y, BLOCK_SIZE=4):", "def add(x, y, programs, BLOCK_SIZE=4):")
     .replace("grid = (triton.cdiv(n, BLOCK_SIZE),)", "grid = (programs,)"),
     {"name": "BLOCK_SIZE", "value": 64}, "does not read BLOCK_SIZE: pinning it would skip"),
    (S.ROW_SQNORM, {"name": "BLOCK_N", "value": 64}, "not passed from a parameter"),
    (S.AUTOTUNED, {"name": "BLOCK", "value": 64}, "chosen by @triton.autotune"),
    (S.ADD_PARAM, {"name": "NOPE", "value": 64}, "no launch of a kernel with constexpr 'NOPE'"),
    (S.ADD_PARAM, {"name": "NOPE", "value": 64, "site": 0}, "has no constexpr 'NOPE'"),
    (S.ADD_PARAM, {"value": 64}, "give the constexpr name"),
]


@pytest.mark.parametrize("src, params, reason", REFUSALS, ids=[r[2][:30] for r in REFUSALS])
def test_refusals_say_why(src, params, reason):
    v = T.applies(analyze_source(src), **params)
    assert not v.ok and reason in v.reason, v.reason
    with pytest.raises(TransformError):
        T.apply(src, **params)


def test_a_shared_parameter_must_suit_every_launch_it_reaches():
    src = NON_BLOCK.replace("SCALE=scale)", "SCALE=BLOCK_SIZE)")
    v = T.applies(analyze_source(src), name="BLOCK_SIZE", value=64)
    assert not v.ok and "also takes BLOCK_SIZE as SCALE, which is not a tile size" in v.reason


@pytest.mark.parametrize("statement", [
    "BLOCK_SIZE = 8", "BLOCK_SIZE += 8", "BLOCK_SIZE: int = 8", "for BLOCK_SIZE in (8,): pass",
    "with open('f') as BLOCK_SIZE: pass", "(BLOCK_SIZE := 8)", "del BLOCK_SIZE",
    "import BLOCK_SIZE", "def BLOCK_SIZE(): pass", "z, *BLOCK_SIZE = 1, 2",
    "def inner():\n        nonlocal BLOCK_SIZE\n        BLOCK_SIZE = 8",
])
def test_every_rebinding_of_the_parameter_is_seen(statement):
    src = S.ADD_PARAM.replace("    return out\n", f"    {statement}\n    return out\n")
    facts = function_facts(src, "add")
    assert facts.rebinding("BLOCK_SIZE") is not None and facts.rebinding("x") is None


def test_without_the_source_text_the_function_is_read_when_applied():
    a = dataclasses.replace(analyze_source(S.ADD_PARAM), source="")
    v = T.applies(a, name="BLOCK_SIZE", value=64)
    assert v.ok and "checked when applied" in v.reason
    assert PIN_64 in T.apply(S.ADD_PARAM, a, name="BLOCK_SIZE", value=64)


def test_examples_are_derived_from_the_launches():
    assert T.examples(analyze_source(S.ADD_PARAM))[0] == {"name": "BLOCK_SIZE", "value": 1024,
                                                          "site": 0}
    assert {e["value"] for e in T.examples(analyze_source(TWO_PARAMS))} == {64, 128}
    assert T.examples(analyze_source(S.ADD_LOCAL)) == []
