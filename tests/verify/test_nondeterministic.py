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


def test_a_deterministic_original_forgives_nothing():
    def ref(x):
        out = torch.empty_like(x)
        kernels.add_one(x, out)
        return out
    def off_by_three(x):
        out = ref(x)
        out[:3] = -out[:3]
        return out
    verdict = verify(_module(f=ref), _module(f=off_by_three), CASES, build, options=QUIET)
    assert not verdict.passed and not verdict.notes
