"""search.branch: which timed candidate a branch round proposes from, and how its proposals are
described and filtered."""

from tritonforge.model import Candidate, Case, CaseRole, SpecCall, Task
from tritonforge.search.branch import MAX_BRANCHES, NEAR, branched_from, near_miss
from tritonforge.search.state import SearchState

ORIGINAL = Candidate("x = 0\n", "original")
TASK = Task("t", ORIGINAL.source, ("f",), (Case("p", CaseRole.PERFORMANCE, SpecCall("f")),), "test")


def _c(i, desc=""):
    return Candidate(f"x = {i}\n", "rules", ORIGINAL.hash, desc or f"change {i}")


def _state(ranked, factor=1.0, incumbent=ORIGINAL, chain=(), branched=()):
    return SearchState(TASK, ORIGINAL, incumbent, ("p",), (("p",),), factor=factor,
                       ranked=tuple((est, -i, c) for i, (est, c) in enumerate(ranked)),
                       chain=chain, branched=branched)


def test_the_near_miss_is_the_fastest_timed_candidate_within_reach_of_the_incumbent():
    a, b, c = _c(1), _c(2), _c(3)
    assert near_miss(_state([(0.95, a), (0.99, b), (0.5, c)])) is b
    # measured against the incumbent's speed: after a 2x acceptance, 1.5x over the original is far
    inc = _c(9)
    state = _state([(2.0, inc), (1.5, a), (1.9, b)], factor=2.0, incumbent=inc, chain=(inc,))
    assert near_miss(state) is b
    assert near_miss(_state([(1.5, a)], factor=2.0, incumbent=inc, chain=(inc,))) is None
    assert NEAR * 2.0 > 1.5


def test_the_incumbent_the_chain_and_those_branched_from_are_never_near_misses():
    a, b = _c(1), _c(2)
    assert near_miss(_state([(0.99, a), (0.95, b)], branched=(a.hash,))) is b
    assert near_miss(_state([(0.99, a)], chain=(a,), incumbent=a)) is None
    full = tuple(_c(10 + i).hash for i in range(MAX_BRANCHES))
    assert near_miss(_state([(0.99, b)], branched=full)) is None
    assert near_miss(_state([(float("nan"), a)])) is None


def test_proposals_from_a_near_miss_say_so_and_never_give_back_a_judged_file():
    base = _c(1, "several rows per program")
    props = [Candidate("x = 0\n", "rules", base.hash, "undo"),
             Candidate("x = 5\n", "rules", base.hash, "num_warps 4 -> 8")]
    out = branched_from(base, props, [ORIGINAL])
    assert [c.description for c in out] == ["num_warps 4 -> 8 (on several rows per program)"]
    assert out[0].hash == props[1].hash and out[0].parent == base.hash


LAUNCH = "def f(x):\n    k[(1,)](x, BLOCK=64{})\n"


def test_a_proposal_that_writes_the_launch_default_the_original_left_out_is_the_original():
    """From a near miss with num_warps=2, 'num_warps 2 -> 4' writes num_warps=4 where the
    original wrote nothing: Triton's default, the original itself. Other values stay."""
    original = Candidate(LAUNCH.format(""), "original")
    base = Candidate(LAUNCH.format(", num_warps=2"), "rules", None, "num_warps 4 -> 2")
    props = [Candidate(LAUNCH.format(", num_warps=4"), "rules", base.hash, "num_warps 2 -> 4"),
             Candidate(LAUNCH.format(", num_warps=4, num_stages=3"), "rules", base.hash, "both"),
             Candidate(LAUNCH.format(", num_warps=8"), "rules", base.hash, "num_warps 2 -> 8"),
             Candidate(LAUNCH.format(", num_stages=2"), "rules", base.hash, "stages"),
             Candidate("def f(x:\n", "rules", base.hash, "broken")]
    out = branched_from(base, props, [original])
    assert [c.description.split(" (on")[0] for c in out] == ["num_warps 2 -> 8", "stages", "broken"]
