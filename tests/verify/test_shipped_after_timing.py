"""What the timer ran is what ships (runtime.worker_evaluate): after the timing runs, one more BARE call
of each timed candidate on a correctness case must match the original's, or the candidate is a
``watched`` cheat, also in a request that times without verifying."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonforge.config import Settings
from tritonforge.model import Status, Variant
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
SPEC = ('entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [300] }]\n'
        '[[case]]\nid = "p"\nrole = "performance"\nargs = [{ tensor = [400] }]\n')

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
HONEST = '''
def sin_triton(x):
    out = torch.empty_like(x)
    n = x.numel()
    sin_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK_SIZE=64)
    return out
'''


def _variant(task, name: str, wrapper: str) -> Variant:
    head = task.source.split("\ndef sin_triton")[0]
    return Variant(name, head + wrapper, name)


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    root = tmp_path_factory.mktemp("shipped")
    spec = root / "s.toml"
    spec.write_text(SPEC)
    task = task_from_file(EXAMPLE, spec)
    variants = (original_variant(task), _variant(task, "watched", WATCHED),
                _variant(task, "worn_out", WORN_OUT), _variant(task, "honest", HONEST))
    with Evaluator(Settings(device="cpu"), root / "w", device="cpu") as ev:
        return ev.evaluate(task, variants, purpose="time", verify=False, time=True,
                           use_store=False)


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
