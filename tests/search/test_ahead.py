"""Compiling the likely first candidates ahead (search.ahead) on the pool's spare workers while the
timing worker measures the original: only spare workers are asked, each candidate once, in
compile-only requests; stopping waits for the requests in flight and sends no more; the
Evaluator's compile-ahead request never imports a source the static policy refuses."""

import threading
from types import SimpleNamespace

from tritonforge.config import Settings
from tritonforge.model import Candidate, HardwareInfo, Status, Task
from tritonforge.runtime.evaluator import Evaluator
from tritonforge.search.ahead import CompileAhead

ORIGINAL = Candidate("x = 0\n", "original")
TASK = Task("t", ORIGINAL.source, ("f",), (), "test")


class Proposes:
    name = "static"

    def __init__(self, n):
        self.n, self.contexts = n, []

    def propose(self, ctx):
        self.contexts.append(ctx)
        return [Candidate(f"x = {i}\n", "static", ctx.incumbent.hash, f"move {i}")
                for i in range(self.n)][:ctx.budget]

    def repair(self, request):
        return None


class Spare:
    def __init__(self, log, gate=None):
        self.log, self.gate = log, gate
        self.abandoned = self.cut = 0

    def abandon(self):              # Evaluator.abandon: the request in flight is cut
        self.abandoned += 1
        if self.gate is not None:
            self.gate.set()

    def cut_in_flight(self):        # Evaluator.cut_in_flight: cut, the evaluator still usable
        self.cut += 1
        if self.gate is not None:
            self.gate.set()

    def compile_ahead(self, task, variants, case_ids=None):
        if self.gate is not None:
            self.gate.wait()
        self.log.append((id(self), variants[1].source, case_ids))
        if self.cut:
            return SimpleNamespace(results=(SimpleNamespace(status=Status.SKIPPED),) * 2)
        return SimpleNamespace(results=())


def test_every_candidate_compiles_once_on_the_spare_workers():
    log = []
    spare = [Spare(log), Spare(log)]
    proposer = Proposes(5)
    ahead = CompileAhead(spare, TASK, ORIGINAL, [proposer], 4, HardwareInfo("cuda", False))
    ahead.start()
    report = ahead.stop()
    assert sorted(src for _, src, _ in log) == [f"x = {i}\n" for i in range(4)]   # a round's worth
    assert report.proposed == 4 and report.compiled == 4
    assert proposer.contexts[0].diagnosis is None and proposer.contexts[0].profile is None
    assert "4 of 4" in report.note()


def test_stopping_waits_for_the_request_in_flight_and_sends_no_more():
    log, gate = [], threading.Event()
    ahead = CompileAhead([Spare(log, gate)], TASK, ORIGINAL, [Proposes(6)], 6,
                         HardwareInfo("cuda", False))
    ahead.start()
    stopper = threading.Thread(target=ahead.stop)
    stopper.start()
    assert ahead._stop.wait(10)      # stop asked while the first request is still compiling
    gate.set()                      # the one request in flight ends
    stopper.join()
    assert len(log) == 1
    assert ahead.stop().compiled == 1


def test_a_request_still_compiling_after_the_grace_is_cut_not_waited_for():
    """Round 1 waits ``grace_s`` at most for a compile request (one hung its record to the cap
    on an H100); the one still running is cut, the evaluator kept, and it does not count as
    compiled; an idle spare is not touched."""
    log, gate = [], threading.Event()
    busy, idle = Spare(log, gate), Spare(log)
    ahead = CompileAhead([busy, idle], TASK, ORIGINAL, [Proposes(1)], 1,
                         HardwareInfo("cuda", False), grace_s=0.2)
    ahead.start()
    report = ahead.stop()
    assert busy.cut == 1 and busy.abandoned == 0 and idle.cut == 0
    assert report.cut == 1 and report.compiled == 0
    assert "1 request(s) still running" in report.note()


def test_abandoning_cuts_the_request_in_flight_instead_of_waiting():
    """A record over before round 1 (its baseline cut at the cap) does not wait for compile
    requests still building a case's inputs: the evaluators with one in flight are abandoned,
    the idle ones are not touched."""
    log, gate = [], threading.Event()
    busy, idle = Spare(log, gate), Spare(log)
    ahead = CompileAhead([busy, idle], TASK, ORIGINAL, [Proposes(1)], 1,
                         HardwareInfo("cuda", False))
    ahead.start()
    report = ahead.stop(abandon=True)
    assert busy.abandoned == 1 and idle.abandoned == 0
    assert report.proposed == 1 and len(log) == 1


def test_no_spare_worker_or_no_ahead_proposer_compiles_nothing():
    from tritonforge.search.loop import Optimizer

    opt = Optimizer.__new__(Optimizer)
    opt.evaluators, opt.ahead_proposers, opt.interpreted = [object()], [Proposes(2)], False
    assert opt._compile_ahead(TASK, ORIGINAL) is None
    opt.evaluators, opt.ahead_proposers = [object(), Spare([])], []
    assert opt._compile_ahead(TASK, ORIGINAL) is None
    opt.ahead_proposers, opt.interpreted = [Proposes(2)], True
    assert opt._compile_ahead(TASK, ORIGINAL) is None


def test_compile_ahead_never_imports_a_source_the_policy_refuses(tmp_path):
    ev = Evaluator(Settings(device="cpu"), tmp_path / "w", None, device="cpu")
    sent = []
    ev.worker = SimpleNamespace(evaluate=lambda request, deadline=None: sent.append(request) or "done")
    from tritonforge.model import Variant
    bad = Variant("candidate", "import os\nos.system('true')\n", "h1")
    assert ev.compile_ahead(TASK, (Variant("original", ORIGINAL.source, ORIGINAL.hash), bad)) is None
    assert sent == []
    good = Variant("candidate", "x = 2\n", "h2")
    assert ev.compile_ahead(TASK, (Variant("original", ORIGINAL.source, ORIGINAL.hash), good)) == "done"
    assert sent[0].compile_only and not sent[0].verify and not sent[0].time


def test_compile_ahead_is_cut_at_the_records_cap(tmp_path):
    """Like every request of a record: sent with the cap's deadline, and never sent once no
    time is left (on two H200s one held its record 90 s past its cap, uncapped)."""
    from tritonforge.model import Variant

    ev = Evaluator(Settings(device="cpu"), tmp_path / "w", None, device="cpu")
    sent = []
    ev.worker = SimpleNamespace(evaluate=lambda request, deadline=None: sent.append(deadline) or "done")
    pair = (Variant("original", ORIGINAL.source, ORIGINAL.hash), Variant("candidate", "x = 2\n", "h2"))
    ev.time_left = lambda: 0.0
    assert ev.compile_ahead(TASK, pair) is None and sent == []
    ev.time_left = lambda: 60.0
    assert ev.compile_ahead(TASK, pair) == "done" and sent[0] is not None


def test_the_worker_making_late_cases_is_not_a_spare_one(monkeypatch):
    """compose makes generated cases on the pool's last worker while the original is measured:
    compiling ahead takes the workers between the timer and that one."""
    from types import SimpleNamespace

    import tritonforge.search.loop as loop
    from tritonforge.compose import ahead_proposers
    from tritonforge.config import Settings
    from tritonforge.search.config_search import ConfigSearchProposer

    got = []

    class Spy:
        def __init__(self, spare, *a, **k):
            got.append(list(spare))

        def start(self):
            pass

    monkeypatch.setattr(loop, "CompileAhead", Spy)
    opt = loop.Optimizer.__new__(loop.Optimizer)
    opt.evaluators = ["timer", "w1", "w2", "w3"]
    opt.timer = SimpleNamespace(device="cuda")
    opt.interpreted, opt.ahead_proposers, opt.progress = False, ["p"], None
    opt.stages = SimpleNamespace(per_round=16)
    from tritonforge.model import Case, CaseRole, SpecCall, Task
    task = Task("t", "x = 0\n", ("f",), (Case("c", CaseRole.CORRECTNESS, SpecCall("f")),), "test")
    opt.late_cases = lambda: ()
    opt._compile_ahead(task, None)
    opt.late_cases = None
    opt._compile_ahead(task, None)
    assert got == [["w1", "w2"], ["w1", "w2", "w3"]]
    made = ahead_proposers(Settings())
    assert len(made) == 1 and isinstance(made[0], ConfigSearchProposer) and made[0].share == 1.0
    assert ahead_proposers(Settings(config_search=False)) == []
