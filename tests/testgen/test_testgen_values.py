"""Re-draw recipes learned from traced values: ranges that keep the math meaningful, valid indices."""

import math

import pytest

from tritonforge.testgen.model import TensorStats, TracedTensor
from tritonforge.testgen.values import learn, offsets_values, round_down, round_up, values_supported


def tensor(dtype="float32", shape=(64,), written=False, **stats):
    numel = math.prod(shape)
    base = dict(numel=numel, finite=numel)
    base.update(stats)
    return TracedTensor(shape=shape, dtype=dtype, stats=TensorStats(**base), written=written)


def test_positive_inputs_stay_positive():
    # torch.rand(...) + 0.5: a log or sqrt of it must never see a negative or a zero
    learned = learn(tensor(min=0.5012, max=1.4981, mean=1.0, std=0.29, kurtosis=1.8))
    spec = learned.spec
    assert spec.init == "rand"
    assert 0 < spec.low <= 0.5012 and spec.high >= 1.4981
    assert spec.low == pytest.approx(0.5, abs=1e-9)


def test_tiny_positive_minimum_is_not_rounded_to_zero():
    spec = learn(tensor(min=0.00123, max=0.9, mean=0.4, std=0.2)).spec
    assert spec.init == "rand" and spec.low > 0


def test_symmetric_normal_keeps_scale_and_drops_insignificant_mean():
    spec = learn(tensor(shape=(1000,), min=-3.1, max=3.3, mean=0.03, std=1.02, kurtosis=3.1)).spec
    assert (spec.init, spec.scale, spec.offset) == ("randn", 1.0, 0.0)
    shifted = learn(tensor(shape=(1000,), min=-1.0, max=9.0, mean=4.0, std=2.0, kurtosis=3.0)).spec
    assert (shifted.init, shifted.scale, shifted.offset) == ("randn", 2.0, 4.0)
    spread = learn(tensor(shape=(1000,), min=-30.0, max=35.0, mean=2.0, std=10.0, kurtosis=3.0)).spec
    assert (spread.init, spread.scale, spread.offset) == ("randn", 10.0, 2.0)


def test_flat_distribution_becomes_uniform_in_its_range():
    spec = learn(tensor(min=-0.999, max=0.998, mean=0.0, std=0.577, kurtosis=1.8)).spec
    assert spec.init == "rand" and spec.low <= -0.999 and spec.high >= 0.998


def test_constants_and_output_buffers():
    assert learn(tensor(min=0.0, max=0.0, mean=0.0, std=0.0)).spec.init == "zeros"
    assert learn(tensor(min=1.0, max=1.0, mean=1.0, std=0.0)).spec.init == "ones"
    full = learn(tensor(min=2.5, max=2.5, mean=2.5, std=0.0)).spec
    assert (full.init, full.value) == ("full", 2.5)
    garbage = tensor(written=True, finite=60, min=-1e38, max=3e37, mean=0.0, std=1e37)
    assert learn(garbage).spec.init == "empty"


def test_whole_numbers_in_a_float_tensor_stay_whole():
    spec = learn(tensor(min=0.0, max=1.0, mean=0.5, std=0.5, integral=True, unique=2)).spec
    assert (spec.init, spec.low, spec.high, spec.dtype) == ("randint", 0, 2, "float32")


def test_integer_indices_keep_their_range():
    learned = learn(tensor("int64", (40,), min=0, max=48, mean=24.0, std=14.0, integral=True,
                           unique=30))
    assert (learned.spec.init, learned.spec.low, learned.spec.high) == ("randint", 0, 49)
    assert learned.index_high == 49


def test_identity_permutation_is_arange_and_shuffled_one_is_kept_or_made_identity():
    ident = learn(tensor("int64", (8,), min=0, max=7, integral=True, unique=8, sorted=True,
                         permutation=True, values=tuple(range(8))))
    assert ident.spec.init == "arange"
    shuffled = learn(tensor("int64", (8,), min=0, max=7, integral=True, unique=8, permutation=True,
                            values=(3, 1, 7, 0, 2, 6, 5, 4)))
    if values_supported():
        assert shuffled.spec.init == "values" and shuffled.spec.values == (3, 1, 7, 0, 2, 6, 5, 4)
        assert shuffled.keeps_values
    else:
        assert shuffled.spec.init == "arange"       # still a valid permutation
        assert "identity" in shuffled.note
    # at another size the traced data cannot be kept: a valid (identity) permutation instead
    perm = tensor("int64", (8,), min=0, max=7, integral=True, unique=8, permutation=True,
                  values=(3, 1, 7, 0, 2, 6, 5, 4))
    resized = learn(perm, (12,)).spec
    assert (resized.init, resized.shape) == ("arange", (12,))


def test_offsets_are_recognised_and_rebuilt():
    cu = tensor("int32", (3,), min=0, max=256, integral=True, unique=3, sorted=True,
                values=(0, 128, 256))
    learned = learn(cu)
    assert learned.offsets_total == 256
    assert learned.spec.init == ("values" if values_supported() else "arange")
    assert offsets_values(3, 100) == (0, 50, 100)
    assert offsets_values(5, 10) == (0, 2, 5, 8, 10)
    assert offsets_values(1, 10) == (0,)


def test_rounding_helpers():
    assert round_down(0.5012) == pytest.approx(0.5)
    assert round_up(1.4981) == pytest.approx(1.5)
    assert round_down(-0.999) == pytest.approx(-1.0)
    assert round_up(-0.999) == pytest.approx(-0.99)
    assert round_down(0.0) == 0.0
