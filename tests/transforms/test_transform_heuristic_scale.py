"""heuristic_scale: a tile size or num_warps that @triton.heuristics computes, scaled in the
decorator's dict (the launch cannot change it), computing the same on the interpreter."""

import ast

import pytest
from tritonforge.analyze import analyze_source
from tritonforge.errors import TransformError
from tritonforge.transforms import get
from tritonforge.transforms.heuristic_scale import scalable_keys, scaled_text
from tf_samples import HEURISTIC

T = get("heuristic_scale")


def test_the_scalable_keys_are_tiles_and_num_warps_not_flags():
    a = analyze_source(HEURISTIC)
    assert scalable_keys(a, "scale_shift") == ("BLOCK", "num_warps")   # EVEN is a flag
    assert T.applies(a, kernel="scale_shift", scales=(("BLOCK", 2),)).ok
    assert not T.applies(a, kernel="scale_shift", scales=(("EVEN", 2),)).ok
    assert not T.applies(a, kernel="scale_shift", scales=(("BLOCK", 1),)).ok
    assert not T.applies(a, kernel="scale_shift", scales=(("BLOCK", 2), ("BLOCK", -2))).ok
    assert not T.applies(a, kernel="nope", scales=(("BLOCK", 2),)).ok
    plain = HEURISTIC.replace('"BLOCK": pick_block, "num_warps": pick_warps,\n                    ', "")
    assert "pick_block, " not in plain
    assert scalable_keys(analyze_source(plain), "scale_shift") == ()
    with pytest.raises(TransformError):
        T.apply(plain, kernel="scale_shift", scales=(("BLOCK", 2),))


def test_the_users_rule_is_kept_and_scaled():
    out = T.apply(HEURISTIC, kernel="scale_shift", scales=(("BLOCK", 4), ("num_warps", -2)))
    assert '"BLOCK": lambda args, _tf_heur=pick_block: _tf_heur(args) * 4' in out
    assert '"num_warps": lambda args, _tf_heur=pick_warps: max(1, _tf_heur(args) // 2)' in out
    assert "def pick_block(args):" in out and '"EVEN": lambda args:' in out
    ast.parse(out)


@pytest.mark.parametrize("scales", [(("BLOCK", 2),), (("BLOCK", -2),), (("BLOCK", 4), ("num_warps", 2)),
                                    (("num_warps", -2),)])
def test_the_scaled_kernel_computes_the_same(load, scales):
    import torch

    out = T.apply(HEURISTIC, kernel="scale_shift", scales=scales)
    g = torch.Generator().manual_seed(0)
    for n in (1000, 4096, 5000):      # the masked path, the even one, and the larger block
        x = torch.randn(n, generator=g)
        torch.testing.assert_close(load(out).affine(x.clone()), load(HEURISTIC).affine(x.clone()))


def test_a_second_scaling_folds_into_the_first():
    twice = T.apply(T.apply(HEURISTIC, kernel="scale_shift", scales=(("BLOCK", 2),)),
                    kernel="scale_shift", scales=(("BLOCK", 2),))
    assert '"BLOCK": lambda args, _tf_heur=pick_block: _tf_heur(args) * 4' in twice
    assert twice.count("_tf_heur=") == 1
    back = T.apply(T.apply(HEURISTIC, kernel="scale_shift", scales=(("num_warps", 2),)),
                   kernel="scale_shift", scales=(("num_warps", -2),))
    assert back == HEURISTIC


def test_a_lambda_or_multiline_value_is_parenthesized():
    assert scaled_text("BLOCK", "lambda args: 64", 2) == \
        "lambda args, _tf_heur=(lambda args: 64): _tf_heur(args) * 2"
    assert scaled_text("num_warps", "heur.pick", 4) == \
        "lambda args, _tf_heur=heur.pick: min(32, _tf_heur(args) * 4)"
    multi = HEURISTIC.replace('"BLOCK": pick_block,', '"BLOCK": (lambda args:\n        64),')
    out = T.apply(multi, kernel="scale_shift", scales=(("BLOCK", 2),))
    ast.parse(out)
    # the user's own parentheses stay around the new value, the lambda gets its own
    assert '"BLOCK": (lambda args, _tf_heur=(lambda args:\n        64): _tf_heur(args) * 2)' in out
