"""scripts/scaling_compare.py: one GPU against two, from two runs' records and states."""


def test_the_wall_ratio_and_the_verdicts_side_by_side(script):
    one = {"a": {"speedup": 2.0, "status": "success"}, "b": {"speedup": 1.0, "status": "not-improved"},
           "c": {"speedup": 1.2, "status": "success"}}
    two = {"a": {"speedup": 1.98, "status": "success"}, "b": {"speedup": 1.0, "status": "not-improved"},
           "c": {"speedup": 1.0, "status": "not-improved"}}
    md = script("scaling_compare").compare({"wall_s": 900.0}, one, {"wall_s": 480.0}, two)
    assert "| a | 2.000x | 1.980x | success | success |" in md
    assert "ratio 1.88x" in md and "same verdict (success or not) on 2 of 3" in md
