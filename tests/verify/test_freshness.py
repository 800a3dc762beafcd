"""The pieces behind the shipped-path checks: module-state fingerprints, aliasing, the profiler's
op census, and the bare-call probe's plan and race step (verify.freshness, census, shipped)."""

from __future__ import annotations

import types

import pytest
import torch

import kernels
from conftest import DEVICE
from standin import T, build, spec_case
from tritonforge.model import Case, CaseRole, SpecCall
from tritonforge.verify import VerifyOptions, reasons
from tritonforge.verify import verify as _verify
from tritonforge.verify.census import op_census
from tritonforge.verify.freshness import (
    changed_names, returned_aliases, state_fingerprint, subclassed,
)
from tritonforge.verify.shipped import plan_probe


def _module(source: str) -> types.ModuleType:
    m = types.ModuleType("variant_under_test")
    exec(compile(source, "<variant>", "exec"), m.__dict__)
    return m


@pytest.mark.parametrize("source,call", [
    ("N = 0\ndef f():\n    global N\n    N += 1\n", "f()"),
    ("C = [0]\ndef f():\n    C[0] += 1\n", "f()"),
    ("LOG = []\ndef f():\n    LOG.append(1)\n", "f()"),
    ("import torch\nT = torch.zeros(1)\ndef f():\n    T.add_(1)\n", "f()"),
    ("def make():\n    n = [0]\n    def f():\n        n[0] += 1\n    return f\nf = make()\n", "f()"),
    ("def f(_state={}):\n    _state[len(_state)] = 1\n", "f()"),
    ("class S:\n    n = 0\ndef f():\n    S.n += 1\n", "f()"),
    ("import types\nS = types.SimpleNamespace(n=0)\ndef f():\n    S.n += 1\n", "f()"),
])
def test_state_a_call_changes_is_seen(source, call):
    m = _module(source)
    before = state_fingerprint(m)
    eval(call, m.__dict__)
    assert changed_names(before, state_fingerprint(m))


def test_a_cache_filled_once_per_shape_changes_only_on_the_first_call():
    m = _module("C = {}\ndef f(n):\n    C.setdefault(n, n * 2)\n    return C[n]\n")
    first = state_fingerprint(m)
    m.f(3)
    second = state_fingerprint(m)
    m.f(3)
    assert changed_names(first, second) == ("C",)
    assert changed_names(second, state_fingerprint(m)) == ()


def test_returned_aliases_name_the_input_the_module_and_an_earlier_call():
    x, held, earlier = torch.ones(4), torch.zeros(4), torch.zeros(4)
    assert returned_aliases(x[1:], {"arg[0]": x}, [], []) == (("return", "arg[0]"),)
    assert returned_aliases((torch.ones(2), held), {}, [held], []) == (("return[1]", "module"),)
    assert returned_aliases(earlier, {}, [], [earlier]) == (("return", "earlier call"),)
    assert returned_aliases(torch.ones(4), {"arg[0]": x}, [held], [earlier]) == ()


def test_subclasses_are_named():
    class Lazy(torch.Tensor):
        pass
    assert subclassed((torch.ones(2), torch.ones(2).as_subclass(Lazy))) == (("return[1]", "Lazy"),)
    assert subclassed(torch.ones(2)) == ()


def test_the_census_sees_ops_the_dispatch_recorder_cannot():
    x = torch.randn(8, 8)
    with op_census() as census:
        with torch._C._DisableTorchDispatch():
            torch.softmax(x, dim=-1)
    assert census.ok and "aten.softmax" in census.ops


def test_the_probes_call_index_follows_the_nonce_not_the_case():
    case = Case("c", CaseRole.CORRECTNESS, SpecCall("f", ()), (0,))
    calls = {plan_probe(case, 1, nonce, frozenset(), frozenset(), "cpu", None).calls
             for nonce in range(40)}
    assert calls == {1, 2}
    assert plan_probe(case, 1, 5, frozenset(), frozenset(), "cpu", None).repeats == 0
    assert plan_probe(case, 1, 5, frozenset(), frozenset(), "cuda", None).repeats == 2


_SEEN: set[float] = set()


def _wrong_when_the_same_inputs_come_again(x):
    """add_one, but one element off when these very inputs were seen before: a race that one run
    misses (order-dependent atomics show on some runs only)."""
    out = kernels.add_one(x)
    key = float(x.double().sum())
    if key in _SEEN:
        out[0] += 1.0
    _SEEN.add(key)
    return out


def test_identical_runs_that_disagree_are_a_race():
    nonce = next(n for n in range(100) if plan_probe(
        Case("c", CaseRole.CORRECTNESS, SpecCall("f", ()), (0,)), 1, n, frozenset(),
        frozenset(), "cpu", None).calls == 1)
    ref = types.ModuleType("ref")
    ref.f = kernels.add_one
    cand = types.ModuleType("cand")
    cand.f = _wrong_when_the_same_inputs_come_again
    cases = [spec_case("c", "f", T(256))]
    # no recheck: it would show the candidate the probe's inputs first (they share a seed)
    options = VerifyOptions(nonce=nonce, catch_errors=True, repeat_runs=2, recheck=False,
                            check_library_ops=False)
    verdict = _verify(ref, cand, cases, build, device=DEVICE, options=options)
    assert "cheat:race" in reasons(verdict), verdict.summary(10)
    quiet = VerifyOptions(nonce=nonce, catch_errors=True, repeat_runs=0)
    assert _verify(ref, ref, cases, build, device=DEVICE, options=quiet).passed
