"""transforms.launch_fast: launch options written by text positions give what launch_params
gives (the same knobs after analysis), for a literal, a computed value and a missing keyword."""

import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.transforms import get
from tritonforge.transforms.launch_fast import write_launch_options


def _knobs(source):
    k = analyze_source(source).knobs[0]
    return k.num_warps, k.num_stages


def test_missing_options_are_added_like_launch_params_adds_them():
    fast = write_launch_options(S.ADD_LOCAL, "add_kernel", 0, {"num_warps": 8, "num_stages": 2})
    slow = get("launch_params").apply(S.ADD_LOCAL, analyze_source(S.ADD_LOCAL), num_warps=8,
                                      num_stages=2, site=0)
    assert _knobs(fast) == _knobs(slow) == (8, 2)
    compile(fast, "<fast>", "exec")


def test_existing_and_computed_values_are_replaced():
    src = S.ADD_LOCAL.replace("n_elements, BLOCK_SIZE)", "n_elements, BLOCK_SIZE, num_warps=nw,)")
    src = src.replace("def add(x, y):", "def add(x, y, nw=4):")
    assert src.count("nw") == 2 and _knobs(src)[0] is None
    out = write_launch_options(src, "add_kernel", 0, {"num_warps": 2})
    assert "BLOCK_SIZE, num_warps=2,)" in out
    assert _knobs(out)[0] == 2
    again = write_launch_options(out, "add_kernel", 0, {"num_warps": 16, "num_stages": 1})
    assert "num_warps=16, num_stages=1,)" in again and _knobs(again) == (16, 1)


def test_a_launch_not_found_is_left_to_the_transform():
    assert write_launch_options(S.ADD_LOCAL, "add_kernel", 3, {"num_warps": 2}) is None
    assert write_launch_options(S.ADD_LOCAL, "no_such_kernel", 0, {"num_warps": 2}) is None


def test_a_star_args_launch_gets_the_options_and_a_kwargs_splat_only_replacements():
    star = S.ADD_LOCAL.replace("n_elements, BLOCK_SIZE)", "*(n_elements,), BLOCK_SIZE=BLOCK_SIZE)")
    assert "*(n_elements,)" in star
    out = write_launch_options(star, "add_kernel", 0, {"num_warps": 8})
    assert out is not None and "*(n_elements,), BLOCK_SIZE=BLOCK_SIZE, num_warps=8)" in out
    splat = S.ADD_LOCAL.replace("n_elements, BLOCK_SIZE)", "n_elements, **kw)")
    assert write_launch_options(splat, "add_kernel", 0, {"num_warps": 8}) is None
    given = splat.replace("**kw)", "num_warps=w, **kw)")
    out = write_launch_options(given, "add_kernel", 0, {"num_warps": 8})
    assert out is not None and "num_warps=8, **kw)" in out
    assert write_launch_options(given, "add_kernel", 0, {"num_warps": 8, "num_stages": 2}) is None
