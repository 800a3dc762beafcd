"""compare_outputs: kinds, evidence, nesting, tolerances (elementwise and in norm)."""

from __future__ import annotations

import math

import pytest
import torch

from tritonforge.model import Tolerance
from tritonforge.verify import compare_outputs, poison_, tolerance_table

TOL = tolerance_table()


def cmp(ref, cand, uses_dot=False, tol=TOL):
    return compare_outputs(ref, cand, case_id="c", seed=3, tolerance_for=tol, uses_dot=uses_dot)


def kinds(found):
    return [(m.output, m.kind) for m in found]


def test_identical_nested_structures_match():
    t = torch.randn(4, 5)
    value = (t, [t * 2, None, 3, "s", True, 1.5, torch.Size([2, 3])], {"y": t.half(), "n": 1})
    clone = (t.clone(), [t * 2, None, 3, "s", True, 1.5, torch.Size([2, 3])],
             {"y": t.half().clone(), "n": 1})
    assert cmp(value, clone) == []


def test_value_mismatch_carries_evidence():
    ref = torch.zeros(3, 4)
    cand = ref.clone()
    cand[1, 2] = 0.5
    cand[2, 3] = 0.25
    [m] = cmp(ref, cand)
    assert (m.kind, m.output, m.case_id, m.seed) == ("value", "return", "c", 3)
    assert m.n_bad == 2 and m.n_total == 12
    assert m.worst_index == (1, 2)
    assert m.candidate_value == 0.5 and m.reference_value == 0.0
    assert m.max_abs_err == pytest.approx(0.5)
    assert "2 of 12" in m.message and "(1, 2)" in m.message


def test_norm_catches_what_atol_hides():
    # softmax-like outputs ~2.4e-4: a 0.5% relative error is 1e-6 absolute, far under atol=1e-4
    ref = torch.softmax(torch.randn(4, 4096, generator=torch.Generator().manual_seed(0)), -1)
    cand = ref * (1 + 5e-3 * torch.sign(torch.randn(ref.shape)))
    [m] = cmp(ref, cand)
    assert m.kind == "norm" and m.n_bad == 0
    assert m.rel_norm_err == pytest.approx(5e-3, rel=0.05)
    # within the norm limit: accepted
    assert cmp(ref, ref * (1 + 1e-4)) == []


def test_tolerance_depends_on_dtype_and_dot():
    ref = torch.ones(100)
    cand = ref + 3e-3                      # fp32: too far; fp32 with tl.dot (tf32): fine
    assert kinds(cmp(ref, cand)) == [("return", "value")]
    assert cmp(ref, cand, uses_dot=True) == []
    assert cmp(ref.half(), cand.half()) == []                       # fp16: 1e-2
    loose = tolerance_table({"float32": Tolerance(1e-2, 1e-2, 1e-2)})
    assert cmp(ref, cand, tol=loose) == []
    assert tolerance_table()(torch.float8_e4m3fn, False).atol == 0.125


def test_nan_and_inf_must_sit_where_the_original_has_them():
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert cmp(ref, ref.clone()) == []
    for i, v in [(0, float("nan")), (1, 2.0), (2, -float("inf")), (3, 1e30), (0, float("inf"))]:
        cand = ref.clone()
        cand[i] = v
        [m] = cmp(ref, cand)
        assert m.kind == "nan" and m.worst_index == (i,), (i, v, m)


def test_unwritten_is_told_apart_from_computed_nan():
    ref = torch.randn(8, 8)
    cand = ref.clone()
    poison_(cand[5:])
    [m] = cmp(ref, cand)
    assert m.kind == "unwritten" and m.n_bad == 24 and m.worst_index == (5, 0)
    cand = ref.clone()
    cand[5] = torch.tensor(0.0) / 0.0      # a computed NaN: not the poison payload
    assert cmp(ref, cand)[0].kind == "nan"
    ref_poisoned = poison_(ref.clone())    # the original leaves it unwritten too: equal
    assert cmp(ref_poisoned, poison_(ref.clone())) == []


def test_what_the_original_leaves_unwritten_is_not_compared():
    ref = torch.randn(6, 4)
    poison_(ref[4:])                       # padding rows the original never writes
    cand = ref.clone()
    cand[4:] = 0.0                         # a candidate that zeroes them is not wrong
    assert cmp(ref, cand) == []
    cand[0, 0] += 1.0                      # ... but the written part still counts
    [m] = cmp(ref, cand)
    assert m.kind == "value" and m.worst_index == (0, 0) and m.n_bad == 1
    iref = torch.arange(6, dtype=torch.int32)
    poison_(iref[4:])
    assert cmp(iref, torch.arange(6, dtype=torch.int32)) == []


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_integers_are_exact_and_poisonable(dtype):
    ref = torch.arange(10).to(dtype)
    cand = ref.clone()
    cand[3] += 1
    assert kinds(cmp(ref, cand)) == [("return", "value")]
    cand = ref.clone()
    poison_(cand[7:])
    [m] = cmp(ref, cand)
    assert m.kind == "unwritten" and m.n_bad == 3


def test_shape_dtype_stride_type_missing():
    t = torch.randn(4, 6)
    assert kinds(cmp(t, t[:3])) == [("return", "shape")]
    assert kinds(cmp(t, t.double())) == [("return", "dtype")]
    assert kinds(cmp(t, t.t().contiguous().t())) == [("return", "stride")]
    row = torch.randn(1, 5)
    assert row.reshape(5, 1).t().stride() != row.stride()
    assert cmp(row, row.reshape(5, 1).t()) == []          # strides of size-1 dims do not matter
    assert kinds(cmp((t, t), [t, t])) == [("return", "type")]
    assert kinds(cmp(None, t)) == [("return", "type")]
    assert kinds(cmp((t, t), (t,))) == [("return[1]", "missing")]
    assert kinds(cmp({"a": t}, {"a": t, "b": t})) == [("return['b']", "missing")]
    assert kinds(cmp({"a": t, "b": [t]}, {"a": t, "b": [t + 1]})) == [("return['b'][0]", "value")]


def test_scalars():
    assert cmp(1.0, 1.0 + 1e-6) == []
    assert kinds(cmp(1.0, 1.1)) == [("return", "value")]
    assert kinds(cmp(float("nan"), 1.0)) == [("return", "nan")]
    assert cmp(float("nan"), math.nan) == []
    assert kinds(cmp(3, 4)) == [("return", "value")]
    assert kinds(cmp("a", "b")) == [("return", "value")]
    assert kinds(cmp(torch.Size([2]), torch.Size([3]))) == [("return", "value")]
    assert kinds(cmp(1, 1.0)) == [("return", "type")]


def test_complex_and_bool_tensors():
    z = torch.randn(5, dtype=torch.complex64)
    assert cmp(z, z.clone()) == []
    assert kinds(cmp(z, z + 1j)) == [("return", "value")]
    b = torch.tensor([True, False])
    assert kinds(cmp(b, ~b)) == [("return", "value")]


def test_a_namedtuple_class_from_two_imports_of_one_file_compares_by_items():
    """Original and candidate import their own copy of the user's module, so a namedtuple the file
    defines is two classes of one name: compared item by item, still caught when an item differs
    or when the class differs in name or fields."""
    from collections import namedtuple

    a_cls = namedtuple("max", ["values", "indices"])
    b_cls = namedtuple("max", ["values", "indices"])
    other = namedtuple("min", ["values", "indices"])
    fields = namedtuple("max", ["values", "index"])
    v, i = torch.randn(8), torch.arange(8)
    assert a_cls is not b_cls
    assert cmp(a_cls(v, i), b_cls(v.clone(), i.clone())) == []
    assert kinds(cmp(a_cls(v, i), b_cls(v + 1, i))) == [("return[0]", "value")]
    assert [k for _, k in kinds(cmp(a_cls(v, i), other(v, i)))] == ["type"]
    assert [k for _, k in kinds(cmp(a_cls(v, i), fields(v, i)))] == ["type"]
    assert [k for _, k in kinds(cmp(a_cls(v, i), (v, i)))] == ["type"]
