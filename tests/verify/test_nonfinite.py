"""NaN/Inf the original makes from finite inputs (verify.nonfinite): noted by the verifier, and a
generated case with such a note is dropped by the stability check (testgen.validate)."""

from types import SimpleNamespace

import torch

from tritonforge.model import Case, CaseRole, SpecCall, Status, Task, VariantResult, Verdict
from tritonforge.testgen.validate import check_stable
from tritonforge.verify.kinds import NONFINITE_NOTE
from tritonforge.verify.nonfinite import nonfinite_from_finite
from tritonforge.verify.poison import poison_
from tritonforge.verify.runner import Run


def test_nan_from_finite_inputs_is_counted():
    out = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    run = Run(result=out, pristine={"x": torch.ones(4)})
    assert nonfinite_from_finite(run, ()) == (2, 4)


def test_a_written_argument_counts_and_unwritten_poison_does_not():
    y = torch.zeros(6)
    poison_(y[:3])                     # never written by the original: not its NaN
    y[4] = float("nan")
    run = Run(result=None, args={"y": y}, pristine={"x": torch.ones(2), "y": torch.zeros(6)})
    assert nonfinite_from_finite(run, ("y",)) == (1, 6)
    assert nonfinite_from_finite(run, ()) is None          # y not written: not an output


def test_non_finite_inputs_or_finite_outputs_say_nothing():
    nan_in = Run(result=torch.tensor([float("nan")]), pristine={"x": torch.tensor([float("nan")])})
    assert nonfinite_from_finite(nan_in, ()) is None
    clean = Run(result=torch.tensor([1.0, 2.0]), pristine={"x": torch.ones(2)})
    assert nonfinite_from_finite(clean, ()) is None


def test_the_stability_check_drops_a_case_the_verifier_noted():
    task = Task("t", "x = 0\n", ("f",), (Case("gen-odd", CaseRole.CORRECTNESS, SpecCall("f")),
                                         Case("gen-ok", CaseRole.CORRECTNESS, SpecCall("f"))), "t")

    class Pool:
        def evaluate(self, task, variants, *, case_ids, **kw):
            cid = case_ids[0]
            notes = (f"{cid} seed 0: {NONFINITE_NOTE} (3 of 8 elements)",) if cid == "gen-odd" else ()
            verdict = Verdict(passed=True, notes=notes)
            r = VariantResult("original-again", "h", Status.OK, verdict=verdict)
            return SimpleNamespace(result=lambda name: r, results=(r,))

    got = check_stable(Pool(), task, ("gen-odd", "gen-ok"))
    assert got.kept == ("gen-ok",)
    assert [d.case_id for d in got.dropped] == ["gen-odd"]
    assert "unjudgeable" in got.dropped[0].reason


def test_the_verifier_notes_nan_the_original_makes_from_finite_inputs():
    import types

    import kernels
    from conftest import DEVICE
    from standin import T, build, spec_case
    from tritonforge.verify import VerifyOptions, verify

    def nan_tail(x):
        """add_one through a kernel, then the last element NaN (as a read past the end makes)."""
        out = torch.empty_like(x)
        kernels.add_one(x, out)
        out[-1] = float("nan")
        return out

    def module(f):
        m = types.ModuleType("variant")
        m.f = f
        return m

    options = VerifyOptions(nonce=3, catch_errors=True, check_library_ops=False)
    verdict = verify(module(nan_tail), module(nan_tail), [spec_case("c", "f", T(64))], build,
                     options=options, device=DEVICE)
    assert verdict.passed, verdict.summary()
    assert any(NONFINITE_NOTE in n and n.startswith("c seed ") for n in verdict.notes)


def test_cases_past_the_stability_deadline_are_reported_unchecked():
    task = Task("t", "x = 0\n", ("f",), (Case("gen-a", CaseRole.CORRECTNESS, SpecCall("f")),
                                         Case("gen-b", CaseRole.CORRECTNESS, SpecCall("f"))), "t")

    class Never:
        def evaluate(self, *a, **k):
            raise AssertionError("no request once the deadline has passed")

    got = check_stable(Never(), task, ("gen-a", "gen-b"), deadline=0.0)
    assert got.unchecked == ("gen-a", "gen-b") and got.kept == ("gen-a", "gen-b")
