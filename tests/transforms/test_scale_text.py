"""transforms._scale: an integer expression scaled by a power of two as a person writes it, and a
second scaling folded into the first."""

from tritonforge.transforms._scale import rescale, scale_text, split_scaled
from tritonforge.transforms.launch_fast import scale_launch_option


def test_scaling_up_is_capped_and_down_is_floored():
    assert scale_text("nw", 2, cap=32) == "min(32, nw * 2)"
    assert scale_text("nw", 4) == "nw * 4"
    assert scale_text("nw", -2) == "max(1, nw // 2)"
    assert scale_text("4 if big else 2", 2) == "(4 if big else 2) * 2"
    assert scale_text("cfg.warps", -4) == "max(1, cfg.warps // 4)"


def test_a_second_scaling_folds_and_cancels():
    once = rescale("nw", 2, 32)
    assert rescale(once, 2, 32) == "min(32, nw * 4)"
    assert rescale(once, -2, 32) == "nw"
    assert rescale(rescale("nw", -2), -2) == "max(1, nw // 4)"
    assert rescale(rescale("(a + b)", 2), -4) == "max(1, (a + b) // 2)"


def test_the_users_own_bounds_stay_whole():
    # a cap of the user's own is not this module's: scaling wraps it instead of dropping it
    assert split_scaled("min(8, nw * 2)", cap=32) == ("min(8, nw * 2)", 1)
    assert rescale("min(8, nw * 2)", 2, 32) == "min(32, min(8, nw * 2) * 2)"
    assert split_scaled("nw // 2") == ("nw // 2", 1)
    assert split_scaled("max(1, nw // 2)") == ("nw", -2)


def test_a_computed_launch_option_is_scaled_in_place_and_a_literal_is_left():
    src = ("def f(x):\n    nw = 4 if x.numel() > 4096 else 2\n"
           "    k[(1,)](x, BLOCK=64, num_warps=nw)\n    k[(2,)](x, BLOCK=64, num_warps=8)\n")
    out = scale_launch_option(src, "k", 0, "num_warps", 2, 32)
    assert out == src.replace("num_warps=nw)", "num_warps=min(32, nw * 2))")
    assert scale_launch_option(out, "k", 0, "num_warps", -2, 32) == src
    assert scale_launch_option(src, "k", 1, "num_warps", 2, 32) is None     # a literal
    assert scale_launch_option(src, "k", 2, "num_warps", 2, 32) is None     # no such launch
    assert scale_launch_option(src, "k", 0, "num_stages", 2) is None        # not written
