"""The benchmark's bookkeeping: the subset rule, the headline figures, why a kernel fell short."""

import math

from dataclasses import replace

from tritonforge.bench.optimize import NOT_TIMED, choose_subset, headline, held_back, phase_summary
from tritonforge.model import Candidate, Decision, HistoryEntry, Status
from tritonforge.search.loop import OptimizeResult
from tritonforge.search.phases import PhaseTime

ORIG = Candidate("x = 1\n", "original")


def _result(name, speedup=None, history=(), stop="no gain for 2 rounds", notes=()):
    final = None
    if speedup is not None:
        final = Decision("h", True, speedup, speedup * 0.98, speedup, 1.0, "faster")
    return OptimizeResult(name, ORIG, ORIG, final, 2, stop, 100.0, len(history), tuple(history),
                          notes=tuple(notes))


def test_subset_covers_every_category_round_robin_in_name_order():
    runnable = [("b1", "B"), ("a2", "A"), ("a1", "A"), ("c1", "C"), ("a3", "A")]
    assert choose_subset(runnable, 4) == ["a1", "b1", "c1", "a2"]
    assert choose_subset(runnable, 10) == ["a1", "b1", "c1", "a2", "a3"]


def test_headline_counts_failures_as_one():
    results = [_result("a", 2.0), _result("b", 1.02), _result("c")]
    h = headline(results)
    assert h["successes"] == 1 and math.isclose(h["success_rate"], 1 / 3)
    assert math.isclose(h["mean_speedup_over_successes"], 2.0)
    assert math.isclose(h["geomean_all_failures_as_1"], (2.0 * 1.02) ** (1 / 3))
    assert h["best"] == 2.0
    assert h["resumed_records"] == 0
    from tritonforge.bench.optimize import RESUMED_NOTE

    again = _result("d", notes=[f"{RESUMED_NOTE} an earlier attempt ... was cut"])
    assert headline(results + [again])["resumed_records"] == 1


def test_phase_summary_takes_medians_over_the_records_that_measured_phases():
    timed = [replace(_result("a"), phases=(PhaseTime("profile", 10.0, 1.0),
                                           PhaseTime("final check", 200.0, 0.0))),
             replace(_result("b"), phases=(PhaseTime("profile", 20.0, 3.0),)),
             replace(_result("c"), phases=(PhaseTime("profile", 30.0, 2.0),)),
             _result("older")]                      # stored before phases were measured
    assert phase_summary(timed) == [("profile", 3, 20.0, 2.0, 30.0),
                                    ("final check", 1, 200.0, 0.0, 200.0)]


def test_held_back_names_the_reason():
    wrong = HistoryEntry("h", "rules", "d", Status.MISMATCH)
    noisy = HistoryEntry("h", "rules", "d", Status.OK, 1.01, "1.010x, but the 95% lower bound 0.99x is within noise")
    assert held_back(_result("a", 2.0)) == ""
    assert held_back(_result("a")) == "no transform applied"
    assert held_back(_result("a", history=[wrong])).startswith("verifier rejection")
    from tritonforge.runtime.worker_client import CUT_REASON

    cut = HistoryEntry("h2", "rules", "d", Status.SKIPPED, None, f"skipped: {CUT_REASON} during "
                       "verify of case perf-03: killed")
    crashed_first = HistoryEntry("h3", "rules", "d", Status.SKIPPED, None,
                                 "not evaluated: c0 crash first")
    assert held_back(_result("a", history=[wrong, cut])) == \
        "time budget spent before a candidate was verified"
    assert held_back(_result("a", history=[wrong, crashed_first])).startswith("verifier rejection")
    assert held_back(_result("a", history=[noisy])).startswith("noise")
    assert held_back(_result("a", history=[noisy], notes=["near the roofline: ..."])) == "near the roofline"
    assert held_back(_result("a", stop="the original fails: x")) == "the original does not run"
    outside = ["diagnosis (ncu): latency-bound, time outside the Triton kernels; hints: outside_kernels"]
    assert held_back(_result("a", history=[noisy], notes=outside)).startswith(
        "most of the time is outside the Triton kernels")
    assert held_back(_result("a", history=[wrong], notes=outside)).startswith("verifier rejection")


def test_held_back_says_how_the_final_phase_lost_the_searchs_best():
    from tritonforge.bench.optimize import FINAL_NO_TIME, FINAL_REJECTED, FINAL_SIZE
    ok = HistoryEntry("h", "rules", "d", Status.OK, 1.5, "1.500x faster")

    def lost(*notes):
        return held_back(_result("a", history=[ok], notes=["round 2 not started: ...", *notes]))
    assert lost("final check rejected 'BLOCK 1 -> 8': not checked: about 12 s needed at the "
                "shortest, 5 s left before the 150 s cap") == FINAL_NO_TIME
    assert lost("final check rejected 'BLOCK_M x2': not correct: skipped: the record's time cap "
                "was reached: not started") == FINAL_NO_TIME
    assert lost("final check rejected 'BLOCK /4': case perf-08 is 14.7% slower (limit 5%, 95% "
                "lower bound 14.7%)", "final check rejected runner-up 'w16': not checked: about "
                "13 s needed") == FINAL_SIZE                       # the first check decides
    assert lost("final check of 'config X': not checked in a fresh process: timed on every "
                "performance case in the search's worker, case perf-00 is 10% slower at the "
                "lower bound") == FINAL_SIZE
    assert lost("final check rejected 'w2': 1.002x, but the 95% lower bound 1.000x is within "
                "noise") == FINAL_REJECTED
    assert held_back(_result("a", history=[ok])) == "candidates verified but not faster"
    untimed = HistoryEntry("h", "rules", "x", Status.OK, None, "no timings to compare")
    nan = HistoryEntry("g", "rules", "y", Status.OK, float("nan"), "no timings to compare")
    assert held_back(_result("a", history=[untimed, nan])) == NOT_TIMED
    assert held_back(_result("a", history=[untimed, ok])) == "candidates verified but not faster"


# ---------------------------------------------------------------- baseline: device OOM retried alone
from types import SimpleNamespace  # noqa: E402

from tritonforge.bench.baseline import RunCheck, out_of_memory, retry_alone  # noqa: E402
from tritonforge.model import Case, CaseRole, Failure, SpecCall, Task  # noqa: E402


def _task():
    call = SpecCall("f")
    cases = (Case("t", CaseRole.CORRECTNESS, call),) + tuple(
        Case(f"p{i}", CaseRole.PERFORMANCE, call) for i in range(4))
    return Task("k", "x = 1\n", ("f",), cases, "test")


class _AloneEvaluator:
    """Answers an alone re-run: ``fails`` are the case ids that still fail there."""

    def __init__(self, fails=()):
        self.fails, self.asked = set(fails), []

    def evaluate(self, task, variants, *, purpose, case_ids, **kw):
        self.asked.append((purpose, tuple(case_ids)))
        failures = tuple(Failure(Status.OOM, "CUDA out of memory", case_id=c)
                         for c in case_ids if c in self.fails)
        return SimpleNamespace(results=[SimpleNamespace(failure=None, case_failures=failures)])


CUDA_OOM = "oom [p1 seed 0]: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
HOST_OOM = "oom [p2]: host memory over 16.0 GiB during run of case p2: killed"


def test_out_of_memory_covers_the_device_the_host_watch_and_cases_not_run_after_it():
    assert out_of_memory(CUDA_OOM) and out_of_memory(HOST_OOM)
    assert out_of_memory("not run: " + HOST_OOM)
    assert not out_of_memory("crash [p1]: an illegal memory access")


def test_cases_out_of_memory_beside_other_workers_are_retried_alone():
    crash = "crash [p3 seed 0]: an illegal memory access was encountered"
    check = RunCheck("k", True, "", ("p0",), (("p1", CUDA_OOM), ("p2", HOST_OOM), ("p3", crash)), 1.0)
    ev = _AloneEvaluator(fails={"p2"})
    after = retry_alone(_task(), check, ev)
    assert ev.asked == [("baseline-run-alone", ("p1", "p2"))]     # memory only, not the crash
    assert after.perf_ok == ("p0", "p1") and set(dict(after.perf_failed)) == {"p2", "p3"}


def test_a_case_that_still_fails_alone_stays_failed_and_a_test_section_oom_is_retried():
    check = RunCheck("k", False, "oom [t seed 0]: OutOfMemoryError: CUDA out of memory", ("p0",),
                     (("p1", CUDA_OOM),), 1.0)
    ev = _AloneEvaluator(fails={"p1"})
    after = retry_alone(_task(), check, ev)
    assert ev.asked[0] == ("baseline-test-alone", ("t",)) and after.test_ok
    assert after.perf_ok == ("p0",) and "p1" in dict(after.perf_failed)


class _DiesAt:
    """A worker that runs the cases in order and dies of host memory at ``culprit``."""

    def __init__(self, culprit):
        self.culprit = culprit

    def evaluate(self, task, variants, *, purpose, case_ids, **kw):
        if purpose == "baseline-test":
            return SimpleNamespace(results=[SimpleNamespace(failure=None, case_failures=())])
        failure = Failure(Status.OOM, "host memory over 24.0 GiB during run of case", case_id=self.culprit)
        return SimpleNamespace(results=[SimpleNamespace(failure=failure, case_failures=())])


def test_cases_before_an_out_of_memory_death_count_as_run():
    from tritonforge.bench.baseline import check_runnable

    check = check_runnable(_task(), _DiesAt("p1"))
    failed = dict(check.perf_failed)
    assert check.perf_ok == ("p0",) and set(failed) == {"p1", "p2", "p3"}
    assert failed["p2"].startswith("not run: oom") and "host memory" in failed["p1"]


def test_baselines_of_an_older_timing_revision_are_timed_again():
    from tritonforge.bench.baseline import BaselineRecord, current
    from tritonforge.model.serialize import dumps, loads
    from tritonforge.runtime.timing import TIMING_REVISION

    new = BaselineRecord("k", "test", True, True, "", (), 1.0, "cuda", TIMING_REVISION)
    assert current(new) and not current(None)
    stored_before = dumps(new).replace(f'"timing_revision": {TIMING_REVISION}', '"x": 0')
    assert not current(loads(stored_before))          # no revision field: taken again


def test_the_frozen_subset_is_the_rule_applied_to_the_committed_runnable_check():
    """bench/results/subset-40.txt must be what choose_subset gives on the committed list of
    records the H100 runnable check found runnable, so the frozen list stays the documented rule's
    output, not a hand-picked one."""
    from pathlib import Path

    import pytest

    from tritonforge.tasks.tritonbench import default_data_dir, load_records

    def names(path):
        lines = path.read_text().splitlines()
        return [line.strip() for line in lines if line.strip() and not line.startswith("#")]

    results = Path(__file__).resolve().parents[2] / "bench/results"
    data = default_data_dir()
    if data is None:
        pytest.skip("TritonBench-G data not found (TRITONFORGE_TRITONBENCH)")
    runnable = names(results / "runnable-h100-2026-11-23.txt")
    records = load_records(data)
    expected = choose_subset([(n, records[n].category) for n in runnable if n in records], 40)
    assert len(runnable) == 124
    assert names(results / "subset-40.txt") == expected


def test_a_sweep_record_stands_in_for_the_optimizers_first_timing_only_when_it_fits():
    from tritonforge.bench.baseline import BaselineRecord, CaseBaseline, as_known_baseline
    from tritonforge.runtime.timing import TIMING_REVISION

    task = _task()
    perf = [c.id for c in task.performance_cases]
    cases = (CaseBaseline(perf[0], True, 0.5, 0.01), CaseBaseline(perf[1], False, error="oom")) + \
        tuple(CaseBaseline(c, True, 1.0, 0.01) for c in perf[2:])
    rec = BaselineRecord(task.name, "tb", True, True, "", cases, 3.0, "cuda", TIMING_REVISION)
    known = as_known_baseline(rec, task)
    assert [t.case_id for t in known.timings] == [perf[0], *perf[2:]]
    assert known.timings[0].median_ms == 0.5
    assert [f.case_id for f in known.case_failures] == [perf[1]]
    assert known.hash == task.source_hash
    from dataclasses import replace as _replace
    assert as_known_baseline(None, task) is None
    assert as_known_baseline(_replace(rec, timing_revision=TIMING_REVISION - 1), task) is None
    assert as_known_baseline(_replace(rec, device="cpu"), task) is None
    assert as_known_baseline(_replace(rec, runnable=False), task) is None
    assert as_known_baseline(_replace(rec, cases=cases[:1]), task) is None      # other cases


def test_the_optimizer_takes_the_known_baseline_instead_of_timing_the_original(tmp_path):
    from tritonforge.config import Settings
    from tritonforge.model import Failure, Status, VariantResult
    from tritonforge.search.loop import Optimizer

    class GpuTimer:
        device = "cuda"

        def evaluate(self, *a, **k):
            raise AssertionError("the original was timed again")

    task = _task()
    failed = tuple(Failure(Status.RUNTIME_ERROR, "oom", case_id=c.id) for c in task.performance_cases)
    known = VariantResult("original", task.source_hash, Status.OK, case_failures=failed)
    result = Optimizer(task, Settings(), [GpuTimer()], [], None, known_baseline=known).run()
    assert result.stop_reason == "the original runs on no performance case"
    assert any("baseline sweep" in n for n in result.notes)
    cpu = GpuTimer()
    cpu.device = "cpu"
    assert Optimizer(task, Settings(), [cpu], [], None, known_baseline=known).known_baseline is None


def test_rewarm_takes_the_quickest_earlier_checks_that_fit_a_share_of_the_budget():
    from tritonforge.bench.baseline import rewarm_selection

    walls = {"slow": 300.0, "a": 90.0, "b": 100.0, "c": 120.0}
    assert rewarm_selection(walls, 2, 500.0, 0.35) == ["a", "b", "c"]     # 310 of 350 s
    assert rewarm_selection(walls, 1, 500.0, 0.35) == ["a"]               # b would make 190 of 175 s
    assert rewarm_selection(walls, 8, None, 0.35) == ["a", "b", "c", "slow"]


def test_a_record_checked_by_an_earlier_process_is_checked_again_and_timed_without_the_fit_rule(
        tmp_path, monkeypatch):
    """Triton's cache is gone with the machine: the earlier check is re-run side by side (it
    compiles the kernels), then the record is timed even though its earlier wall time was more
    than the budget left; a record not re-warmed still waits for a later run."""
    import tritonforge.bench.baseline as baseline
    from dataclasses import replace as dc_replace
    from tritonforge.store import RunStore

    tasks = [dc_replace(_task(), name=n) for n in ("warm", "cold")]
    checked, timed = [], []

    def fake_check(task, evaluator, max_restarts=4):
        checked.append(task.name)
        return RunCheck(task.name, True, "", ("p0",), (), 5.0)

    def fake_time(task, check, evaluator):
        timed.append(task.name)
        return baseline.BaselineRecord(task.name, "test", True, True, "", (), 1.0, "cuda",
                                       baseline.TIMING_REVISION)

    monkeypatch.setattr(baseline, "check_runnable", fake_check)
    monkeypatch.setattr(baseline, "time_baseline", fake_time)
    monkeypatch.setattr(baseline, "retry_alone", lambda task, check, ev: check)
    with RunStore(tmp_path / "s.sqlite") as store:
        store.put_record("baseline-run", "warm", RunCheck("warm", True, "", ("p0",), (), 60.0))
        store.put_record("baseline-run", "cold", RunCheck("cold", True, "", ("p0",), (), 900.0))
        records, left = baseline.run_baseline(
            tasks, lambda i: SimpleNamespace(close=lambda: None), store, jobs=2, budget_s=100.0, rewarm_share=0.35)
    assert checked == ["warm"]               # 60 s fits 2 x 100 x 0.35; 900 s does not
    assert timed == ["warm"] and left == ["cold"]


def test_a_test_section_or_case_that_made_no_progress_beside_other_workers_is_retried_alone():
    timeout = "timeout [test]: no progress for 180 s during run of case test: killed"
    check = RunCheck("k", False, timeout, ("p0",),
                     (("p1", "timeout [p1]: no progress for 180 s"), ("p2", "crash [p2]: illegal")), 1.0)
    ev = _AloneEvaluator()
    after = retry_alone(_task(), check, ev)
    assert ev.asked == [("baseline-test-alone", ("t",)), ("baseline-run-alone", ("p1",))]
    assert after.test_ok and after.perf_ok == ("p0", "p1") and set(dict(after.perf_failed)) == {"p2"}


def test_a_summary_with_no_worker_started_still_names_the_versions():
    import triton

    from tritonforge.bench.commands import _environment

    env = _environment(SimpleNamespace(worker=SimpleNamespace(info=None), device="cuda"))
    assert env["triton"] == triton.__version__ and env["torch"] and env["device"] == "cuda"


def test_redo_of_a_record_not_in_the_run_is_refused(tmp_path, capsys):
    from tritonforge.cli import main

    code = main(["bench", "optimize", "--device", "cpu", "--names", "add_example", "--redo", "nope",
                 "--run-dir", str(tmp_path), "--budget", "0", "--records", str(tmp_path / "r.jsonl"),
                 "--latest", str(tmp_path / "LATEST.json")])
    assert code != 0 and "--redo names records not in the pass: nope" in capsys.readouterr().err
