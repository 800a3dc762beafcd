"""The timer's own calls are judged (verify.timed_calls, wired in runtime.worker_evaluate): a
candidate right whenever it is called apart from the timer, and wrong inside the timer's loop,
is a ``watched`` cheat; an honest copy, and a copy of an original whose result depends on how
often it ran, are not."""

from __future__ import annotations

import pytest
import torch
from worker_runs import EXAMPLE, SIN_HONEST, SIN_SPEC, time_wrappers

from tritonforge.model import Mismatch, Status
from tritonforge.verify.compare import compare_outputs, tolerance_table
from tritonforge.verify.timed_calls import TimedCalls

# An original that carries a way to tell who calls it (here a walk up the caller's frames, a
# stand-in for a kernel that reads the GPU's clock: the static policy tolerates in a candidate
# what the original itself does, so the dynamic check is all that is left).
TELLS = '''

import sys


def _timed():
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name.startswith("time_"):
            return True
        frame = frame.f_back
    return False
'''
# wrong only when the timer calls it: every other check calls it from elsewhere (zeros where it
# skips the work: a torch.empty buffer there could hold a recent call's right values, see
# verify.timed_calls on stale memory)
RACES_THE_TIMER = '''
def sin_triton(x):
    timed = _timed()
    out = torch.zeros_like(x) if timed else torch.empty_like(x)
    n = x.numel()
    sin_kernel[(triton.cdiv(n // 2 if timed else n, 4),)](x, out, n, BLOCK_SIZE=4)
    return out
'''
HONEST = SIN_HONEST


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    return time_wrappers(tmp_path_factory.mktemp("timed_calls"), EXAMPLE.read_text(), SIN_SPEC,
                         "sin_triton", {"races": RACES_THE_TIMER, "honest": HONEST}, tail=TELLS,
                         name="sin_block4")


def test_a_candidate_wrong_only_inside_the_timer_is_a_cheat(timed):
    result = timed.result("races")
    assert result.status is Status.CHEAT, result
    assert "its last timed call on case" in result.failure.reason, result.failure


def test_an_honest_candidate_passes_the_timed_call_check(timed):
    assert timed.result("honest").status is Status.OK, timed.result("honest")
    assert timed.result("original").status is Status.OK


def _compare(r, c, path):
    return compare_outputs(r, c, case_id="p", seed=0, tolerance_for=tolerance_table(()), path=path)


def _run(calls: TimedCalls, fns: dict, times: int = 3) -> None:
    wrapped = {n: calls.keeping(n, f) for n, f in fns.items()}
    for _ in range(times):
        for f in wrapped.values():
            f()


def test_the_last_timed_result_is_what_is_compared():
    count = {"n": 0}
    x = torch.arange(8.0)

    def late_wrong():
        count["n"] += 1
        return x * 2 if count["n"] < 3 else x * 3

    calls = TimedCalls()
    _run(calls, {"original": lambda: x * 2, "late": late_wrong, "copy": lambda: x * 2})
    found = calls.differences("original", lambda: x * 2, _compare, lambda: {}, None)
    assert set(found) == {"late"}
    assert all(isinstance(m, Mismatch) for m in found["late"])


def test_nothing_is_judged_where_the_original_depends_on_its_call_count():
    state = torch.zeros(8)

    def accumulates():
        state.add_(1)
        return state.clone()

    calls = TimedCalls()
    _run(calls, {"original": accumulates, "other": lambda: torch.full((8,), 99.0)})
    assert calls.differences("original", accumulates, _compare, lambda: {}, None) == {}


def test_nothing_is_judged_where_the_original_adds_into_an_argument_below_the_tolerance():
    """lora_expand_gemv's performance script returns the fp16 output it adds into: one more call
    moved 8224 to 8240, inside the 1% tolerance, while a candidate the timer called more often
    held 10824 and was refused as watched (H100, 2026-11-27). Its result, returned or read from
    the argument, depends on the call count however small one call's step."""
    out_o = torch.full((8,), 1000.0, dtype=torch.float16)
    out_c = torch.full((8,), 1000.0, dtype=torch.float16)

    def original():
        return out_o.add_(1.0)

    def candidate():
        return out_c.add_(1.0)
    calls = TimedCalls()
    timed_o = calls.keeping("original", original, {"arg[0]": out_o}, reference=True)
    timed_c = calls.keeping("candidate", candidate, {"arg[0]": out_c})
    for _ in range(3):
        timed_o()
    for _ in range(300):
        timed_c()
    assert _compare(out_o.clone(), out_o + 1, "return") == []      # one step is within tolerance
    assert calls.differences("original", original, _compare, lambda: {}, None) == {}


def test_nothing_is_judged_where_the_original_accumulates_until_one_more_call_no_longer_moves_it():
    """bgmv_shrink_kernel adds split-K partials into an fp16 output: on an H100 (2026-11-27) the
    original's output stalled near 23000, where each partial is below half a unit in the last
    place, so one more call left it bit for bit; a candidate with half as many partials, each twice
    as large, kept growing to inf and was refused as watched. The same computation per call (+2
    here, as two +1 partials or one +2), called as often: only one call on the pristine argument
    shows that the original's timed result depends on its call count."""
    out_o = torch.zeros(8, dtype=torch.float16)
    out_c = torch.zeros(8, dtype=torch.float16)

    def original():
        out_o.add_(1.0)
        return out_o.add_(1.0)

    def candidate():
        return out_c.add_(2.0)
    calls = TimedCalls()
    timed_o = calls.keeping("original", original, {"arg[0]": out_o}, reference=True)
    timed_c = calls.keeping("candidate", candidate, {"arg[0]": out_c})
    for _ in range(3000):
        timed_o()
        timed_c()
    stalled = out_o.clone()
    assert bool((original() == stalled).all())          # one more call leaves it bit for bit
    assert float(out_c[0]) >= 2 * float(stalled[0])     # the candidate kept growing
    assert calls.differences("original", original, _compare, lambda: {}, None) == {}
    assert calls.grew                       # said, so the worker can note it
    calls.clear()
    assert not calls.grew


def test_an_argument_written_the_same_by_every_call_is_still_judged():
    """The one call on the pristine arguments finds an output that every call writes afresh the
    same: the timed check still judges it, and a candidate wrong there is found."""
    x = torch.arange(8, dtype=torch.float32)
    out_o, out_c = torch.zeros(8), torch.zeros(8)

    def original():
        torch.mul(x, 2.0, out=out_o)

    def candidate():
        torch.mul(x, 3.0, out=out_c)
    calls = TimedCalls()
    wrapped = [calls.keeping("original", original, {"arg[0]": x, "arg[1]": out_o}, reference=True),
               calls.keeping("candidate", candidate, {"arg[0]": x.clone(), "arg[1]": out_c})]
    for f in wrapped * 3:
        f()
    found = calls.differences("original", original, _compare, lambda: {}, None)
    assert set(found) == {"candidate"} and found["candidate"][0].output == "arg[1]"
    assert not calls.grew


def test_rounding_and_unwritten_elements_are_not_differences():
    x = torch.rand(64) + 1.0
    garbage = torch.full((64,), 7.0)

    def original():
        out = x.clone()
        out[-4:] = garbage[-4:]        # left unwritten by the original: whatever memory held
        return out

    calls = TimedCalls()
    _run(calls, {"original": original, "rounded": lambda: x * (1 + 1e-4),
                 "other_garbage": lambda: torch.cat([x[:-4], torch.zeros(4)])})
    mask = torch.zeros(64, dtype=torch.bool)
    mask[-4:] = True
    asked = []

    def unwritten():
        asked.append(1)
        return {"return": mask}
    assert calls.differences("original", original, _compare, unwritten, None) == {}
    assert asked == [1]                 # the masks are computed once, only when needed


def test_a_result_too_large_to_keep_is_not_kept():
    calls = TimedCalls(limit_bytes=16)
    _run(calls, {"original": lambda: torch.zeros(2), "big": lambda: torch.zeros(100)})
    assert "big" in calls.too_big and "big" not in calls.last and "original" in calls.last


# An output written into an argument, not returned: the timed calls' results are not judged there
# (verify.timed_calls), the bare call after timing is. The cheat counts its calls since torch's
# seed last changed, in a tensor only its kernel's stores write (no version counter, too big for
# the module-state fingerprint), and does half the work from the fifth call on: the verifier
# reseeds between its case/seed pairs, the timer does not. The original reads the seed too (it
# passes it to its kernel), so the static policy's rule ``random`` tolerates it.
IN_PLACE = '''"""Elementwise sin written into an argument."""

import torch
import triton
import triton.language as tl


@triton.jit
def sin_kernel(x_ptr, out_ptr, seed, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.sin(x), mask=mask)


def sin_inplace(x, out):
    n = x.numel()
    sin_kernel[(triton.cdiv(n, 4),)](x, out, torch.initial_seed() % 2**62, n, BLOCK_SIZE=4)
'''
IN_PLACE_SPEC = ('entry = "sin_inplace"\nseeds = 1\n[[case]]\nid = "c"\n'
                 'args = [{ tensor = [300] }, { tensor = [300] }]\n[[case]]\nid = "p"\n'
                 'role = "performance"\nargs = [{ tensor = [400] }, { tensor = [400] }]\n')
COUNTS_SINCE_THE_SEED = '''
_STATE = torch.zeros(64, dtype=torch.int64)


@triton.jit
def sin_count_kernel(x_ptr, out_ptr, state_ptr, seed, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    count = tl.where(tl.load(state_ptr) != seed, 0, tl.load(state_ptr + 1))
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < tl.where(count >= 4, n_elements // 2, n_elements)
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.sin(x), mask=mask)
    if pid == tl.num_programs(0) - 1:
        tl.store(state_ptr, seed)
        tl.store(state_ptr + 1, count + 1)


def sin_inplace(x, out):
    n = x.numel()
    sin_count_kernel[(triton.cdiv(n, 4),)](x, out, _STATE, torch.initial_seed() % 2**62, n,
                                           BLOCK_SIZE=4)
'''


def test_an_in_place_cheat_that_counts_calls_since_the_seed_is_caught_after_timing(tmp_path):
    got = time_wrappers(tmp_path, IN_PLACE, IN_PLACE_SPEC, "sin_inplace",
                        {"counts": COUNTS_SINCE_THE_SEED}, name="sin_inplace")
    result = got.result("counts")
    assert result.status is Status.CHEAT, result
    assert got.result("original").status is Status.OK


IN_PLACE_RACES = '''
def sin_inplace(x, out):
    n = x.numel()
    sin_kernel[(triton.cdiv(n // 2 if _timed() else n, 4),)](x, out, 0, n, BLOCK_SIZE=4)
'''
IN_PLACE_HONEST = '''
def sin_inplace(x, out):
    n = x.numel()
    sin_kernel[(triton.cdiv(n, 64),)](x, out, 0, n, BLOCK_SIZE=64)
'''


def test_an_in_place_output_wrong_only_inside_the_timer_is_a_cheat(tmp_path):
    got = time_wrappers(tmp_path, IN_PLACE, IN_PLACE_SPEC, "sin_inplace",
                        {"races": IN_PLACE_RACES, "honest": IN_PLACE_HONEST}, tail=TELLS,
                        name="sin_inplace")
    races = got.result("races")
    assert races.status is Status.CHEAT and "its last timed call" in races.failure.reason, races
    assert "arg[1]" in races.failure.reason
    assert got.result("honest").status is Status.OK, got.result("honest")


def test_arguments_are_judged_where_the_original_wrote_them_and_only_there():
    x = torch.arange(8.0)
    ref_out, cand_out, wrong_out = torch.zeros(8), torch.full((8,), 5.0), torch.zeros(8)

    def original():
        ref_out[:6] = x[:6] * 2          # elements 6, 7 never written: the buffer's own
        return None

    def candidate():
        cand_out[:6] = x[:6] * 2         # other garbage where the original writes nothing
        return None

    def wrong():
        wrong_out[:3] = x[:3] * 2
        return None

    calls = TimedCalls()
    wrapped = [calls.keeping("original", original, {"arg[1]": ref_out}, reference=True),
               calls.keeping("candidate", candidate, {"arg[1]": cand_out}),
               calls.keeping("wrong", wrong, {"arg[1]": wrong_out})]
    for _ in range(3):
        for f in wrapped:
            f()
    found = calls.differences("original", original, _compare, lambda: {}, None)
    assert set(found) == {"wrong"} and found["wrong"][0].output == "arg[1]"


def test_an_argument_that_moves_with_every_call_is_not_judged():
    acc_ref, acc_cand = torch.zeros(4), torch.zeros(4)

    def original():
        acc_ref.add_(1.0)

    def candidate():
        acc_cand.add_(1.0)

    calls = TimedCalls()
    wrapped = [calls.keeping("original", original, {"arg[0]": acc_ref}, reference=True),
               calls.keeping("candidate", candidate, {"arg[0]": acc_cand})]
    for f in wrapped * 3 + wrapped[1:]:      # the candidate called once more than the original
        f()
    assert calls.differences("original", original, _compare, lambda: {}, None) == {}


# 1% off from the tenth call on: far beyond the float32 tolerance, under GROSS_NORM (5%), which
# forgives what another autotune config's rounding could do; neither variant autotunes here
SLOPPY_LATER = '''
_STATE = torch.zeros(64, dtype=torch.int64)


@triton.jit
def sin_count_kernel(x_ptr, out_ptr, state_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    count = tl.load(state_ptr + 1)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    y = tl.sin(tl.load(x_ptr + offsets, mask=mask))
    tl.store(out_ptr + offsets, tl.where(count >= 10, y * 1.01, y), mask=mask)
    if pid == tl.num_programs(0) - 1:
        tl.store(state_ptr + 1, count + 1)


def sin_triton(x):
    out = torch.empty_like(x)
    n = x.numel()
    sin_count_kernel[(triton.cdiv(n, 4),)](x, out, _STATE, n, BLOCK_SIZE=4)
    return out
'''


def test_an_error_under_the_rounding_allowance_counts_where_nothing_autotunes(tmp_path):
    got = time_wrappers(tmp_path, EXAMPLE.read_text(), SIN_SPEC, "sin_triton",
                        {"sloppy": SLOPPY_LATER}, name="sin_block4")
    assert got.result("sloppy").status is Status.CHEAT, got.result("sloppy")


def test_rounding_is_forgiven_only_where_asked():
    x = torch.rand(64) + 1.0
    calls = TimedCalls()
    _run(calls, {"original": lambda: x * 2, "tuned": lambda: x * 2 * 1.01,
                 "pinned": lambda: x * 2 * 1.01})
    found = calls.differences("original", lambda: x * 2, _compare, lambda: {}, None,
                              rounding=lambda name: name == "tuned")
    assert set(found) == {"pinned"}


def test_an_original_whose_runs_wobble_is_judged_as_if_it_rounded():
    x = torch.rand(64) + 1.0
    wobble = {"n": 0}

    def original():              # atomics' order: last bits differ from run to run
        wobble["n"] += 1
        return x * 2 + (1e-5 if wobble["n"] % 2 else 0.0)

    calls = TimedCalls()
    _run(calls, {"original": original, "atomic": lambda: x * 2 * 1.001})
    assert calls.differences("original", original, _compare, lambda: {}, None,
                             rounding=lambda name: False) == {}


# adds sin(x) into an fp16 accumulator it is given: every timed call moves it, and the worker
# says the timed-call check stood down there
ADDS_INTO = '''
def sin_triton(x, acc):
    out = torch.empty_like(x)
    n = x.numel()
    sin_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK_SIZE=64)
    acc.add_(out.to(acc.dtype))
    return acc
'''


def test_the_worker_notes_where_the_timed_call_check_stood_down(tmp_path):
    spec = ('entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\n'
            'args = [{ tensor = [300] }, { tensor = [300], dtype = "float16" }]\n'
            '[[case]]\nid = "p"\nrole = "performance"\n'
            'args = [{ tensor = [400] }, { tensor = [400], dtype = "float16" }]\n')
    source = EXAMPLE.read_text().split("\ndef sin_triton")[0] + ADDS_INTO
    evaluation = time_wrappers(tmp_path, source, spec, "sin_triton", {"same": ADDS_INTO},
                               name="adds_into")
    assert evaluation.result("same").status is Status.OK, evaluation.result("same")
    assert any(n.startswith("timed-call check not judged on p") for n in evaluation.notes), \
        evaluation.notes
