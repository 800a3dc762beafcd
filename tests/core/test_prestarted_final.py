"""Final-check evaluators made ahead of need (runtime.evaluator.PrestartedEvaluators): still a new
process per check, started before it is asked for, and none left running."""

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
