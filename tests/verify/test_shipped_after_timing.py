"""What the timer ran is what ships (runtime.worker_evaluate): after the timing runs, one more BARE call
of each timed candidate on a correctness case must match the original's, or the candidate is a
``watched`` cheat, also in a request that times without verifying."""

from __future__ import annotations

import pytest
from worker_runs import EXAMPLE, SIN_HONEST, SIN_SPEC, time_wrappers

from tritonforge.model import Status

WATCHED = '''
def sin_triton(x):
    out = torch.empty_like(x)
    n = x.numel()
    watched = bool(torch.isnan(torch.empty(1)).item())       # the verifier's poison
    sin_kernel[(triton.cdiv(n if watched else n // 2, 4),)](x, out, n, BLOCK_SIZE=4)
    return out
'''
WORN_OUT = '''
_CALLS = torch.zeros(64)          # a counter too big for the module-state fingerprint's tensors


def sin_triton(x):
    _CALLS.add_(1)
    out = torch.empty_like(x)
    n = x.numel()
    if float(_CALLS[0]) > 5:      # past the verifier's calls: half the work
        n = n // 2
    sin_kernel[(triton.cdiv(n, 4),)](x, out, x.numel(), BLOCK_SIZE=4)
    return out
'''
HONEST = SIN_HONEST


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    return time_wrappers(tmp_path_factory.mktemp("shipped"), EXAMPLE.read_text(), SIN_SPEC,
                         "sin_triton", {"watched": WATCHED, "worn_out": WORN_OUT,
                                        "honest": HONEST}, verify=False, name="sin_block4")


@pytest.mark.parametrize("name", ["watched", "worn_out"])
def test_a_candidate_wrong_on_the_shipped_path_is_a_cheat(timed, name):
    result = timed.result(name)
    assert result.status is Status.CHEAT, result
    # caught by the timed calls' own results (verify.timed_calls) or by the bare call after them
    assert result.failure.reason.startswith(("watched: after the timing runs",
                                             "watched: its last timed call")), result.failure


def test_an_honest_candidate_passes_the_check_after_timing(timed):
    assert timed.result("honest").status is Status.OK, timed.result("honest")
    assert timed.result("original").status is Status.OK
