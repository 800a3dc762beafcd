"""Invocation.call reseeds (verification needs the same random stream); Invocation.timed does not
(reseeding costs 100-150 us of host time per call on an H100, which swamped small cases)."""

from __future__ import annotations

import types

import torch

from tritonforge.model import Case, CaseRole, SpecCall, TensorSpec
from tritonforge.runtime.invoke import Invocation, InvocationBuilder


def test_timed_defaults_to_call():
    inv = Invocation(lambda: 3)
    assert inv.timed is inv.call


def test_call_reseeds_and_timed_does_not(tmp_path):
    module = types.ModuleType("m")
    module.noisy = lambda x: x + torch.rand(4)
    case = Case("c", CaseRole.PERFORMANCE, SpecCall("noisy", (TensorSpec((4,), init="zeros"),)))
    inv = InvocationBuilder(module, "cpu", tmp_path).build(module, case, seed=5)
    assert torch.equal(inv.call(), inv.call())            # same random stream each call
    assert not torch.equal(inv.timed(), inv.timed())      # no reseeding inside timed calls
