"""The original's guarded runs kept across the candidates a process checks
(verify.original_runs): a second candidate costs the original fewer calls, a wrong one is still
caught on the kept runs, the runs meant to see the original vary are never kept, and the byte
budget holds."""

from __future__ import annotations

from standin import T, build, spec_case
from test_bare_first_memo import counting_scale as _counting
from test_catalogue import FAMILIES, HERE, load
from tritonforge.verify import VerifyOptions, reasons, verify
from tritonforge.verify.original_runs import OriginalRuns, run_bytes
from tritonforge.verify.runner import Run

import torch


def _options(kept, nonce=11):
    # the guarded checks alone: the bare first calls keep their own (verify.shipped_checks)
    return VerifyOptions(nonce=nonce, catch_errors=True, first_calls=False, shipped_check=False,
                         original_runs=kept)


def test_a_second_candidate_reuses_the_original_s_runs_and_a_wrong_one_is_still_caught():
    cases = FAMILIES["scale"][1]
    calls: list[int] = []
    ref = _counting(load(HERE / "scale_ref.py"), calls)
    kept = OriginalRuns()
    first = verify(ref, load(HERE / "scale_honest_warps.py"), cases, build, options=_options(kept))
    assert first.passed, first.summary(5)
    alone = len(calls)
    calls.clear()
    second = verify(ref, load(HERE / "scale_honest_warps.py"), cases, build, options=_options(kept))
    assert second.passed and kept.hits > 0
    assert len(calls) == 0, "every guarded run of the original came from the kept ones"
    wrong = verify(ref, load(HERE / "scale_return_input.py"), cases, build, options=_options(kept))
    assert not wrong.passed and reasons(wrong)
    assert alone > 0


def test_runs_that_see_the_original_vary_are_never_kept(tmp_path):
    """A candidate that differs makes the verifier run the original again to see its own
    variation (verify.differential._within_self_variation): those runs are new each time."""
    cases = [spec_case("n", "scale", T(500), 2.0)]
    calls: list[int] = []
    ref = _counting(load(HERE / "scale_ref.py"), calls)
    off = tmp_path / "scale_off.py"
    off.write_text((HERE / "scale_ref.py").read_text().replace(
        "mask=mask) * a, mask=mask)", "mask=mask) * a * 1.01, mask=mask)"))
    kept = OriginalRuns()
    verify(ref, load(off), cases, build, options=_options(kept))
    calls.clear()
    again = verify(ref, load(off), cases, build, options=_options(kept))
    assert "mismatch:value" in reasons(again), again.summary(5)
    assert len(calls) >= VerifyOptions().self_variation_runs   # its re-runs ran again


def test_the_byte_budget_holds_and_a_run_too_large_is_not_kept():
    kept = OriginalRuns(max_bytes=4 * 4000)          # four runs of a 1000-float result
    module = load(HERE / "scale_ref.py")

    def run(n):
        return Run(result=torch.zeros(n))
    assert run_bytes(run(1000)) == 4000
    for i in range(6):
        kept.put(module, ("k", i), run(1000))
    assert kept.get(module, ("k", 0)) is None and kept.get(module, ("k", 5)) is not None
    assert kept._total() <= kept.max_bytes
    kept.put(module, ("big",), run(1001))             # over a quarter of the budget
    assert kept.get(module, ("big",)) is None
