"""An original that disagrees with itself (scatter to duplicate indices, float atomics) is judged
as another run of it would be: differences up to its own run-to-run variation are forgiven, and
only there; a candidate wrong beyond that is still rejected."""

from __future__ import annotations

import random
import types

import torch

import kernels
from standin import T, build, spec_case
from conftest import DEVICE
from tritonforge.verify import VerifyOptions
from tritonforge.verify import verify as _verify

QUIET = VerifyOptions(nonce=3, catch_errors=True, check_library_ops=False)


def verify(*args, **kwargs):
    """verify() on the session's device (the interpreter on CPU, or TRITONFORGE_VERIFY_DEVICE)."""
    kwargs.setdefault("device", DEVICE)
    return _verify(*args, **kwargs)
_rng = random.SystemRandom()       # not seeded by torch: the "nondeterminism" of the original


def _module(**functions) -> types.ModuleType:
    m = types.ModuleType("variant")
    m.__dict__.update(functions)
    return m


def _racy(x, wrong=0):
    """add_one through a kernel, then 3 elements 'won by another writer' (random each run)."""
    out = torch.empty_like(x)
    kernels.add_one(x, out)
    for i in _rng.sample(range(x.numel()), 3):
        out[i] += 1.0
    if wrong:
        out[:wrong] += 1.0
    return out


CASES = [spec_case("c", "f", T(512))]


def test_differences_within_the_originals_own_variation_are_forgiven():
    verdict = verify(_module(f=_racy), _module(f=_racy), CASES, build, options=QUIET)
    assert verdict.passed, verdict.summary()
    assert verdict.notes and "differs from itself" in verdict.notes[0]


def test_a_candidate_wrong_beyond_that_variation_is_rejected():
    bad = _module(f=lambda x: _racy(x, wrong=100))
    verdict = verify(_module(f=_racy), bad, CASES, build, options=QUIET)
    assert not verdict.passed
    assert any(m.kind in ("value", "norm") for m in verdict.mismatches)


def _add_one(x):
    out = torch.empty_like(x)
    kernels.add_one(x, out)
    return out


def _off_by_three(x):
    out = _add_one(x)
    out[:3] = -out[:3]
    return out


def test_a_deterministic_original_forgives_nothing():
    verdict = verify(_module(f=_add_one), _module(f=_off_by_three), CASES, build, options=QUIET)
    assert not verdict.passed and not verdict.notes


# ----------------------------------------------------------------------------- races, per element

CONTESTED = 40          # elements two writers race for
_calls = {"n": 0}


def _racing(x, always_b=False, never_seen=False, wrong_elsewhere=False):
    """add_one, then each contested element p gets writer A's value (+1) or writer B's (+2):
    call k lets B win where (p + k) % 8 == 0, so eight calls in a row show both writers'
    values at every contested element, and any two calls differ on 10 of the 40."""
    out = torch.empty_like(x)
    kernels.add_one(x, out)
    k = _calls["n"]
    _calls["n"] += 1
    for p in range(CONTESTED):
        b_wins = always_b or (p + k) % 8 == 0
        out[p] += 3.0 if never_seen else (2.0 if b_wins else 1.0)
    if wrong_elsewhere:
        out[CONTESTED + 7] += 5.0
    return out


def test_a_candidate_whose_differences_are_values_the_racing_original_left_there_passes():
    """B always wins in the candidate: it differs from the reference run on 35 of 40 elements,
    beyond the count bound (2 x 10 + 8), yet each is a value some run of the original left."""
    verdict = verify(_module(f=_racing), _module(f=lambda x: _racing(x, always_b=True)), CASES,
                     build, options=QUIET)
    assert verdict.passed, verdict.summary()
    assert any("left there" in n for n in verdict.notes)


def test_a_value_no_run_of_the_original_left_there_is_refused():
    never = _module(f=lambda x: _racing(x, never_seen=True))
    assert not verify(_module(f=_racing), never, CASES, build, options=QUIET).passed
    elsewhere = _module(f=lambda x: _racing(x, always_b=True, wrong_elsewhere=True))
    assert not verify(_module(f=_racing), elsewhere, CASES, build, options=QUIET).passed


def test_too_few_runs_to_see_every_value_refuses_rather_than_guesses():
    few = VerifyOptions(nonce=3, catch_errors=True, check_library_ops=False, race_runs=2)
    verdict = verify(_module(f=_racing), _module(f=lambda x: _racing(x, always_b=True)), CASES,
                     build, options=few)
    assert not verdict.passed


def test_a_rerun_of_the_original_on_inputs_built_otherwise_is_not_its_own_variation():
    """The original's re-runs (to see it vary) must start from the inputs its first run started
    from: a build of a (case, seed) that came out other than the first (a builder drifting
    between builds) would make a deterministic original seem to differ from itself on every
    element, and forgive a wrong candidate. Here every build after the first is shifted: the
    re-runs are not counted, and the candidate wrong on three elements is rejected."""
    from tritonforge.runtime.invoke import Invocation

    builds = {"n": 0}

    def drifting(module, case, seed, device=None):
        inv = build(module, case, seed, device)
        builds["n"] += 1
        if builds["n"] > 1:
            with torch.no_grad():
                inv.arguments[0].add_(float(builds["n"]))
        return Invocation(inv.call, inv.arguments)

    verdict = verify(_module(f=_add_one), _module(f=_off_by_three), CASES, drifting,
                     options=QUIET)
    assert not verdict.passed
    assert any(m.kind in ("value", "norm") for m in verdict.mismatches)
