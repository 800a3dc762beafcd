"""The original's side of the bare first calls is made once per (case, seed) in a process
(verify.shipped_checks._ORIGINAL_BARE): a second candidate's first calls cost the original no
call, and they still judge it."""

from __future__ import annotations

import pytest

from standin import build
from test_catalogue import FAMILIES, HERE, load
from tritonforge.verify import VerifyOptions, reasons, verify
from tritonforge.verify import shipped_checks


def counting_scale(module, calls):
    """``module.scale`` wrapped to append to ``calls`` at each call of it."""
    fn = module.scale

    def scale(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)
    module.scale = scale
    return module


@pytest.fixture
def family():
    return FAMILIES["scale"][1]


@pytest.fixture(autouse=True)
def no_bounds_probe(monkeypatch):
    """The original's calls counted here are the bare checks' and the guarded checks'; the
    bounds probe's (verify.bounds, three a case, once a process) are tested on their own."""
    from tritonforge.verify import bounds
    monkeypatch.setattr(shipped_checks, "outside", lambda *a, **k: bounds.Outside())


def test_a_second_candidate_costs_the_original_no_bare_call_and_is_still_judged(family):
    calls: list[int] = []
    ref = counting_scale(load(HERE / "scale_ref.py"), calls)
    bare_only = VerifyOptions(nonce=5, catch_errors=True, recheck=False, shipped_check=False)
    first = verify(ref, load(HERE / "scale_honest_warps.py"), family, build, options=bare_only)
    assert first.passed, first.summary(5)
    per_verification = len(calls)
    assert shipped_checks._ORIGINAL_BARE[ref]            # kept for the next candidate
    calls.clear()
    again = verify(ref, load(HERE / "scale_honest_warps.py"), family, build, options=bare_only)
    assert again.passed
    # the guarded checks still run the original; the bare first calls (three a case) do not
    picked = min(shipped_checks.BARE_FIRST_CASES, len(family))
    assert len(calls) == per_verification - 3 * picked
    cheat = verify(ref, load(HERE / "scale_watch_latch.py"), family, build, options=bare_only)
    assert "cheat:watched" in reasons(cheat)


def test_an_original_failing_its_bare_call_is_remembered_and_judges_nothing(family):
    calls: list[int] = []
    ref = load(HERE / "scale_ref.py")
    real = ref.scale

    def fails_bare(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the original's own failure")
        return real(*args, **kwargs)
    ref.scale = fails_bare
    options = VerifyOptions(nonce=6, catch_errors=True, recheck=False, shipped_check=False)
    verify(ref, load(HERE / "scale_honest_warps.py"), family[:1], build, options=options)
    kept = shipped_checks._ORIGINAL_BARE[ref]
    assert [k.failed for k in kept.values()] == [True]


def test_cases_that_share_an_id_are_kept_apart():
    """Case ids repeat across the case sets one process verifies on (a generated case's draft
    and the case itself): what is kept is the case's, not the id's."""
    from standin import T, spec_case
    ref = load(HERE / "scale_ref.py")
    options = VerifyOptions(nonce=8, catch_errors=True, recheck=False, shipped_check=False)
    for n in (13, 11):
        cases = [spec_case("same-id", "scale", T(n), 2.0)]
        got = verify(ref, load(HERE / "scale_honest_warps.py"), cases, build, options=options)
        assert got.passed, got.summary(5)


def test_a_case_too_large_to_keep_is_made_again(family, monkeypatch):
    monkeypatch.setattr(shipped_checks, "BARE_KEEP_BYTES", 64)
    ref = load(HERE / "scale_ref.py")
    options = VerifyOptions(nonce=9, catch_errors=True, recheck=False, shipped_check=False)
    got = verify(ref, load(HERE / "scale_honest_warps.py"), family, build, options=options)
    assert got.passed
    assert not shipped_checks._ORIGINAL_BARE.get(ref)
    cheat = verify(ref, load(HERE / "scale_watch_latch.py"), family, build, options=options)
    assert "cheat:watched" in reasons(cheat)
