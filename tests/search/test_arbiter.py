"""The arbiter accepts a speedup only beyond the noise, and never a per-case regression > 5%."""

import random

from tritonforge.model import Status, Timing, TimingMethod, VariantResult
from tritonforge.search.arbiter import judge


def _result(name, medians, noise=0.01, seed=0, n=60):
    rng = random.Random(seed)
    timings = tuple(Timing(cid, name, TimingMethod.CUDA_EVENTS,
                           tuple(m * (1 + rng.gauss(0, noise)) for _ in range(n)))
                    for cid, m in medians.items())
    return VariantResult(name, name, Status.OK, timings=timings)


CASES = ("a", "b")


def test_clear_speedup_is_accepted():
    d = judge(_result("inc", {"a": 1.0, "b": 2.0}), _result("cand", {"a": 0.5, "b": 1.0}, seed=1),
              CASES, interpreted=False)
    assert d.accepted and 1.9 < d.speedup < 2.1 and d.speedup_low > 1.8


def test_same_speed_is_rejected_as_noise():
    d = judge(_result("inc", {"a": 1.0, "b": 2.0}, noise=0.05),
              _result("cand", {"a": 0.99, "b": 1.98}, noise=0.05, seed=2), CASES, interpreted=False)
    assert not d.accepted and "noise" in d.reason


def test_one_case_much_slower_is_rejected_even_if_the_sum_is_faster():
    d = judge(_result("inc", {"a": 1.0, "b": 10.0}), _result("cand", {"a": 1.2, "b": 5.0}, seed=3),
              CASES, interpreted=False)
    assert not d.accepted and "case a" in d.reason and d.speedup > 1.5


def test_incorrect_candidate_is_rejected_whatever_its_speed():
    bad = VariantResult("cand", "cand", Status.MISMATCH)
    d = judge(_result("inc", {"a": 1.0}), bad, ("a",), interpreted=False)
    assert not d.accepted and d.reason.startswith("not correct")


def test_interpreter_accepts_by_correctness_only_and_says_so():
    d = judge(_result("inc", {"a": 1.0}), _result("cand", {"a": 5.0}), ("a",), interpreted=True)
    assert d.accepted and "correctness only" in d.reason


def _bimodal(name, fast, slow, share_slow, n, seed):
    rng = random.Random(seed)
    return tuple(slow if rng.random() < share_slow else fast * (1 + rng.gauss(0, 0.01)) for _ in range(n))


def test_a_noisy_tiny_case_does_not_veto_a_real_speedup_but_a_clear_regression_does():
    """bmm_chunk_bwd (H100): a 10 us case whose samples spread bimodally from 5 to 66 us read 78%
    slower on its medians and vetoed a candidate 1.3x faster on every large case."""
    inc = VariantResult("inc", "inc", Status.OK, timings=(
        Timing("tiny", "inc", TimingMethod.CUDA_EVENTS, _bimodal("inc", 0.005, 0.066, 0.5, 400, 1)),
        Timing("big", "inc", TimingMethod.CUDA_EVENTS, tuple(0.86 * (1 + random.Random(2).gauss(0, 0.002))
                                                             for _ in range(100)))))
    cand = VariantResult("cand", "cand", Status.OK, timings=(
        Timing("tiny", "cand", TimingMethod.CUDA_EVENTS, _bimodal("cand", 0.005, 0.066, 0.52, 400, 3)),
        Timing("big", "cand", TimingMethod.CUDA_EVENTS, tuple(0.65 * (1 + random.Random(4).gauss(0, 0.002))
                                                              for _ in range(100)))))
    d = judge(inc, cand, ("tiny", "big"), interpreted=False)
    assert d.accepted and d.speedup > 1.2, d.reason
    # a steady tiny case 30% slower: a real regression still vetoes, however small the case
    steady = _result("inc", {"tiny": 0.005}, noise=0.02, n=400)
    inc = VariantResult("inc", "inc", Status.OK, timings=(steady.timings[0], inc.timings[1]))
    slower = VariantResult("cand", "cand", Status.OK, timings=(
        _result("cand", {"tiny": 0.0065}, noise=0.02, seed=5, n=400).timings[0], cand.timings[1]))
    d = judge(inc, slower, ("tiny", "big"), interpreted=False)
    assert not d.accepted and "case tiny" in d.reason and "lower bound" in d.reason


def test_a_sweep_that_broke_off_is_not_judged_on_the_cases_it_reached():
    """A run that lost its CUDA context mid-sweep timed some cases only: 2x on those is not a
    speedup of the file."""
    inc = _result("inc", {"a": 1.0, "b": 2.0, "c": 4.0})
    cand = _result("cand", {"a": 0.5, "b": 1.0}, seed=1)                  # c never timed
    d = judge(inc, cand, ("a", "b", "c"), interpreted=False)
    assert not d.accepted and "no timings for c" in d.reason
    partial_inc = _result("inc", {"a": 1.0, "b": 2.0})                     # nor the incumbent
    d = judge(partial_inc, _result("cand", {"a": 0.5, "b": 1.0, "c": 2.0}, seed=1),
              ("a", "b", "c"), interpreted=False)
    assert not d.accepted and "2 of 3 cases" in d.reason
