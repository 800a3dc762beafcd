"""The search reports its stages to a ProgressSink (model.progress) as it goes: through the
interpreter on the bundled example, every stage boundary in order, counts that only grow, and a
sink that raises never ends the run."""

from tritonforge.config import Settings
from tritonforge.model import Candidate
from tritonforge.model.progress import ProgressEvent
from tritonforge.runtime.evaluator import Evaluator
from tritonforge.search.loop import Optimizer


class OneMove:
    name = "one-move"

    def propose(self, context):
        if context.round > 1:
            return []
        src = context.incumbent.source + "\n# a comment\n"
        wrong = context.incumbent.source.replace("tl.sin(", "tl.cos(")
        return [Candidate(src, "fixed", context.incumbent.hash, "comment"),
                Candidate(wrong, "fixed", context.incumbent.hash, "cos")]

    def repair(self, request):
        return None


def test_stage_boundaries_reach_the_sink_in_order(sin_task, tmp_path):
    events: list[ProgressEvent] = []

    def sink(event):
        events.append(event)
        if event.phase == "verify":
            raise RuntimeError("a display's bug")

    settings = Settings(device="cpu", max_rounds=2, patience=1, case_timeout_s=120)
    ev = Evaluator(settings, tmp_path / "w0", None, device="cpu")
    try:
        result = Optimizer(sin_task, settings, [ev], [OneMove()], None, sink,
                           candidates_per_round=2).run(10_000.0)
    finally:
        ev.close()
    phases = [e.phase for e in events]
    assert phases[0] == "baseline" and phases[-1] == "done"
    order = [p for i, p in enumerate(phases) if p not in phases[:i]]
    assert order == ["baseline", "profile", "propose", "verify", "time", "repair", "final-check",
                     "done"]                # the failed candidate's repair after the timing
    last = events[-1]
    assert last.round == result.rounds == 1 and last.failed == 1 and last.verified == 1
    assert last.compiled == 2 and result.final.reason in last.message
    assert all(e.budget_left_s is not None and 0 < e.budget_left_s <= 10_000.0 for e in events)
    assert [e.elapsed_s for e in events] == sorted(e.elapsed_s for e in events)
    assert result.final is not None and result.final.accepted
