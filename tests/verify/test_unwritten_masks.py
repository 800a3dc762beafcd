"""Bare calls see stale memory where the original leaves a ``torch.empty`` buffer unwritten: the
probe leaves those positions out (verify.shipped.unwritten_masks), and only those."""

import types

import torch

from tritonforge.model import Case, CaseRole, SpecCall
from tritonforge.verify.shipped import masked, unwritten_masks
from tritonforge.verify.tree import bitwise_equal


def _module():
    mod = types.ModuleType("offset_writer")

    def f(x):
        out = torch.empty(x.shape[0], 4)      # column 0 is never written (a column offset)
        out[:, 1:] = x[:, None] * 2
        return out
    mod.f = f
    return mod


class _Invocation:
    def __init__(self, module, x):
        self.module, self.arguments = module, (x,)

    def call(self):
        return self.module.f(*self.arguments)


def _make(module, case, seed, device):
    g = torch.Generator().manual_seed(seed)
    return _Invocation(module, torch.randn(8, generator=g))


CASE = Case("c", CaseRole.CORRECTNESS, SpecCall(entry="f", args=(), kwargs=()))


def test_the_positions_the_original_never_writes_are_found():
    masks = unwritten_masks(_module(), CASE, 3, _make, "cpu", None, None)
    assert set(masks) == {"return"}
    expected = torch.zeros(8, 4, dtype=torch.bool)
    expected[:, 0] = True
    assert torch.equal(masks["return"], expected)


def test_stale_memory_there_is_not_compared_but_a_wrong_written_value_still_is():
    masks = unwritten_masks(_module(), CASE, 3, _make, "cpu", None, None)
    x = _make(None, CASE, 3, "cpu").arguments[0]
    right = torch.cat([torch.full((8, 1), 7.0), (x[:, None] * 2).expand(8, 3)], dim=1)
    stale = right.clone()
    stale[:, 0] = torch.randn(8)                      # another run's leftover memory
    assert bitwise_equal(masked(right, masks), masked(stale, masks))
    wrong = stale.clone()
    wrong[2, 2] += 1.0                                # a written position computed wrong
    assert not bitwise_equal(masked(right, masks), masked(wrong, masks))
    assert right[0, 0].item() == 7.0                  # the tree itself is unchanged


def test_an_original_that_writes_everything_has_no_mask():
    mod = types.ModuleType("full_writer")
    mod.f = lambda x: x * 2
    assert unwritten_masks(mod, CASE, 1, _make, "cpu", None, None) == {}
