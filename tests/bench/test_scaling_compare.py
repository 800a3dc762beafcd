"""scripts/scaling_compare.py: one GPU against two, from two runs' records and states."""


def test_the_wall_ratio_and_the_verdicts_side_by_side(script):
    one = {"a": {"speedup": 2.0, "status": "success"}, "b": {"speedup": 1.0, "status": "not-improved"},
           "c": {"speedup": 1.2, "status": "success"}}
    two = {"a": {"speedup": 1.98, "status": "success"}, "b": {"speedup": 1.0, "status": "not-improved"},
           "c": {"speedup": 1.0, "status": "not-improved"}}
    md = script("scaling_compare").compare({"wall_s": 900.0}, one, {"wall_s": 480.0}, two)
    assert "| a | 2.000x | 1.980x | success | success |" in md
    assert "ratio 1.88x" in md and "same verdict (success or not) on 2 of 3" in md


def test_runs_that_stopped_at_their_budgets_get_no_wall_ratio(script):
    """Two runs that wrote different records did different work: their walls are not compared
    (on two H200s, 6 records in 299 s on one GPU against 8 in 184 s on two)."""
    one = {n: {"speedup": 1.0, "status": "not-improved"} for n in "abcdef"}
    two = {n: {"speedup": 1.0, "status": "not-improved"} for n in "abcdefgh"}
    md = script("scaling_compare").compare({"wall_s": 299.0, "finished": False}, one,
                                           {"wall_s": 184.0, "finished": False}, two)
    assert "no wall ratio" in md and "ratio 1.62x" not in md
    assert "2 GPUs over 1: 2.17x" in md
