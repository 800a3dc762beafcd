"""A verification wave pauses after two crashes on one case (search.rounds.CrashPause): the
original's twin says whose crash it is, and the candidates the pause left unsent are verified
after it, on the cases left (the original crashes there) or as they were (the candidates'
own crashes); nothing is lost either way."""

from types import SimpleNamespace

from tritonforge.model import (
    Candidate, Case, CaseRole, Failure, HardwareInfo, SpecCall, Status, Task, Timing,
    TimingMethod, VariantResult,
)
from tritonforge.search.arbiter import ArbiterPolicy
from tritonforge.search.phases import PhaseClock
from tritonforge.search.rounds import CRASH_PAUSE_AFTER, CrashPause, RoundEnv, run_round
from tritonforge.search.state import SearchState

ORIGINAL = Candidate("x = 0\n", "original")
TASK = Task("t", ORIGINAL.source, ("f",), (Case("c", CaseRole.CORRECTNESS, SpecCall("f")),
                                            Case("p", CaseRole.PERFORMANCE, SpecCall("f"))), "test")


def _crash(h, case_id="p"):
    return VariantResult("candidate", h, Status.CRASH,
                         Failure(Status.CRASH, "illegal memory access", case_id=case_id))


def _timed(name, h, ms):
    return VariantResult(name, h, Status.OK, timings=(
        Timing("p", name, TimingMethod.CUDA_EVENTS, tuple(ms * (1 + 0.001 * i) for i in range(9))),))


class CrashingStages:
    """Every candidate crashes on case p while p is verified (the pool asks ``in_time`` before
    each request, as search.cascade does); without p they pass. ``original_crashes``: what the
    twin finds."""

    def __init__(self, n, original_crashes):
        self.n, self.original_crashes = n, original_crashes
        self.store, self.profile, self.interpreted, self.per_round = None, None, False, 16
        self._twin_fails = {}
        self.requests, self.twins, self.waves = 0, 0, []

    def progress(self, line):
        pass

    def _propose(self, ctx):
        return [Candidate(f"x = {i}\n", "fake", ctx.incumbent.hash, f"c{i}") for i in range(self.n)]

    def _prune(self, task, incumbent, cands, hardware, history, notes):
        return cands

    def verify(self, task, original, cands, tiers, in_time=lambda got: True, fresh=True):
        cases = {c for t in tiers for c in t}
        self.waves.append((len(cands), tuple(sorted(cases))))
        got = {}
        for c in cands:
            if not in_time(got):
                got[c.hash] = VariantResult("candidate", c.hash, Status.SKIPPED,
                                            Failure(Status.SKIPPED, "out of time"))
                continue
            self.requests += 1
            got[c.hash] = _crash(c.hash) if "p" in cases else \
                VariantResult("candidate", c.hash, Status.OK)
        return got

    def _cases_the_original_crashes(self, task, original, cands, verified, case_ids):
        if not any(r.status is Status.CRASH for r in verified.values()):
            return set()
        self.twins += 1
        self._twin_fails["p"] = self.original_crashes
        return {"p"} if self.original_crashes else set()

    def _repair_failed(self, *a):
        return []

    def _time(self, task, incumbent, cands, case_ids, end_within_s=None):
        results = {"incumbent": _timed("incumbent", incumbent.hash, 1.0)}
        results.update({f"c{i}": _timed(f"c{i}", c.hash, 0.5) for i, c in enumerate(cands)})
        return SimpleNamespace(result=results.__getitem__)


def _env(stages):
    estimate = SimpleNamespace(observe=lambda *a: None, seconds=lambda ids: 10.0,
                               timing_s=lambda ids, n: 1.0)
    return RoundEnv(stages, ArbiterPolicy(), PhaseClock(), estimate, HardwareInfo("fake", False),
                    lambda d: False, lambda *a, **k: None, 1.05, 2)


def _state():
    return SearchState(TASK, ORIGINAL, ORIGINAL, ("p",), (("c", "p"),))


def test_the_wave_pauses_and_resumes_without_the_originals_crash_case():
    stages = CrashingStages(12, original_crashes=True)
    out = run_round(_state(), _env(stages))
    # two crashes, then the twin; all twelve (the two crashed ones too) verified without p
    assert stages.requests == CRASH_PAUSE_AFTER + 12
    assert stages.twins == 1
    assert stages.waves[1] == (12, ("c",))        # crashed and paused ones, again without p
    assert any("paused after 2 crashes on case p" in n and "crashes there too" in n
               for n in out.state.notes)
    assert sum(1 for h in out.state.history if h.status is Status.OK) == 12


def test_crashes_of_the_candidates_own_still_verify_every_paused_candidate():
    stages = CrashingStages(6, original_crashes=False)
    out = run_round(_state(), _env(stages))
    assert stages.requests == 6                   # 2, the pause, then the 4 left: none lost
    assert stages.waves[1] == (4, ("c", "p"))     # the paused ones, on the same cases
    assert any("the crashes are the candidates'" in n for n in out.state.notes)
    assert all(h.status is Status.CRASH for h in out.state.history)


def test_a_case_with_a_known_twin_verdict_never_pauses():
    pause = CrashPause({"p": False})
    got = {str(i): _crash(str(i)) for i in range(5)}
    assert not pause(got) and pause.case is None
    fresh = CrashPause({})
    assert not fresh({"0": _crash("0")})
    assert fresh({"0": _crash("0"), "1": _crash("1")}) and fresh.case == "p"
