"""The benchmark's bookkeeping: the subset rule, the headline figures, why a kernel fell short."""

import math

from tritonforge.bench.optimize import choose_subset, headline, held_back
from tritonforge.model import Candidate, Decision, HistoryEntry, Status
from tritonforge.search.loop import OptimizeResult

ORIG = Candidate("x = 1\n", "original")


def _result(name, speedup=None, history=(), stop="no gain for 2 rounds", notes=()):
    final = None
    if speedup is not None:
        final = Decision("h", True, speedup, speedup * 0.98, speedup, 1.0, "faster")
    return OptimizeResult(name, ORIG, ORIG, final, 2, stop, 100.0, len(history), tuple(history),
                          notes=tuple(notes))


def test_subset_covers_every_category_round_robin_in_name_order():
    runnable = [("b1", "B"), ("a2", "A"), ("a1", "A"), ("c1", "C"), ("a3", "A")]
    assert choose_subset(runnable, 4) == ["a1", "b1", "c1", "a2"]
    assert choose_subset(runnable, 10) == ["a1", "b1", "c1", "a2", "a3"]


def test_headline_counts_failures_as_one():
    results = [_result("a", 2.0), _result("b", 1.02), _result("c")]
    h = headline(results)
    assert h["successes"] == 1 and math.isclose(h["success_rate"], 1 / 3)
    assert math.isclose(h["mean_speedup_over_successes"], 2.0)
    assert math.isclose(h["geomean_all_failures_as_1"], (2.0 * 1.02) ** (1 / 3))
    assert h["best"] == 2.0


def test_held_back_names_the_reason():
    wrong = HistoryEntry("h", "rules", "d", Status.MISMATCH)
    noisy = HistoryEntry("h", "rules", "d", Status.OK, 1.01, "1.010x, but the 95% lower bound 0.99x is within noise")
    assert held_back(_result("a", 2.0)) == ""
    assert held_back(_result("a")) == "no transform applied"
    assert held_back(_result("a", history=[wrong])).startswith("verifier rejection")
    assert held_back(_result("a", history=[noisy])).startswith("noise")
    assert held_back(_result("a", history=[noisy], notes=["near the roofline: ..."])) == "near the roofline"
    assert held_back(_result("a", stop="the original fails: x")) == "the original does not run"
