"""A case where the original itself crashes when run after itself cannot judge candidates."""

from types import SimpleNamespace

from tritonforge.model import Candidate, Failure, Status, VariantResult
from tritonforge.search.stages import RoundStages

ORIGINAL = Candidate("x = 1\n", "original")


def _result(status, case_id=None):
    failure = Failure(status, "illegal memory access", case_id=case_id) if status is not Status.OK else None
    return VariantResult("candidate", "h", status, failure=failure)


def _optimizer(original_crashes_on: set[str]):
    asked = []

    def evaluate(task, variants, *, purpose, case_ids, **kw):
        asked.append((purpose, case_ids, variants[1].source == ORIGINAL.source))
        # a verification stops at the first case that fails
        bad = next((c for c in case_ids if c in original_crashes_on), None)
        return SimpleNamespace(result=lambda name: _result(Status.CRASH, bad) if bad
                               else _result(Status.OK))

    opt = RoundStages.__new__(RoundStages)
    opt.timer = SimpleNamespace(evaluate=evaluate)
    return opt, asked


def test_only_cases_the_original_also_crashes_on_are_found_unsafe():
    cands = [Candidate(f"x = {i}\n", "rules:t") for i in range(3)]
    verified = {cands[0].hash: _result(Status.CRASH, "perf-01"),
                cands[1].hash: _result(Status.CRASH, "perf-02"),
                cands[2].hash: _result(Status.MISMATCH)}
    opt, asked = _optimizer({"perf-01"})
    unsafe = opt._cases_the_original_crashes(None, ORIGINAL, cands, verified, ("t0", "perf-01", "perf-02"))
    assert unsafe == {"perf-01"}                       # perf-02's crash stays the candidate's
    # the twin first over the candidates' whole sequence (it stops at perf-01), then perf-02 alone
    assert [a[1] for a in asked] == [("t0", "perf-01", "perf-02"), ("perf-02",)]
    assert all(purpose == "original-twice" and twin for purpose, _, twin in asked)


def test_nothing_is_checked_when_no_candidate_crashed():
    cands = [Candidate("x = 2\n", "rules:t")]
    opt, asked = _optimizer({"perf-01"})
    assert opt._cases_the_original_crashes(None, ORIGINAL, cands, {cands[0].hash: _result(Status.OK)},
                                           ("perf-01",)) == set()
    assert asked == []


def test_a_case_where_the_reference_broke_the_context_is_unsafe_without_another_run():
    """SKIPPED naming a case: the original crashed there as the reference, before the candidate
    was compared (fused_rotary_embedding, H100, 2026-11-23). A twin whose reference crashes counts
    as the original crashing too."""
    cands = [Candidate(f"x = {i}\n", "rules:t") for i in range(3)]
    verified = {cands[0].hash: _result(Status.SKIPPED, "perf-01"),
                cands[1].hash: _result(Status.SKIPPED, "perf-01"),
                cands[2].hash: _result(Status.CRASH, "perf-03")}
    opt, asked = _optimizer(set())
    twin_status = {"perf-03": Status.SKIPPED}

    def evaluate(task, variants, *, purpose, case_ids, **kw):
        asked.append((purpose, case_ids, True))
        bad = next((c for c in case_ids if c in twin_status), None)
        return SimpleNamespace(result=lambda name: _result(twin_status[bad], bad) if bad
                               else _result(Status.OK))

    opt.timer = SimpleNamespace(evaluate=evaluate)
    unsafe = opt._cases_the_original_crashes(None, ORIGINAL, cands, verified, ("perf-01", "perf-03"))
    assert unsafe == {"perf-01", "perf-03"}
    assert [a[1] for a in asked] == [("perf-01", "perf-03")]   # one sequence: perf-01 needed none


def _mismatch(case_id, cheat=None):
    from tritonforge.model import Cheat, Mismatch, Verdict

    mismatches = () if cheat else (Mismatch(case_id, 0, "return", "nan", "NaN where the original has a number"),)
    violations = (Cheat(cheat, "wrong on a re-run", case_id, 1),) if cheat else ()
    status = Status.CHEAT if cheat else Status.MISMATCH
    return VariantResult("candidate", "h", status,
                         verdict=Verdict(False, mismatches=mismatches, violations=violations))


def test_a_case_where_the_original_does_not_reproduce_itself_is_unsafe():
    """attention_kernel (H100, 2026-11-23): the perf script launches 64-row tiles on 16-row
    tensors, so the original reads and writes past them and every candidate "differs" in NaNs
    there. The original, run after itself as a candidate is, differs too: that case is dropped;
    a case where the original reproduces itself keeps the candidate's mismatch."""
    cands = [Candidate(f"x = {i}\n", "rules:t") for i in range(4)]
    verified = {cands[0].hash: _mismatch("perf-02"), cands[1].hash: _mismatch("perf-03", cheat="rerun"),
                cands[2].hash: _mismatch("perf-05"), cands[3].hash: _mismatch("perf-06", cheat="no_launch")}
    asked = []
    fails = {"perf-02", "perf-03"}

    def evaluate(task, variants, *, purpose, case_ids, **kw):
        asked.append(case_ids)
        bad = next((c for c in case_ids if c in fails), None)
        return SimpleNamespace(result=lambda name: _mismatch(bad) if bad else _result(Status.OK))

    opt = RoundStages.__new__(RoundStages)
    opt.timer = SimpleNamespace(evaluate=evaluate)
    ids = ("perf-02", "perf-03", "perf-05", "perf-06")
    assert opt._cases_the_original_crashes(None, ORIGINAL, cands, verified, ids) == {"perf-02", "perf-03"}
    # the sequence stops at perf-02; the suspects after it run alone. A no_launch cheat is about
    # how the candidate computes: its case (perf-06) is not run again
    assert asked == [ids, ("perf-03",), ("perf-05",)]
    # the verdicts are remembered: a later round runs nothing again for the same cases
    asked.clear()
    assert opt._cases_the_original_crashes(None, ORIGINAL, cands, verified, ids) == {"perf-02", "perf-03"}
    assert asked == []


def test_blamed_cases_name_only_where_values_went_wrong():
    from tritonforge.search.blame import blamed_cases

    assert blamed_cases(_result(Status.OK)) == set()
    assert blamed_cases(_result(Status.CRASH, "perf-01")) == {"perf-01"}
    assert blamed_cases(_result(Status.CRASH)) == set()          # no case named: nothing excused
    assert blamed_cases(_result(Status.COMPILE_ERROR, "perf-01")) == set()
    assert blamed_cases(_mismatch("perf-04")) == {"perf-04"}
    assert blamed_cases(_mismatch("perf-04", cheat="rerun")) == {"perf-04"}
    assert blamed_cases(_mismatch("perf-04", cheat="library_op")) == set()


def test_the_twin_runs_the_candidates_sequence_first():
    """attention_kernel_aligned (H100, 2026-11-23): the original fails perf-03 only after the cases
    before it; alone it reproduces itself. The twin over the whole sequence finds it, and a case
    the sequence passes is settled without another run."""
    cands = [Candidate(f"x = {i}\n", "rules:t") for i in range(2)]
    verified = {cands[0].hash: _mismatch("perf-03"), cands[1].hash: _mismatch("perf-04")}
    asked = []

    def evaluate(task, variants, *, purpose, case_ids, **kw):
        asked.append(case_ids)
        after_others = len(case_ids) > 1 and "perf-03" in case_ids
        return SimpleNamespace(result=lambda name: _mismatch("perf-03") if after_others
                               else _result(Status.OK))

    opt = RoundStages.__new__(RoundStages)
    opt.timer = SimpleNamespace(evaluate=evaluate)
    ids = ("perf-00", "perf-03", "perf-04")
    assert opt._cases_the_original_crashes(None, ORIGINAL, cands, verified, ids) == {"perf-03"}
    assert asked == [ids, ("perf-04",)]        # perf-04 was after the sequence stopped


def test_a_passing_sequence_settles_every_suspect():
    cands = [Candidate("x = 1\n", "rules:t")]
    verified = {cands[0].hash: _mismatch("perf-04")}
    asked = []
    opt = RoundStages.__new__(RoundStages)
    opt.timer = SimpleNamespace(evaluate=lambda task, variants, *, purpose, case_ids, **kw:
                                asked.append(case_ids) or SimpleNamespace(result=lambda n: _result(Status.OK)))
    assert opt._cases_the_original_crashes(None, ORIGINAL, cands, verified, ("perf-04",)) == set()
    assert opt._cases_the_original_crashes(None, ORIGINAL, cands, verified, ("perf-04",)) == set()
    assert asked == [("perf-04",)]             # remembered: the second round runs nothing


def _varying(case_id):
    """A candidate's NaN on ``case_id`` beside a note that the original differed from itself
    there on another seed (verify.differential's wording)."""
    from tritonforge.model import Mismatch, Verdict

    note = (f"{case_id} seed 2 return['test_case_2']['grad_q']: 1 elements differ, the original "
            "differs from itself on 1")
    return VariantResult("candidate", "h", Status.MISMATCH, verdict=Verdict(
        False, mismatches=(Mismatch(case_id, 0, "return", "nan", "candidate nan"),), notes=(note,)))


def test_a_twin_that_passed_once_runs_again_where_a_verdict_saw_the_original_vary():
    """parallel_attention (H100 x4, 2026-11-27): its test section read NaN in some runs of the
    original and numbers in others; one twin run passed and every candidate was refused there.
    Where a candidate's verdict notes the original differing from itself on the case, the twin
    runs again there (at most three runs in all); where nothing says so, the first passing twin
    settles the case."""
    from tritonforge.search.blame import original_varies
    from tritonforge.search.blame import TWIN_RUNS_WHERE_IT_VARIES

    assert original_varies(_varying("test")) == {"test"}
    assert original_varies(_mismatch("test")) == set()
    outcomes = iter([Status.OK, Status.OK, Status.MISMATCH])     # the third twin run reads NaN
    asked = []

    def evaluate(task, variants, *, purpose, case_ids, **kw):
        asked.append(case_ids)
        status = next(outcomes)
        return SimpleNamespace(result=lambda name: _result(Status.OK) if status is Status.OK
                               else _mismatch(case_ids[0]))

    opt = RoundStages.__new__(RoundStages)
    opt.timer = SimpleNamespace(evaluate=evaluate)
    cand = Candidate("x = 2\n", "rules:t")
    assert opt._cases_the_original_crashes(None, ORIGINAL, [cand], {cand.hash: _varying("test")},
                                           ("test",)) == {"test"}
    assert len(asked) == TWIN_RUNS_WHERE_IT_VARIES == 3
    assert opt._cases_the_original_crashes(None, ORIGINAL, [cand], {cand.hash: _varying("test")},
                                           ("test",)) == {"test"}
    assert len(asked) == 3                                  # settled: nothing runs again

    quiet = RoundStages.__new__(RoundStages)
    quiet_asked = []
    quiet.timer = SimpleNamespace(evaluate=lambda task, variants, *, purpose, case_ids, **kw:
                                  quiet_asked.append(case_ids) or SimpleNamespace(
                                      result=lambda name: _result(Status.OK)))
    for _ in range(3):
        assert quiet._cases_the_original_crashes(None, ORIGINAL, [cand], {cand.hash: _mismatch("test")},
                                                 ("test",)) == set()
    assert len(quiet_asked) == 1                            # no note of variation: once settles it


def test_a_varying_case_the_twin_always_reproduces_stays_after_three_runs():
    from tritonforge.search.blame import TWIN_RUNS_WHERE_IT_VARIES

    asked = []
    opt = RoundStages.__new__(RoundStages)
    opt.timer = SimpleNamespace(evaluate=lambda task, variants, *, purpose, case_ids, **kw:
                                asked.append(case_ids) or SimpleNamespace(
                                    result=lambda name: _result(Status.OK)))
    cand = Candidate("x = 2\n", "rules:t")
    for _ in range(2):
        assert opt._cases_the_original_crashes(None, ORIGINAL, [cand], {cand.hash: _varying("test")},
                                               ("test",)) == set()
    assert len(asked) == TWIN_RUNS_WHERE_IT_VARIES        # the candidate's NaN stays its own
