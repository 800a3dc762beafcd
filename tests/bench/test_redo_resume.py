"""``--redo`` resumes a re-run that an earlier call cut off, and only then (bench.redo)."""

from __future__ import annotations

import time

from tritonforge.bench.redo import REDO_KIND, engine_fingerprint, forget_for_redo, redo_left
from tritonforge.model import DeviceInfo, Evaluation, Status, Timing, TimingMethod, VariantResult
from tritonforge.store import RunStore


def _evaluation(task: str) -> Evaluation:
    timing = Timing("c", "original", TimingMethod.CUDA_EVENTS, (1.0, 1.1))
    return Evaluation(task, (VariantResult("original", "h", Status.OK, timings=(timing,)),),
                      DeviceInfo("H100 (stand-in)", False))


def _tick():
    time.sleep(0.01)     # stored rows carry time.time(): keep before/after distinct


def test_a_cut_rerun_keeps_its_own_work_and_a_finished_one_does_not(tmp_path):
    with RunStore(tmp_path / "store.sqlite") as store:
        store.put_evaluation("old", "verify", _evaluation("a"))
        store.put_record("optimize", "a", {"speedup": 1.0})
        _tick()
        gone, resumed = forget_for_redo(store, "a", fingerprint="e1")
        assert (gone, resumed) == (1, False) and store.get_evaluation("old") is None
        assert store.get_record(REDO_KIND, "a")["engine"] == "e1"
        _tick()
        store.put_evaluation("rerun-1", "verify", _evaluation("a"))   # then the call ends
        _tick()
        gone, resumed = forget_for_redo(store, "a", fingerprint="e1")
        assert (gone, resumed) == (0, True) and store.get_evaluation("rerun-1") is not None
        assert store.get_record("optimize", "a") == {"speedup": 1.0}      # still the earlier result
        _tick()
        store.put_record("optimize", "a", {"speedup": 2.0})               # this time it finished
        _tick()
        gone, resumed = forget_for_redo(store, "a", fingerprint="e1")
        assert (gone, resumed) == (1, False) and store.get_evaluation("rerun-1") is None


def test_a_changed_engine_forgets_a_cut_rerun_too(tmp_path):
    with RunStore(tmp_path / "store.sqlite") as store:
        store.put_record("optimize", "a", {"speedup": 1.0})
        _tick()
        forget_for_redo(store, "a", fingerprint="e1")
        _tick()
        store.put_evaluation("rerun-1", "verify", _evaluation("a"))
        _tick()
        gone, resumed = forget_for_redo(store, "a", fingerprint="e2")
        assert (gone, resumed) == (1, False) and store.get_evaluation("rerun-1") is None


def test_only_the_named_task_is_touched(tmp_path):
    with RunStore(tmp_path / "store.sqlite") as store:
        store.put_evaluation("b-1", "verify", _evaluation("b"))
        forget_for_redo(store, "a", fingerprint="e1")
        assert store.get_evaluation("b-1") is not None


def test_the_fingerprint_follows_the_source(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text("x = 1\n")
    first = engine_fingerprint(pkg)
    assert first == engine_fingerprint(pkg)
    (pkg / "m.py").write_text("x = 2\n")
    assert engine_fingerprint(pkg) != first
    assert len(engine_fingerprint()) == 16       # the installed package's own


def test_redo_left_names_the_reruns_that_stored_nothing_since_the_call_began(tmp_path):
    with RunStore(tmp_path / "store.sqlite") as store:
        store.put_record("optimize", "cut", {"speedup": 1.0})        # an earlier call's record
        store.put_record("optimize", "done", {"speedup": 1.0})
        _tick()
        since = time.time()
        _tick()
        forget_for_redo(store, "cut", fingerprint="e1")             # started, then cut
        store.put_record("optimize", "done", {"speedup": 1.3})       # re-run and stored
        assert redo_left(store, ["cut", "done", "never"], since) == ["cut", "never"]
