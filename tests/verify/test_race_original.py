"""The race check judges only a case where the ORIGINAL's own outputs hold still under the same
scramble: an original whose outputs change once its read-only inputs are overwritten (on an H100,
one that writes outside its arguments' memory) would "race" there itself, and an honest candidate
that only changed num_warps was refused as a race. A candidate whose outputs change where the
original's hold still is still refused.

The CPU stand-in of such an original: its written output argument shares storage with a read-only
input (the builder lays both in one buffer) and it returns nothing, so the runner overwrites that
input after the call and the output's late clone changes, for the original as for any candidate.
"""

from __future__ import annotations

import types

import torch

import kernels
from conftest import DEVICE
from standin import T, build, spec_case
from tritonforge.verify import VerifyOptions, differential, reasons
from tritonforge.verify import verify as _verify

N = 256


def _module(**functions) -> types.ModuleType:
    m = types.ModuleType("variant")
    m.__dict__.update(functions)
    return m


def _into_tail(x, buf):
    """x + 1 into the second half of ``buf``, whose first half IS ``x``; returns nothing."""
    kernels.add_one(x, out=buf[x.numel():])


def _add(x):
    return kernels.add_one(x)


PENDING: list = []


def _deferred(x):
    """add_one, right when it returns, but launched once more when the device is synchronized:
    work left queued that reads x after the call (NaN + 1 keeps a NaN's bits, so the late
    launch shows only over a result that held values)."""
    y = kernels.add_one(x)
    PENDING.append(lambda: kernels.add_one(x, out=y))
    return y


def _sync() -> None:
    while PENDING:
        PENDING.pop(0)()


ALIAS = spec_case("alias", "into_tail", T(N))
PLAIN = spec_case("plain", "add", T(N))


def _invocation(module, case, seed, device=None):
    """``build``, but on the alias case x is the first half of the written buffer."""
    inv = build(module, case, seed, device)
    if case.id != ALIAS.id:
        return inv
    gen = torch.Generator().manual_seed(seed)
    buf = torch.randn(2 * N, generator=gen).to(device or DEVICE)
    args = [buf[:N], buf]
    return type(inv)(lambda: module.into_tail(*args), args)


def _options(**kw) -> VerifyOptions:
    return VerifyOptions(nonce=7, catch_errors=True, synchronize=_sync, **kw)


def _verify_on(reference, candidate, cases, **kw):
    PENDING.clear()
    try:
        return _verify(reference, candidate, cases, _invocation, device=DEVICE,
                       options=_options(**kw))
    finally:
        PENDING.clear()


def test_an_honest_candidate_is_not_a_race_where_the_original_itself_races():
    reference = _module(into_tail=_into_tail)
    candidate = _module(into_tail=lambda x, buf: _into_tail(x, buf))
    verdict = _verify_on(reference, candidate, [ALIAS])
    assert "cheat:race" not in reasons(verdict), verdict.summary(10)
    assert verdict.passed, verdict.summary(10)
    assert any("alias" in n and "race check does not judge" in n for n in verdict.notes), \
        verdict.notes


def test_a_racy_candidate_is_refused_where_the_original_holds_still():
    reference = _module(add=_add)
    verdict = _verify_on(reference, _module(add=_deferred), [PLAIN])
    assert "cheat:race" in reasons(verdict), verdict.summary(10)
    assert not verdict.passed


def test_a_racy_candidate_is_refused_on_a_case_the_original_holds_still_on_beside_one_it_races_on():
    reference = _module(into_tail=_into_tail, add=_add)
    candidate = _module(into_tail=lambda x, buf: _into_tail(x, buf), add=_deferred)
    verdict = _verify_on(reference, candidate, [ALIAS, PLAIN])
    assert "cheat:race" in reasons(verdict), verdict.summary(10)
    race = next(c for c in verdict.violations if c.kind == "race")
    assert race.case_id == PLAIN.id, race


def test_an_honest_candidate_of_an_original_that_holds_still_is_not_run_against_it_again(
        monkeypatch):
    """No candidate race: no extra run of the original; one that races: once per case."""
    scrambled: list[str] = []
    real = differential.run_variant

    def counting(module, case, seed, *args, **kwargs):
        if kwargs.get("scramble") and module.__name__ == "reference":
            scrambled.append(case.id)
        return real(module, case, seed, *args, **kwargs)

    monkeypatch.setattr(differential, "run_variant", counting)
    reference = types.ModuleType("reference")
    reference.add, reference.into_tail = _add, _into_tail
    assert _verify_on(reference, _module(add=_add), [PLAIN]).passed
    assert scrambled == []
    verdict = _verify_on(reference, _module(into_tail=lambda x, buf: _into_tail(x, buf)), [ALIAS])
    assert verdict.passed, verdict.summary(10)
    assert verdict.checked >= 3 and scrambled == [ALIAS.id]
