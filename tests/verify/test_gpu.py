"""What only a GPU can show: launches seen through Triton's launch hook, side streams, real races.

Run with ``TRITONFORGE_VERIFY_DEVICE=cuda`` on a CUDA machine (compiled kernels, no interpreter);
the CPU-visible parts (stream creation, deferred work) are in the catalogue.
"""

from __future__ import annotations

import types

import pytest
import torch

from conftest import DEVICE
from standin import T, build, spec_case
from tritonforge.verify import VerifyOptions, count_launches, reasons, verify

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(DEVICE != "cuda" or not torch.cuda.is_available(),
                       reason="needs CUDA and TRITONFORGE_VERIFY_DEVICE=cuda"),
]

if DEVICE == "cuda":
    import triton
    import triton.language as tl

    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def scale(x):
    y = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


def scale_on_side_stream(x, wait_after=False, sleep_before_read=False):
    """Launches on a new stream; unless ``wait_after`` the caller's stream never waits for it."""
    y = torch.empty_like(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())     # inputs are ready
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)                 # ~tens of ms: the caller returns first
        scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    if wait_after:
        torch.cuda.current_stream().wait_stream(side)
    return y


CASES = [spec_case("n", "f", T(1 << 20))]
OPTIONS = VerifyOptions(nonce=3, catch_errors=True)


def module(f) -> types.ModuleType:
    m = types.ModuleType("variant")
    m.f = f
    return m


def test_launch_hook_counts_compiled_launches_and_their_stream():
    x = torch.randn(4096, device="cuda")
    with count_launches() as seen:
        scale(x)
        scale_on_side_stream(x, wait_after=True)
    torch.cuda.synchronize()
    assert seen.count == 2 and seen.kernels == ("scale_kernel",)
    assert len(seen.side_stream_launches()) == 1


def test_honest_gpu_variant_passes():
    verdict = verify(module(scale), module(scale), CASES, build, device="cuda", options=OPTIONS)
    assert verdict.passed, verdict.summary(10)


def test_unsynchronized_side_stream_is_a_race():
    verdict = verify(module(scale), module(scale_on_side_stream), CASES, build, device="cuda",
                     options=OPTIONS)
    labels = reasons(verdict)
    assert "cheat:race" in labels and "cheat:side_stream" in labels, verdict.summary(10)


def test_synchronized_side_stream_is_still_refused_but_not_as_a_race():
    f = module(lambda x: scale_on_side_stream(x, wait_after=True))
    verdict = verify(module(scale), f, CASES, build, device="cuda", options=OPTIONS)
    labels = reasons(verdict)
    assert "cheat:side_stream" in labels and "cheat:race" not in labels, verdict.summary(10)
