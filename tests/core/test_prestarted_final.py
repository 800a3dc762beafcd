"""Final-check evaluators made ahead of need (runtime.evaluator.PrestartedEvaluators): still a new
process per check, started before it is asked for, and none left running."""

from pathlib import Path

from tritonforge.config import Settings
from tritonforge.runtime.evaluator import Evaluator, PrestartedEvaluators


def _factory(tmp_path):
    made = []

    def make():
        ev = Evaluator(Settings(device="cpu"), tmp_path / f"final{len(made)}", None, device="cpu")
        made.append(ev)
        return ev
    return made, make


def test_a_prestarted_evaluator_comes_started_and_each_call_is_a_new_process(tmp_path):
    made, make = _factory(tmp_path)
    fresh = PrestartedEvaluators(make)
    fresh.prestart()
    fresh.prestart()                       # one waiting at a time
    assert len(made) == 1
    fresh.wait()                           # up, and still waiting to be asked for
    assert made[0].worker.alive() and fresh.prestarted == 0
    first = fresh()
    try:
        assert first.worker.alive() and first.worker.info is not None   # started before asked
        assert fresh.prestarted == 1
        second = fresh()                   # none waiting: a new one, started on first use
        try:
            assert second is not first and len(made) == 2
            assert not second.worker.alive()
        finally:
            second.close()
    finally:
        first.close()
        fresh.close()


def test_close_stops_a_worker_no_final_check_asked_for(tmp_path):
    made, make = _factory(tmp_path)
    fresh = PrestartedEvaluators(make)
    fresh.prestart()
    fresh.close()
    assert len(made) == 1 and not made[0].worker.alive()
    fresh.close()                          # twice is harmless


def test_a_worker_not_running_is_not_started_for_a_request_too_close_to_the_records_cap(
        tmp_path, monkeypatch):
    """On a GPU, a request whose worker is not running goes unsent (every variant SKIPPED, the
    cap's reason) where less than WORKER_START_S is left before its deadline: the start alone
    would end past the record's cap. A running worker still takes a request up to its deadline."""
    import contextlib
    from types import SimpleNamespace

    from tritonforge.model import Status, Variant
    from tritonforge.runtime import evaluator as evaluator_mod
    from tritonforge.runtime.evaluator import CUT_MARGIN_S, WORKER_START_S
    from tritonforge.tasks.loader import task_from_file
    example = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"

    monkeypatch.setattr(evaluator_mod, "lock_mode", lambda gpu, timed, settings=None: "shared")
    monkeypatch.setattr(evaluator_mod, "gpu_lock", lambda mode: contextlib.nullcontext())
    spec = tmp_path / "s.toml"
    spec.write_text('entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [300] }]\n')
    task = task_from_file(example, spec)
    ev = Evaluator(Settings(device="cpu"), tmp_path / "w", None, device="cpu")
    asked = []
    ev.worker = SimpleNamespace(alive=lambda: running, ensure_started=lambda: asked.append("start"),
                                evaluate=lambda request, deadline: asked.append("sent"),
                                info=None, cut=False)
    variants = (Variant("original", task.source, task.source_hash),)
    for running, left, sent in ((False, WORKER_START_S - 1, False), (True, 2.0, True)):
        asked.clear()
        ev.time_left = lambda left=left: left + CUT_MARGIN_S
        got = None
        try:
            got = ev.evaluate(task, variants, purpose="final", verify=False, time=False,
                              use_store=False)
        except Exception:  # noqa: BLE001 - the fake worker returns no evaluation
            pass
        assert ("sent" in asked) == sent, (running, asked)
        if not sent:
            assert asked == [] and got.results[0].status is Status.SKIPPED
    assert ev._room_to_start()             # running, 2 s before its deadline
