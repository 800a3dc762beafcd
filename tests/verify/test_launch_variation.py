"""An original's own result at another num_warps as its variation (verify.config_variation's
``launch_variants``): a candidate's elements beyond the tolerance are forgiven only where each lies
within it of such a result and the error norm passes, and then its bare calls are held to gross
differences only; a value no schedule of the original computes is still refused.

num_warps changes nothing on the CPU interpreter, so these tests stand in a module-level switch
for it: the stand-in original sums three fp16 columns in one order, and in the other order under
the "other num_warps" (a cancelling row rounds 0.5 one way, 0.2998 the other).
"""

from __future__ import annotations

import pytest

from standin import T, build, spec_case
from test_catalogue import load
from tritonforge.verify import VerifyOptions, config_variation, differential, reasons, verify

ROWSUM = '''
import torch

ORDER = {"order": "a"}      # the stand-in for the num_warps the kernels run at


def rowsum(x):
    y = x.clone()
    y[0] = torch.tensor([1000.0, 0.3, -1000.0], dtype=y.dtype, device=y.device)
    if ORDER["order"] {op} "a":
        out = (y[:, 0] + y[:, 1]) + y[:, 2]
    else:
        out = (y[:, 0] + y[:, 2]) + y[:, 1]
    return out{tail}
'''


def _module(tmp_path, name: str, op: str = "==", tail: str = ""):
    path = tmp_path / f"{name}.py"
    path.write_text(ROWSUM.replace("{op}", op).replace("{tail}", tail))
    return load(path)


def _fake_variants(module):
    """The original's "other num_warps": its ORDER switch flipped (restored after)."""
    switch = getattr(module, "ORDER", None)
    if switch is None:
        return
    for order in ("a", "b"):
        switch["order"] = order
        try:
            yield f"order {order}"
        finally:
            switch["order"] = "a"


@pytest.fixture
def variants(monkeypatch):
    monkeypatch.setattr(differential, "launch_variants", _fake_variants)
    monkeypatch.setattr(config_variation, "launch_variants", _fake_variants)


CASES = [spec_case("rows", "rowsum", T(4096, 3, dtype="float16"))]
OPTIONS = VerifyOptions(nonce=4, catch_errors=True)


def test_the_other_order_is_refused_without_the_originals_own_variants(tmp_path):
    ref, other = _module(tmp_path, "ref"), _module(tmp_path, "other_order", op="!=")
    got = verify(ref, other, CASES, build, options=OPTIONS)
    assert not got.passed and "mismatch" in " ".join(reasons(got))


def test_the_other_order_is_accepted_as_the_originals_own_result_elsewhere(tmp_path, variants):
    ref, other = _module(tmp_path, "ref"), _module(tmp_path, "other_order", op="!=")
    got = verify(ref, other, CASES, build, options=OPTIONS)
    assert got.passed, got.summary(5)
    assert any("under another num_warps" in n for n in got.notes)


def test_a_value_no_order_computes_is_refused(tmp_path, variants):
    ref = _module(tmp_path, "ref")
    nudged = _module(tmp_path, "nudged", tail=" + (torch.arange(out.numel(), device=out.device) == 0) * 0.2")
    got = verify(ref, nudged, CASES, build, options=OPTIONS)
    assert not got.passed


def test_a_norm_failure_is_never_forgiven(tmp_path, variants):
    ref = _module(tmp_path, "ref")
    scaled = _module(tmp_path, "scaled", op="!=", tail=" * 1.009")   # every row 0.9% off
    got = verify(ref, scaled, CASES, build, options=OPTIONS)
    assert not got.passed


def test_launched_with_warps_overrides_each_launch_and_restores_the_kernel():
    class Kernel:
        def run(self, *args, grid, warmup, **kwargs):
            return kwargs.get("num_warps")
    a, b = Kernel(), Kernel()
    with config_variation.launched_with_warps([a, b], 8):
        assert a.run(grid=(1,), warmup=False, num_warps=4) == 8
        assert b.run(grid=(1,), warmup=False) == 8
    assert a.run(grid=(1,), warmup=False, num_warps=4) == 4 and "run" not in vars(a)


def test_schedule_sensitivity_is_asked_once_per_case(tmp_path, variants):
    ref = _module(tmp_path, "ref")
    calls = []

    def call():
        calls.append(1)
        return ref.rowsum(__import__("torch").zeros(8, 3, dtype=__import__("torch").float16))

    def differs(a, b):
        return not bool((a == b).all())
    assert config_variation.schedule_sensitive(ref, CASES[0], call, differs)
    n = len(calls)
    assert config_variation.schedule_sensitive(ref, CASES[0], call, differs) and len(calls) == n


def test_launched_kernels_are_the_jit_functions_no_autotuner_picks_for():
    import types

    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    def body(x):
        pass
    plain, under_heuristics, tuned = JITFunction(body), JITFunction(body), JITFunction(body)
    module = types.ModuleType("kernels")
    module.plain, module.again = plain, plain
    module.heur = Heuristics(under_heuristics, ["x"], {})
    module.tuned = Autotuner(tuned, ["x"], [], [], None, None, {})
    found = config_variation.launched_kernels(module)
    assert found == [plain, under_heuristics]
    assert config_variation.autotuners(module) == [module.tuned]
