"""Forgetting a task in a run store (``bench optimize --redo``): all of it, and only it."""

import sqlite3

from tritonforge.model import (
    Candidate, Decision, DeviceInfo, Evaluation, Status, Timing, TimingMethod, VariantResult,
)
from tritonforge.store import RunStore


def _evaluation(task: str) -> Evaluation:
    timing = Timing("c", "original", TimingMethod.CUDA_EVENTS, (1.0, 1.1))
    return Evaluation(task, (VariantResult("original", "h", Status.OK, timings=(timing,)),),
                      DeviceInfo("H100 (stand-in)", False))


def test_forget_task_removes_its_rows_and_keeps_the_others(tmp_path):
    path = tmp_path / "store.sqlite"
    with RunStore(path) as store:
        for task in ("a", "b"):
            store.put_candidate(task, Candidate(f"x = '{task}'\n", "original"))
            store.put_evaluation(f"key-{task}", "baseline", _evaluation(task))
            store.put_decision(task, 1, Decision("h", True, 2.0, 1.9, 2.0, 1.0, "faster"))
            store.put_record("optimize", task, {"speedup": 2.0})
        assert store.forget_task("a", "optimize") == 1
        assert store.get_record("optimize", "a") is None and store.get_evaluation("key-a") is None
        assert store.decisions("a") == [] and store.candidates("a") == []
        assert store.get_record("optimize", "b") is not None and store.get_evaluation("key-b") is not None
        assert len(store.decisions("b")) == 1
    db = sqlite3.connect(path)
    orphans = db.execute("SELECT count(*) FROM timings WHERE evaluation NOT IN (SELECT id FROM evaluations)")
    assert orphans.fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM timings").fetchone()[0] == 1     # b's stays


def test_forget_task_may_keep_the_record_until_a_new_one_replaces_it(tmp_path):
    with RunStore(tmp_path / "store.sqlite") as store:
        store.put_candidate("a", Candidate("x = 'a'\n", "original"))
        store.put_evaluation("key-a", "baseline", _evaluation("a"))
        store.put_record("optimize", "a", {"speedup": 2.0})
        assert store.forget_task("a", "optimize", keep_record=True) == 1
        assert store.get_evaluation("key-a") is None and store.candidates("a") == []
        assert store.get_record("optimize", "a") == {"speedup": 2.0}
        store.put_record("optimize", "a", {"speedup": 3.0})
        assert store.get_record("optimize", "a") == {"speedup": 3.0}
