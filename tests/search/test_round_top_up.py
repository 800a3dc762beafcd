"""A round the proposers leave short is topped up by a proposer that can always give more (the
config search), never with a candidate already in the round; a proposer without ``top_up`` is
asked once."""

from tritonforge.model import Candidate, HardwareInfo, ProposalContext, Task
from tritonforge.search.stages import RoundStages

ORIGINAL = Candidate("x = 0\n", "original")


class Fixed:
    """Proposes up to ``n`` candidates a call, numbered on from ``start``."""

    def __init__(self, name, n, start, tops_up=False):
        self.name, self.n, self.next, self.asked = name, n, start, []
        if tops_up:
            self.top_up = self._top_up

    def propose(self, ctx):
        self.asked.append(("propose", ctx.budget))
        return self._make(min(self.n, ctx.budget))

    def _top_up(self, ctx):
        self.asked.append(("top_up", ctx.budget))
        return [Candidate("x = 1\n", self.name)] + self._make(ctx.budget - 1)  # one repeat

    def _make(self, k):
        out = [Candidate(f"x = {self.next + i}\n", self.name) for i in range(max(k, 0))]
        self.next += len(out)
        return out


def _stages(proposers, per_round):
    st = RoundStages.__new__(RoundStages)
    st.proposers, st.per_round = proposers, per_round
    return st


def _ctx():
    return ProposalContext(Task("t", ORIGINAL.source, ("f",), (), "test"), ORIGINAL, 1,
                           HardwareInfo("fake", False))


def test_the_config_search_fills_what_the_rules_left():
    configs, rules = Fixed("configs", 8, 1, tops_up=True), Fixed("rules", 2, 100)
    cands = _stages([configs, rules], 16)._propose(_ctx())
    assert len(cands) == 15                    # 8 + 2, then 6 new of the 6 asked (one repeat)
    assert len({c.hash for c in cands}) == len(cands)
    assert configs.asked == [("propose", 16), ("top_up", 6)]
    assert rules.asked == [("propose", 8)]


def test_a_full_round_asks_no_top_up():
    configs, rules = Fixed("configs", 8, 1, tops_up=True), Fixed("rules", 8, 100)
    assert len(_stages([configs, rules], 16)._propose(_ctx())) == 16
    assert configs.asked == [("propose", 16)]
