"""The final check (``FinalCheck._output``): which final checks run, and when a size
dispatch or an autotune replaces a config the final check vetoed for one size."""

from types import SimpleNamespace

from tritonforge.model import Candidate, Decision
from tritonforge.search.arbiter import ArbiterPolicy
from tritonforge.search.final_check import FinalCheck

ORIGINAL = Candidate("x = 0\n", "original")
A = Candidate("x = 1\n", "rules:t", description="A")
B = Candidate("x = 2\n", "rules:t", description="B")
S = Candidate("x = 3\n", "rules:t", description="S")
JOINED = Candidate("x = 9\n", "emit:size_dispatch", description="joined")


def _decision(c, accepted, speedup, worst=1.0):
    return Decision(c.hash, accepted, speedup, speedup * 0.99, speedup, worst,
                    "ok" if accepted else f"case p0 is {100 * (worst - 1):.0f}% slower")


def _optimizer(finals, dispatch=None, emit="auto"):
    """``finals``: candidate -> its final check; ``dispatch``: the joined file's final check."""
    opt = FinalCheck.__new__(FinalCheck)
    opt.settings = SimpleNamespace(emit=emit, min_speedup=1.05)
    opt.policy = ArbiterPolicy()
    opt.interpreted = False
    calls = []
    joined = JOINED

    def final(task, original, cand):
        calls.append(("final", cand.description))
        return finals[cand.hash]

    def emit_dispatch(task, original, cand, vetoed_by, notes):
        calls.append(("dispatch", cand.description))
        return (dispatch, joined) if dispatch is not None else (None, original)

    def emit_autotune(task, original, ranked, final, best, notes, with_original=False):
        calls.append(("autotune", tuple(c.description for _, _, c in ranked)))
        return final, best

    def emit_size_split(task, original, split, chain, notes):
        calls.append(("split-autotune", None))
        return None, original

    opt._final, opt._emit_dispatch = final, emit_dispatch
    opt._emit_autotune, opt._emit_size_split = emit_autotune, emit_size_split
    return opt, calls, joined


def test_a_vetoed_best_is_joined_with_the_original_by_a_size_test():
    opt, calls, joined = _optimizer({B.hash: _decision(B, False, 3.0, worst=1.14)},
                                    dispatch=_decision(JOINED, True, 2.9))
    final, out = opt._output(None, ORIGINAL, [B], [], [], 3.0, [])
    assert out is joined and final.speedup == 2.9
    assert calls == [("final", "B"), ("dispatch", "B")]         # no autotune needed


def test_the_autotune_is_the_fallback_when_the_size_test_does_not_hold():
    opt, calls, _ = _optimizer({B.hash: _decision(B, False, 3.0, worst=1.14)},
                               dispatch=_decision(B, False, 2.9, worst=1.08))
    final, out = opt._output(None, ORIGINAL, [B], [], [], 3.0, [])
    assert calls == [("final", "B"), ("dispatch", "B"), ("autotune", ("B",))]


def test_a_vetoed_later_config_may_still_beat_the_earlier_one_that_passed():
    finals = {B.hash: _decision(B, False, 6.7, worst=1.14), A.hash: _decision(A, True, 1.3)}
    opt, calls, joined = _optimizer(finals, dispatch=_decision(JOINED, True, 6.5))
    final, out = opt._output(None, ORIGINAL, [A, B], [], [], 6.7, [])
    assert calls == [("final", "B"), ("final", "A"), ("dispatch", "B")]
    assert out is joined and final.speedup == 6.5
    opt, calls, joined = _optimizer(finals, dispatch=_decision(JOINED, True, 1.2))
    final, out = opt._output(None, ORIGINAL, [A, B], [], [], 6.7, [])
    assert out is A and final.speedup == 1.3                     # the join was slower: A stays


def test_a_vetoed_config_barely_faster_than_the_one_that_passed_is_not_tried():
    finals = {B.hash: _decision(B, False, 1.31, worst=1.14), A.hash: _decision(A, True, 1.3)}
    opt, calls, _ = _optimizer(finals, dispatch=None)
    final, out = opt._output(None, ORIGINAL, [A, B], [], [], 1.31, [])
    assert out is A and ("dispatch", "B") not in calls


def test_a_search_vetoed_config_is_checked_and_joined_before_the_chain():
    finals = {S.hash: _decision(S, False, 1.16, worst=1.27), A.hash: _decision(A, True, 1.03)}
    opt, calls, joined = _optimizer(finals, dispatch=_decision(JOINED, True, 1.15))
    final, out = opt._output(None, ORIGINAL, [A], [], [(1.16, 0, S)], 1.03, [])
    assert out is joined and calls == [("final", "S"), ("dispatch", "S")]


def test_runners_up_are_checked_when_every_winner_fails():
    """The round's winner fails its fresh-process check; a rival the search also accepted (with a
    lower bound past the threshold) gets its own, the likeliest first, at most two; a rival of
    another kind than the failed winner before one of the same kind."""
    C = Candidate("x = 4\n", "rules:t", description="C")
    D = Candidate("x = 5\n", "rules:t", description="D")
    finals = {B.hash: _decision(B, False, 0.97, worst=2.3), A.hash: _decision(A, False, 1.01),
              C.hash: _decision(C, True, 1.1), D.hash: _decision(D, True, 1.2)}
    opt, calls, _ = _optimizer(finals)
    runners = [(1.10, 0, C), (1.14, -1, A), (1.05, -2, D)]
    final, out = opt._output(None, ORIGINAL, [B], [], [], 1.14, [], runners=runners)
    assert calls == [("final", "B"), ("final", "A"), ("final", "C")]
    assert out is C and final.accepted
    # none passes: the original stays, and no more than two runners-up were checked
    finals[C.hash] = _decision(C, False, 1.0)
    opt, calls, _ = _optimizer(finals)
    final, out = opt._output(None, ORIGINAL, [B], [], [], 1.14, [], runners=runners)
    assert out is ORIGINAL and calls == [("final", "B"), ("final", "A"), ("final", "C")]
    # a winner that passes leaves the runners-up unchecked
    finals[B.hash] = _decision(B, True, 1.3)
    opt, calls, _ = _optimizer(finals)
    final, out = opt._output(None, ORIGINAL, [B], [], [], 1.14, [], runners=runners)
    assert out is B and calls == [("final", "B")]


def test_a_runner_up_of_another_kind_than_the_failed_winner_goes_first():
    W = Candidate("x = 6\n", "rules:autotune_widen", description="W")
    X = Candidate("x = 7\n", "rules:autotune_blocks", description="X")
    P = Candidate("x = 8\n", "rules:loop_pipelining", description="P")
    finals = {W.hash: _decision(W, False, 0.97, worst=2.3), X.hash: _decision(X, False, 0.98),
              P.hash: _decision(P, True, 1.1)}
    opt, calls, _ = _optimizer(finals)
    W2 = Candidate("x = 9\n", "rules:autotune_widen", description="W2")
    finals[W2.hash] = _decision(W2, False, 0.9)
    runners = [(1.141, 0, X), (1.14, -1, W2), (1.110, -2, P)]
    final, out = opt._output(None, ORIGINAL, [W], [], [], 1.142, [], runners=runners)
    # X and W2 change the autotune configs as the failed winner did: P goes first
    assert calls == [("final", "W"), ("final", "P")]
    assert out is P
