"""An original that writes or reads outside its arguments' memory (verify.bounds): found with
guard pads; the bare-call checks judge nothing on a case it writes outside on, while every other
check still holds, and no check judges a case it reads outside on.

The stores here land in the pads ``outside`` puts around each storage, so no test
writes into memory it does not own (on the interpreter a store is a raw write into the process).
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from conftest import DEVICE
from standin import T, build, spec_case
from test_catalogue import FAMILIES, HERE, load
from tritonforge.verify import VerifyOptions, bounds, reasons, shipped_checks, verify

SCATTER = '''
import torch
import triton
import triton.language as tl


@triton.jit
def scatter_kernel(idx_ptr, src_ptr, dst_ptr, ROW: tl.constexpr):
    """Row i of src into row idx[i] of dst: no bounds check on idx (as a KV-cache copy)."""
    i = tl.program_id(0)
    row = tl.load(idx_ptr + i)
    offs = tl.arange(0, ROW)
    tl.store(dst_ptr + row * ROW + offs, tl.load(src_ptr + i * ROW + offs){mask})


def scatter(idx, src, dst):
    scatter_kernel[(idx.numel(),)](idx, src, dst, ROW=src.shape[1])
    return dst
'''


def _module(tmp_path, name: str, mask: str = ""):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(SCATTER.replace("{mask}", mask)))
    return load(path)


def _case(rows: list[int], dst_rows: int = 4):
    """A call whose index tensor is ``rows`` (an integer tensor built as given)."""
    from tritonforge.model import Case, CaseRole, SpecCall
    return Case(f"rows-{'-'.join(map(str, rows))}", CaseRole.CORRECTNESS,
                SpecCall("scatter", (T(len(rows), 16), T(dst_rows, 16))), (0,)), rows


def _invocation(rows: list[int]):
    """``build`` for the scatter calls: the index tensor is fixed, the floats drawn."""
    def make(module, case, seed, device=None):
        inv = build(module, case, seed, device)
        idx = torch.tensor(rows, dtype=torch.int32, device=DEVICE)
        src, dst = inv.arguments
        args = [idx, src, dst]
        return type(inv)(lambda: module.scatter(*args), args)
    return make


def test_stores_past_the_end_of_an_argument_are_found(tmp_path):
    module = _module(tmp_path, "scatter_unchecked")
    inside, rows_in = _case([0, 3, 1])
    past, rows_past = _case([0, 4, 1])          # row 4 of a 4-row destination: past its end
    assert not bounds.outside(module, inside, 0, _invocation(rows_in), DEVICE, None)
    assert bounds.outside(module, past, 0, _invocation(rows_past), DEVICE, None).writes


def test_stores_before_the_start_are_found(tmp_path):
    module = _module(tmp_path, "scatter_negative")
    before, rows = _case([0, -1])
    assert bounds.outside(module, before, 0, _invocation(rows), DEVICE, None).writes


def test_guarded_storages_keep_values_and_views():
    base = torch.arange(24, dtype=torch.float32, device=DEVICE)
    a, b = base[:12].view(3, 4), base[12:]
    other = torch.ones(5, device=DEVICE)
    guarded = bounds.guard_storages({"a": a, "b": b, "other": other})
    assert len(guarded) == 2                                  # one per storage, not per tensor
    assert torch.equal(a.flatten(), torch.arange(12.0, device=DEVICE))
    assert torch.equal(b, torch.arange(12.0, 24.0, device=DEVICE))
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()   # still one storage
    b[0] = -1.0
    assert not bounds.pads_changed(guarded)
    twice = torch.arange(6.0, device=DEVICE)                  # one tensor under two names:
    bounds.guard_storages({"x": twice, "y": twice})           # moved once, not shifted twice
    assert torch.equal(twice, torch.arange(6.0, device=DEVICE))
    # the pad right after a's and b's storage: a store one element past b's end lands there
    buf, pad, nbytes = next(g for g in guarded if g[2] == 24 * 4)
    buf[pad + nbytes] = 1
    assert bounds.pads_changed(guarded)


def test_a_guard_around_a_tail_padded_build_starts_where_its_data_ends():
    """A GPU build lies before a pad of its own (runtime.invoke.tail_padded); the guard still
    sees a store one element past the tensor's end, not one past the pad."""
    from tritonforge.runtime import invoke

    x = torch.arange(6.0, device=DEVICE)
    devices = invoke.PADDED_DEVICES
    invoke.PADDED_DEVICES = (x.device.type,)          # the host's tensors too, for the test
    try:
        invoke.tail_padded((x,))
    finally:
        invoke.PADDED_DEVICES = devices
    assert x.untyped_storage().nbytes() > 24                   # the build's own pad
    guarded = bounds.guard_storages({"x": x})
    buf, pad, nbytes = guarded[0]
    assert nbytes == 24 and buf.numel() == 2 * pad + 24
    assert torch.equal(x, torch.arange(6.0, device=DEVICE)) and not bounds.pads_changed(guarded)
    buf[pad + nbytes] = 1
    assert bounds.pads_changed(guarded)


def test_an_outside_case_turns_off_the_bare_calls_there_only(monkeypatch):
    """With one of two cases ruled out, a candidate that latches onto honest behaviour once it
    sees a guard is still caught by its first, bare calls on the other case, and the verdict
    says why the bare calls judged nothing on the first."""
    family = FAMILIES["scale"][1]
    ref = load(HERE / "scale_ref.py")
    outside = {"identity"}   # (x unscaled is right there: "half" catches the latch)
    monkeypatch.setattr(shipped_checks, "outside",
                        lambda module, case, *a, **k: bounds.Outside(
                            writes=module is ref and case.id in outside))
    options = VerifyOptions(nonce=5, catch_errors=True, recheck=False, shipped_check=False)
    honest = verify(ref, load(HERE / "scale_honest_warps.py"), family, build, options=options,
                    device=DEVICE)
    assert honest.passed, honest.summary(5)
    assert any("identity seed" in n and "writes outside" in n for n in honest.notes)
    kept = shipped_checks._ORIGINAL_BARE.get(ref, {})
    assert [key[0].id for key in kept] == ["half"]        # no bare call of it on "identity"
    cheat = verify(ref, load(HERE / "scale_watch_latch.py"), family, build, options=options,
                   device=DEVICE)
    assert "cheat:watched" in reasons(cheat)


def test_a_wrong_candidate_on_an_outside_case_is_still_refused(tmp_path, monkeypatch):
    """The guarded checks still judge the case: a candidate that copies the wrong rows fails."""
    ref = _module(tmp_path, "scatter_ref")
    wrong = _module(tmp_path, "scatter_wrong")
    wrong.scatter = lambda idx, src, dst: ref.scatter(idx.flip(0), src, dst)
    case, rows = _case([0, 3, 1])
    monkeypatch.setattr(shipped_checks, "outside", lambda *a, **k: bounds.Outside(writes=True))
    options = VerifyOptions(nonce=3, catch_errors=True, recheck=False, shipped_check=False)
    got = verify(ref, wrong, [case], _invocation(rows), options=options, device=DEVICE)
    assert not got.passed
    same = verify(ref, _module(tmp_path, "scatter_copy"), [case], _invocation(rows),
                  options=options, device=DEVICE)
    assert same.passed, same.summary(5)


@pytest.mark.parametrize("nbytes", [100, 4 << 20, 300 << 20])
def test_pads_are_as_large_as_the_storage_within_limits(nbytes):
    pad = bounds._pad_bytes(nbytes)
    assert pad % bounds.ALIGN == 0
    assert bounds.PAD_MIN <= pad <= bounds.PAD_MAX
    assert pad >= min(nbytes, bounds.PAD_MAX)


def test_the_bare_call_after_timing_judges_nothing_on_an_outside_case(tmp_path, monkeypatch):
    from tritonforge.verify import shipped
    from tritonforge.verify.compare import compare_outputs, tolerance_table
    ref = load(HERE / "scale_ref.py")
    path = tmp_path / "scale_twice.py"
    path.write_text((HERE / "scale_ref.py").read_text().replace("x_ptr + offs, mask=mask) * a",
                                                               "x_ptr + offs, mask=mask) * a * 2"))
    wrong = load(path)
    case = FAMILIES["scale"][1][0]                    # "half": the input is not the result

    def compare(r, c, path):
        return compare_outputs(r, c, case_id=case.id, seed=0, tolerance_for=tolerance_table(),
                               path=path)
    assert shipped.shipped_after_timing(ref, wrong, case, 0, build, DEVICE, compare)
    monkeypatch.setattr(shipped, "outside", lambda *a, **k: bounds.Outside(writes=True))
    assert shipped.shipped_after_timing(ref, wrong, case, 0, build, DEVICE, compare) is None


HEAD_SUM = '''
import torch
import triton
import triton.language as tl


@triton.jit
def head_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs{mask})
    tl.store(out_ptr, tl.sum(x, axis=0))


def head_sum(x, out):
    head_sum_kernel[(1,)](x, out, x.numel(), BLOCK=32)
    return out
'''


def _head_sum(tmp_path, name: str, mask: str):
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD_SUM.replace("{mask}", mask))
    return load(path)


def _sum_case(n: int):
    from tritonforge.model import Case, CaseRole, SpecCall
    return Case(f"sum-{n}", CaseRole.CORRECTNESS,
                SpecCall("head_sum", (T(n), T(1, init="zeros"))), (0, 1))


def test_loads_past_the_end_are_found_and_masked_ones_are_not(tmp_path):
    """A 32-wide tile over 16 elements reads the pad after them (a sum of zeros, then of 0x7F
    bytes): a read outside; over 32 elements, or masked, it reads nothing outside."""
    unmasked = _head_sum(tmp_path, "head_unmasked", "")
    masked = _head_sum(tmp_path, "head_masked", ", mask=offs < n, other=0.0")
    got = bounds.outside(unmasked, _sum_case(16), 0, build, DEVICE, None)
    assert got.reads and not got.writes
    assert not bounds.outside(unmasked, _sum_case(32), 0, build, DEVICE, None)
    assert not bounds.outside(masked, _sum_case(16), 0, build, DEVICE, None)


def test_a_case_the_original_reads_outside_on_judges_nothing(tmp_path):
    """The short case defines nothing, so a candidate that differs there is not refused for it;
    the full-width case still judges, and a verification with only short cases fails as
    verifying nothing."""
    ref = _head_sum(tmp_path, "head_ref", "")
    differs_short = _head_sum(tmp_path, "head_cand", ", mask=offs < n, other=0.0")
    options = VerifyOptions(nonce=2, catch_errors=True)
    both = verify(ref, differs_short, [_sum_case(16), _sum_case(32)], build, options=options,
                  device=DEVICE)
    assert both.passed, both.summary(5)
    assert any("sum-16 seed" in n and "reads outside" in n for n in both.notes)
    assert both.checked > 0
    wrong = _head_sum(tmp_path, "head_wrong", ", mask=offs < n - 1, other=0.0")
    assert not verify(ref, wrong, [_sum_case(16), _sum_case(32)], build, options=options,
                      device=DEVICE).passed
    only_short = verify(ref, differs_short, [_sum_case(16)], build, options=options,
                        device=DEVICE)
    assert not only_short.passed and only_short.failure is not None
    assert "nothing verified" in only_short.failure.reason


def test_a_case_too_large_to_probe_is_taken_as_inside(tmp_path, monkeypatch):
    from dataclasses import replace

    from tritonforge.model import PerfScriptCall
    module = _module(tmp_path, "scatter_big")
    case, rows = _case([0, 4, 1])
    big = replace(case, id="big", recipe=PerfScriptCall("script", "m", 0, elements=1 << 29))
    built = []
    monkeypatch.setattr(bounds, "_probe", lambda *a, **k: built.append(1) or bounds.Outside(True))
    assert not bounds.outside(module, big, 0, _invocation(rows), DEVICE, None)
    assert built == []


def test_the_stability_check_drops_a_generated_case_the_original_writes_outside_on():
    """A generated case is of our own making: one where the original stores past its tensors
    (decay_cumsum's odd sizes on the H100, 2026-11-27) is dropped, not kept with its bare checks
    off."""
    from types import SimpleNamespace

    from tritonforge.model import Case, CaseRole, SpecCall, Status, Task, VariantResult, Verdict
    from tritonforge.testgen.validate import check_stable
    task = Task("t", "x = 0\n", ("f",), (Case("gen-odd", CaseRole.CORRECTNESS, SpecCall("f")),
                                         Case("gen-ok", CaseRole.CORRECTNESS, SpecCall("f"))), "t")
    odd = Case("gen-odd", CaseRole.CORRECTNESS, SpecCall("f"))

    class Pool:
        def evaluate(self, task, variants, *, case_ids, **kw):
            cid = case_ids[0]
            notes = (bounds.outside_note(odd, 0, bounds.Outside(writes=True)),) \
                if cid == "gen-odd" else ()
            r = VariantResult("original-again", "h", Status.OK,
                              verdict=Verdict(passed=True, notes=notes))
            return SimpleNamespace(result=lambda name: r, results=(r,))

    got = check_stable(Pool(), task, ("gen-odd", "gen-ok"))
    assert got.kept == ("gen-ok",)
    assert [d.case_id for d in got.dropped] == ["gen-odd"]
    assert "unjudgeable" in got.dropped[0].reason and "writes outside" in got.dropped[0].reason
