"""Progress: the optimizer hands ProgressEvents to the sink it is given, at each step and in
order, and the CLI shows them live (rich) or as plain lines."""

import io
from pathlib import Path

from tritonforge.cli_progress import LiveProgress, PlainProgress, progress_display, status_text
from tritonforge.config import Settings
from tritonforge.model.progress import ProgressEvent
from tritonforge.runtime.service import Evaluator
from tritonforge.search.loop import Optimizer
from tritonforge.search.rules import RuleProposer
from tritonforge.store import RunStore
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"


def test_the_optimizer_reports_each_step_in_order(tmp_path):
    task = task_from_file(EXAMPLE, None, None)
    settings = Settings(device="cpu", max_rounds=1, patience=1, case_timeout_s=120)
    events: list[ProgressEvent] = []
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            result = Optimizer(task, settings, [ev], [RuleProposer()], store, events.append,
                               candidates_per_round=2).run(budget_s=600)
        finally:
            ev.close()
    phases = [e.phase for e in events]
    order = ["baseline", "profile", "propose", "verify", "time", "final-check", "done"]
    firsts = [phases.index(p) for p in order]
    assert firsts == sorted(firsts) and phases[-1] == "done"
    assert all(e.round == 1 for e in events if e.phase in ("propose", "verify", "time"))
    for a, b in zip(events, events[1:]):          # cumulative counts never go back
        assert all(x <= y for x, y in zip((a.compiled, a.verified, a.timed, a.failed),
                                          (b.compiled, b.verified, b.timed, b.failed)))
        assert b.elapsed_s >= a.elapsed_s
    last = events[-1]
    assert last.verified == 2 and last.timed == 2 and last.compiled == 2
    assert last.budget_left_s is not None and 0 < last.budget_left_s < 600
    assert result.final is not None and result.final.reason in last.message


def _events():
    return [ProgressEvent("baseline", message="timing the original"),
            ProgressEvent("propose", 1, elapsed_s=3.0),
            ProgressEvent("verify", 1, compiled=2, elapsed_s=4.0, message="verifying 2"),
            ProgressEvent("verify", 1, compiled=2, verified=2, elapsed_s=5.0),
            ProgressEvent("time", 1, 2, 2, 2, 0, 1.31, 1.22, 84.0, 9.0)]


def test_plain_lines_one_per_step_and_note():
    out = io.StringIO()
    sink = PlainProgress(out)
    for e in _events():
        sink(e)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[baseline |") and lines[1] == "  timing the original"
    assert sum(line.startswith("[round 1 verify") for line in lines) == 1   # no repeat
    assert lines[-1] == ("[round 1 time | 2 compiled, 2 verified, 2 timed, 0 failed | "
                         "best 1.31x (>= 1.22x) | 84 s left | 9 s]")


def test_live_panel_with_rich():
    out = io.StringIO()
    sink = LiveProgress(out)
    for e in _events():
        sink(e)
    sink.close()
    text = out.getvalue()
    assert "verifying 2" in text and "best 1.31x (>= 1.22x)" in text


def test_not_a_terminal_gets_plain_lines():
    assert isinstance(progress_display(io.StringIO()), PlainProgress)


def test_without_rich_a_terminal_gets_plain_lines(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_rich(name, *a, **k):
        if name.startswith("rich"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_rich)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert isinstance(progress_display(Tty()), PlainProgress)


def test_status_text_without_timing_or_budget():
    assert status_text(ProgressEvent("profile", elapsed_s=2.0)) == \
        "profile | 0 compiled, 0 verified, 0 timed, 0 failed | 2 s"
