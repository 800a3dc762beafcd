"""The re-verification after a pass: fresh seeds on every case, a fresh worker; a wrong accepted
kernel is counted in wrong_accepted."""

import dataclasses
from pathlib import Path

from tritonforge.bench.reverify import reverify_record, with_fresh_seeds
from tritonforge.bench.records import PassRecord, RecordRef
from tritonforge.config import Settings
from tritonforge.model import Case, CaseRole, SpecCall, Task

SIN = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
SPEC = '''
entry = "sin_triton"
seeds = 1
[[case]]
id = "c"
args = [{ tensor = [257] }]
'''


def test_fresh_seeds_are_new_for_every_case():
    call = SpecCall("f")
    task = Task("k", "x = 1\n", ("f",), (Case("a", CaseRole.CORRECTNESS, call, seeds=(0, 1)),
                                          Case("b", CaseRole.PERFORMANCE, call)), "test")
    draws = iter([0, 5, 5, 6, 7, 8])                 # 0 is case a's own, 5 twice
    fresh = with_fresh_seeds(task, lambda: next(draws), per_case=2)
    assert [c.seeds for c in fresh.cases] == [(5, 6), (7, 8)]
    assert with_fresh_seeds(task).cases[0].seeds != with_fresh_seeds(task).cases[0].seeds


def _record(source):
    return PassRecord("sin", "e", "s", "s", "success", 2.0, 1.9, 10.0, 150.0, 3, 1, "", "",
                      "h rules: x", source)


def test_a_wrong_accepted_kernel_fails_and_a_right_one_passes(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    ref = RecordRef("sin", path=str(SIN), spec=str(spec))
    settings = Settings(device="cpu", case_timeout_s=120)
    right = SIN.read_text().replace("BLOCK_SIZE = 4\n", "BLOCK_SIZE = 64\n")
    assert right != SIN.read_text()
    ok = reverify_record(_record(right), ref, settings, tmp_path / "a", device="cpu")
    assert ok.ok and "fresh seeds" in ok.note
    wrong = right.replace("tl.sin(", "tl.cos(")
    assert wrong != right
    bad = reverify_record(dataclasses.replace(_record(wrong)), ref, settings, tmp_path / "b",
                          device="cpu")
    assert not bad.ok and bad.note


UNDEFINED_SPEC = '''
entry = "sin_triton"
seeds = 1
[[case]]
id = "defined"
args = [{ tensor = [257] }]
[[case]]
id = "undefined"
args = [{ tensor = [300] }]
'''


def test_a_case_where_the_original_does_not_reproduce_itself_judges_nothing(tmp_path):
    """On a case whose result the original does not define (here: one element drawn from the OS
    when the module is imported, the same for each of its calls, as an unmasked read past a
    tensor gives whatever the allocator placed there), the accepted kernel, imported apart,
    differs from the original; the original run as its own candidate differs too, so the case
    judges nothing and the kernel stands. A kernel wrong where the original is defined is
    still wrong."""
    original = SIN.read_text().replace(
        "    return out\n",
        "    if n_elements == 300:\n        out[0] = _UNDEFINED\n    return out\n", 1).replace(
        "import torch\n", "import os\n\nimport torch\n\n"
        "_UNDEFINED = float(int.from_bytes(os.urandom(6), 'little'))\n", 1)
    assert original != SIN.read_text()
    path = tmp_path / "sin_undefined.py"
    path.write_text(original)
    spec = tmp_path / "spec.toml"
    spec.write_text(UNDEFINED_SPEC)
    ref = RecordRef("sin", path=str(path), spec=str(spec))
    settings = Settings(device="cpu", case_timeout_s=120)
    right = original.replace("BLOCK_SIZE = 4\n", "BLOCK_SIZE = 64\n")
    ok = reverify_record(_record(right), ref, settings, tmp_path / "a", device="cpu")
    assert ok.ok and "undefined" in ok.note and "judge nothing" in ok.note, ok.note
    wrong = right.replace("tl.sin(", "tl.cos(")
    bad = reverify_record(_record(wrong), ref, settings, tmp_path / "b", device="cpu")
    assert not bad.ok and bad.note


def _fake_evaluator(answer):
    """An ``Evaluator`` class for ``bench.reverify`` whose every request is answered by
    ``answer(task, purpose)``: a dict from variant name to its ``VariantResult``."""
    from types import SimpleNamespace

    class FakeEvaluator:
        device = "cuda"

        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def evaluate(self, task, variants, *, purpose, **kw):
            return SimpleNamespace(result=answer(task, purpose).__getitem__)
    return FakeEvaluator


def test_where_the_verdict_saw_the_original_vary_the_twin_runs_until_it_fails(monkeypatch):
    """The accepted kernel's NaN on a case whose verdict notes the original differing from
    itself: a twin that reproduces itself (over the whole sequence, then alone) is run again
    (up to three runs in all); the third reads NaN too, so the case judges nothing. Without
    such a note the two runs decide."""
    from tritonforge.bench import reverify
    from tritonforge.model import Mismatch, Status, Verdict, VariantResult
    from tritonforge.search.blame import TWIN_RUNS_WHERE_IT_VARIES

    call = SpecCall("f")
    task = Task("k", "x = 1\n", ("f",), (Case("test", CaseRole.CORRECTNESS, call),), "test")
    monkeypatch.setattr(reverify, "load_ref", lambda ref: task)

    def nan(name, notes=()):
        return VariantResult(name, "h", Status.MISMATCH, verdict=Verdict(
            False, mismatches=(Mismatch("test", 0, "return", "nan", "candidate nan"),),
            notes=notes))

    def run(note, twin_outcomes):
        twins = iter(twin_outcomes)
        asked = []

        def answer(task, purpose):
            asked.append(purpose)
            if purpose == "reverify":
                return {"original": VariantResult("original", "o", Status.OK),
                        "accepted": nan("accepted", note)}
            return {"twin": nan("twin") if next(twins) else VariantResult("twin", "o", Status.OK)}

        monkeypatch.setattr(reverify, "Evaluator", _fake_evaluator(answer))
        verdict = reverify_record(_record("x = 2\n"), RecordRef("k"), Settings(), Path("/tmp/x"))
        return verdict, asked.count("reverify-twin")

    varies = ("test seed 2 return: 1 elements differ, the original differs from itself on 1",)
    ok, twins = run(varies, [False, False, True])
    assert ok.ok and "judge nothing" in ok.note and twins == TWIN_RUNS_WHERE_IT_VARIES
    wrong, twins = run(varies, [False, False, False])
    assert not wrong.ok and twins == TWIN_RUNS_WHERE_IT_VARIES
    wrong, twins = run((), [False, False, True])
    assert not wrong.ok and twins == 2
    ok, twins = run((), [True])
    assert ok.ok and twins == 1


def test_the_twin_runs_over_the_whole_sequence_the_accepted_kernel_ran(monkeypatch):
    """What an undefined original reads depends on what ran before it: the accepted kernel
    reads NaN on the test section after the performance case; the twin alone on the test
    section reproduces itself, but the twin over the same sequence (performance case included,
    in order) reads NaN there too, so the test section judges nothing. A twin that reproduces
    itself either way leaves the kernel wrong."""
    from tritonforge.bench import reverify
    from tritonforge.model import Mismatch, Status, Verdict, VariantResult

    call = SpecCall("f")
    task = Task("k", "x = 1\n", ("f",), (Case("test", CaseRole.CORRECTNESS, call),
                                          Case("perf", CaseRole.PERFORMANCE, call)), "test")
    monkeypatch.setattr(reverify, "load_ref", lambda ref: task)

    def nan(name):
        return VariantResult(name, "h", Status.MISMATCH, verdict=Verdict(
            False, mismatches=(Mismatch("test", 0, "return", "nan", "candidate nan"),)))

    def run(history_matters):
        seen = []

        def answer(task, purpose):
            ids = tuple(c.id for c in task.cases)
            seen.append((purpose, ids))
            if purpose == "reverify":
                return {"original": VariantResult("original", "o", Status.OK),
                        "accepted": nan("accepted")}
            return {"twin": nan("twin") if history_matters and "perf" in ids
                    else VariantResult("twin", "o", Status.OK)}

        monkeypatch.setattr(reverify, "Evaluator", _fake_evaluator(answer))
        return reverify_record(_record("x = 2\n"), RecordRef("k"), Settings(), Path("/tmp/x")), seen

    ok, seen = run(history_matters=True)
    assert ok.ok and "judge nothing" in ok.note, ok.note
    assert seen[1] == ("reverify-twin", ("test", "perf"))
    wrong, seen = run(history_matters=False)
    assert not wrong.ok
    assert [ids for purpose, ids in seen if purpose == "reverify-twin"] == [("test", "perf"),
                                                                             ("test",)]
