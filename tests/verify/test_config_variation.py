"""An autotuned original's own configs count as its run-to-run variation (verify.config_variation):
a candidate that runs another of the original's configs differs by that config's rounding and
passes; a candidate wrong beyond that still fails; a config of the original that is grossly off
(broken, not rounding) never widens what is forgiven."""

from __future__ import annotations

import types

import torch
import triton
import triton.language as tl

from conftest import DEVICE
from standin import T, build, spec_case
from tritonforge.verify import VerifyOptions
from tritonforge.verify import verify as _verify
from tritonforge.verify.config_variation import autotuners, config_variants

QUIET = VerifyOptions(nonce=3, catch_errors=True, check_library_ops=False)
CASES = [spec_case("c", "f", T(512))]


def verify(*args, **kwargs):
    kwargs.setdefault("device", DEVICE)
    return _verify(*args, **kwargs)


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, TWEAK: tl.constexpr):
    """y = x * (1 + TWEAK/1000): TWEAK stands for a config's rounding (a split-K sum's order)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * (1.0 + TWEAK / 1000.0), mask=mask)


def _first_wins(fn, quantiles=None, **_):
    fn()
    return [1.0, 1.0, 1.0] if quantiles else 1.0


def _tuned(tweaks):
    configs = [triton.Config({"BLOCK": 32 << (i % 3), "TWEAK": t}) for i, t in enumerate(tweaks)]
    return triton.autotune(configs=configs, key=["n"], do_bench=_first_wins)(scale_kernel)


def _original(tweaks) -> types.ModuleType:
    tuned = _tuned(tweaks)

    def f(x):
        y = torch.empty_like(x)
        tuned[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
        return y
    m = types.ModuleType("original")
    m.__dict__.update(f=f, tuned=tuned)
    return m


def _pinned(tweak) -> types.ModuleType:
    def f(x):
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64, TWEAK=tweak)
        return y
    m = types.ModuleType("candidate")
    m.__dict__.update(f=f)
    return m


def test_a_candidate_on_another_of_the_originals_configs_passes_and_says_why():
    verdict = verify(_original((0, 1, 2)), _pinned(2), CASES, build, options=QUIET)
    assert verdict.passed, verdict.summary()
    assert any("its own autotune configs" in n for n in verdict.notes)


def test_without_config_variation_the_same_candidate_is_refused():
    options = VerifyOptions(nonce=3, catch_errors=True, check_library_ops=False,
                            config_variation=False)
    verdict = verify(_original((0, 1, 2)), _pinned(2), CASES, build, options=options)
    assert not verdict.passed


def test_a_candidate_wrong_beyond_the_configs_rounding_is_refused():
    verdict = verify(_original((0, 1, 2)), _pinned(30), CASES, build, options=QUIET)
    assert not verdict.passed
    assert any(m.kind in ("value", "norm") for m in verdict.mismatches)


def test_a_grossly_different_config_of_the_original_forgives_nothing():
    # the original lists a config 10% off (broken, not rounding): a candidate 10% off is wrong
    verdict = verify(_original((0, 100)), _pinned(100), CASES, build, options=QUIET)
    assert not verdict.passed


def test_the_autotuner_gets_its_configs_and_picks_back():
    module = _original((0, 1, 2, 3, 4))
    (tuner,) = autotuners(module)
    x = torch.ones(64, device=DEVICE)
    module.f(x)
    configs, picks = list(tuner.configs), dict(tuner.cache)
    seen = []
    for described in config_variants(module):
        seen.append(described)
        assert len(tuner.configs) == 1 and tuner.configs[0] not in picks.values()
    assert 1 <= len(seen) <= 4
    assert tuner.configs == configs and tuner.cache == picks


def test_the_configs_tried_cover_a_setting_only_a_late_config_has():
    from tritonforge.verify.config_variation import _diverse

    configs = [triton.Config({"SPLIT_K": 1, "BM": bm, "BN": bn}) for bm in (32, 64) for bn in (32, 64)]
    configs += [triton.Config({"SPLIT_K": 2, "BM": 64, "BN": 64})]
    chosen = _diverse(configs, 3)
    assert any(c.kwargs["SPLIT_K"] == 2 for c in chosen)
    assert {c.kwargs["BM"] for c in chosen} == {32, 64} and {c.kwargs["BN"] for c in chosen} == {32, 64}


def test_forgiveness_by_configs_is_capped_at_what_counts_as_rounding():
    """An original config 4% off (under the 5% gross line) must not forgive three times that:
    a candidate 10% off is wrong."""
    verdict = verify(_original((0, 40)), _pinned(100), CASES, build, options=QUIET)
    assert not verdict.passed
    verdict = verify(_original((0, 40)), _pinned(40), CASES, build, options=QUIET)
    assert verdict.passed, verdict.summary()
