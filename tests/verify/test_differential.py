"""verify(): output discovery and poisoning, errors, options, the verdict's contents."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

import kernels
from standin import T, build, spec_case
from test_catalogue import FAMILIES, HERE, load
from tritonforge.model import Case, CaseRole, Status, Tolerance
from tritonforge.model import TestSectionCall as SectionCall
from tritonforge.verify import (
    OracleFailure, VerifyOptions, reasons, uses_dot, verify_against_reference,
)
from tritonforge.verify import verify as _verify
from conftest import DEVICE

QUIET = VerifyOptions(nonce=7, catch_errors=True)


def verify(*args, **kwargs):
    """verify() on the session's device (the interpreter on CPU, or TRITONFORGE_VERIFY_DEVICE)."""
    kwargs.setdefault("device", DEVICE)
    return _verify(*args, **kwargs)


def module(**functions) -> types.ModuleType:
    m = types.ModuleType("variant")
    m.__dict__.update(functions)
    return m


# add_one(x, out, rows): a caller-provided output buffer (TensorSpec init "empty": stale 7.0s)
OUT_CASES = [spec_case("out", "f", T(100), T(100, init="empty"))]


def test_pure_output_arguments_are_poisoned_so_unwritten_elements_show():
    reference = module(f=lambda x, out: kernels.add_one(x, out))
    lazy = module(f=lambda x, out: kernels.add_one(x, out, rows=60))     # leaves 40 stale
    honest = module(f=lambda x, out: (out.copy_(x), kernels.add_one(out, out))[1])  # in place
    verdict = verify(reference, lazy, OUT_CASES, build, options=QUIET)
    seen = {(m.output, m.kind, m.n_bad, m.worst_index) for m in verdict.mismatches}
    assert ("arg[1]", "unwritten", 40, (60,)) in seen
    assert ("return", "unwritten", 40, (60,)) in seen     # it returns the same buffer
    assert verify(reference, honest, OUT_CASES, build, options=QUIET).passed


def test_a_buffer_the_original_writes_only_in_part_is_not_poisoned():
    # the original writes 60 of 100 elements and keeps the caller's other 40: so must a candidate
    reference = module(f=lambda x, out: kernels.add_one(x, out, rows=60))
    same = module(f=lambda x, out: kernels.add_one(x, out, rows=60))
    more = module(f=lambda x, out: kernels.add_one(x, out))
    assert verify(reference, same, OUT_CASES, build, options=QUIET).passed
    verdict = verify(reference, more, OUT_CASES, build, options=QUIET)
    assert verdict.mismatches[0].kind == "value" and verdict.mismatches[0].n_bad == 40


def test_the_verdict_reports_what_the_original_did():
    reference = load(HERE / "matmul_ref.py")
    verdict = verify(reference, load(HERE / "matmul_honest_tiles.py"), FAMILIES["matmul"][1][:1],
                     build, options=QUIET)
    assert verdict.passed and verdict.uses_dot
    assert verdict.checked == 3                  # 2 seeds + the fresh-seed re-run
    assert verdict.reference_launches >= 3 and verdict.candidate_launches == 3
    assert "aten.empty" in verdict.reference_ops
    assert not uses_dot(load(HERE / "softmax_ref.py"))


def test_the_recheck_is_what_catches_seed_dependence():
    cases = FAMILIES["softmax"][1]
    reference, cheat = load(HERE / "softmax_ref.py"), load(HERE / "softmax_seed.py")
    no_recheck = VerifyOptions(recheck=False, shipped_check=False, first_calls=False,
                               catch_errors=True)
    assert verify(reference, cheat, cases, build, options=no_recheck).passed
    assert "cheat:rerun" in reasons(verify(reference, cheat, cases, build, options=QUIET))


def test_candidate_errors_raise_by_default_and_become_failures_on_request():
    def broken(x):
        raise ValueError("boom")

    reference = module(f=kernels.add_one)
    cases = [spec_case("c", "f", T(10))]
    with pytest.raises(ValueError, match="boom"):
        verify(reference, module(f=broken), cases, build)
    verdict = verify(reference, module(f=broken), cases, build, options=QUIET)
    assert not verdict.passed and verdict.failure.status is Status.RUNTIME_ERROR
    assert "boom" in verdict.failure.reason and verdict.failure.case_id == "c"
    assert reasons(verdict) == ("error:runtime_error",)


def test_an_error_raised_outside_a_runs_capture_names_its_case(monkeypatch):
    """A sticky CUDA error surfaces at the next call into CUDA, which can be the seeding before
    the original's next run, outside the run's own capture of errors: the exception still names
    the case and seed it surfaced on (``tritonforge_where``), so the search can run the original
    alone there (search.stages) instead of blaming every candidate with no case."""
    import tritonforge.verify.differential as differential

    reference = module(f=kernels.add_one)
    real = differential.run_variant

    def sticky_before_the_original_on_b(variant_module, case, *args, **kwargs):
        if variant_module is reference and case.id == "b":
            raise RuntimeError("CUDA error: operation not supported on global/shared address space")
        return real(variant_module, case, *args, **kwargs)

    monkeypatch.setattr(differential, "run_variant", sticky_before_the_original_on_b)
    cases = [spec_case("a", "f", T(10)), spec_case("b", "f", T(12))]
    with pytest.raises(RuntimeError, match="global/shared") as raised:
        verify(reference, module(f=kernels.add_one), cases, build,
               options=VerifyOptions(nonce=7, shipped_check=False, first_calls=False))
    case_id, seed = raised.value.tritonforge_where
    assert case_id == "b" and seed is not None


def test_the_original_failing_is_not_the_candidates_fault():
    def broken(x):
        raise ValueError("bad case")

    with pytest.raises(OracleFailure, match="bad case"):
        verify(module(f=broken), module(f=kernels.add_one), [spec_case("c", "f", T(10))], build)


def test_inputs_are_imposed_when_the_builder_is_not_deterministic():
    calls = []

    def flaky_build(mod, case, seed, device="cpu"):
        calls.append(seed)
        return build(mod, case, seed + 1000 * len(calls), device)   # other values every time

    reference = module(f=kernels.add_one)
    verdict = verify(reference, module(f=kernels.add_one), [spec_case("c", "f", T(50))],
                     flaky_build, options=QUIET)
    assert verdict.passed and verdict.checked == 3


def test_max_mismatches_stops_early():
    reference = module(f=kernels.add_one)
    wrong = module(f=lambda x: kernels.add_one(x) + 1)
    cases = [spec_case(f"c{i}", "f", T(10), seeds=(0, 1, 2)) for i in range(5)]
    verdict = verify(reference, wrong, cases, build,
                     options=VerifyOptions(max_mismatches=2, catch_errors=True))
    assert len(verdict.mismatches) == 2 and verdict.checked == 2


def test_nested_results_are_compared_by_path():
    reference = module(f=lambda x: {"y": kernels.add_one(x), "aux": (x.sum().item(), "tag")})
    other = module(f=lambda x: {"y": kernels.add_one(x), "aux": (x.sum().item(), "TAG")})
    verdict = verify(reference, other, [spec_case("c", "f", T(10))], build, options=QUIET)
    assert verdict.mismatches[0].output == "return['aux'][1]"


def test_worker_adapter_uses_the_builder_and_the_tasks_tolerances():
    class Builder:
        def build(self, mod, case, seed):
            return build(mod, case, seed)

    cases = FAMILIES["softmax"][1][:1]
    reference, fp16 = load(HERE / "softmax_ref.py"), load(HERE / "softmax_fp16_exp.py")
    strict = types.SimpleNamespace(tolerance_overrides=())
    loose = types.SimpleNamespace(
        tolerance_overrides=(("float32", Tolerance(atol=1e-4, rtol=1e-4, rel_norm=1e-3)),))
    assert not verify_against_reference(reference, fp16, strict, cases, Builder(), DEVICE).passed
    assert verify_against_reference(reference, fp16, loose, cases, Builder(), DEVICE).passed


def test_test_section_style_invocations_without_arguments():
    class Invocation:
        def __init__(self, call):
            self.call, self.arguments = call, []

    source = f"x = torch.randn(64, device={DEVICE!r})\n" + "result_gold = {'y': add_one(x)}\n"

    def run_section(mod, case, seed, device):
        def call():
            namespace = dict(mod.__dict__, torch=torch)
            torch.manual_seed(seed)
            exec(case.recipe.source, namespace)
            return namespace["result_gold"]
        return Invocation(call)

    case = Case("section", CaseRole.CORRECTNESS, SectionCall(source), (0, 1))
    reference = module(add_one=kernels.add_one)
    honest = module(add_one=kernels.add_one_autotuned)
    cheat = module(add_one=lambda x: x + 1)
    assert verify(reference, honest, [case], run_section, options=QUIET).passed
    assert "cheat:no_launch" in reasons(verify(reference, cheat, [case], run_section, options=QUIET))


def test_first_calls_off_the_latch_cheat_passes_and_on_it_is_caught():
    """The switch the cascade uses to make the first calls bare once per candidate, in its first
    tier: it decides whether the catalogue's latching cheat is seen."""
    cases = FAMILIES["scale"][1]
    ref = load(HERE / "scale_ref.py")
    off = VerifyOptions(nonce=3, catch_errors=True, first_calls=False)
    assert verify(ref, load(HERE / "scale_watch_latch.py"), cases, build, options=off).passed
    on = VerifyOptions(nonce=3, catch_errors=True)
    assert "cheat:watched" in reasons(verify(ref, load(HERE / "scale_watch_latch.py"), cases,
                                             build, options=on))


LATCH_PAST_THE_CORRECTNESS_SIZES = '''
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a, mask=mask)


def scale(x, a):
    # the verifier's poison (its exact bits, not any NaN freed memory holds): watched from now on
    if torch.empty(1).view(torch.int32).item() == 0x7FF0DEAD:
        scale.watched = True
    y = torch.empty_like(x)
    n = x.numel()
    if n > 4096 and not scale.__dict__.get("watched", False):
        n = n // 2                            # unwatched and large: half the work
    scale_kernel[(triton.cdiv(n, 512),)](x, y, a, n, BLOCK=512)
    y[n:] = 0
    return y
'''


def test_a_latch_that_cheats_only_past_the_correctness_sizes_is_caught_on_the_last_performance_case(tmp_path):
    """Bare first calls on correctness cases alone passed it (every guarded call was latched)."""
    from dataclasses import replace
    path = tmp_path / "scale_latch_large.py"
    path.write_text(LATCH_PAST_THE_CORRECTNESS_SIZES)
    cases = FAMILIES["scale"][1] + [replace(spec_case("perf-big", "scale", T(20000), 0.5),
                                            role=CaseRole.PERFORMANCE, seeds=(0,))]
    ref = load(HERE / "scale_ref.py")
    verdict = verify(ref, load(path), cases, build, options=VerifyOptions(nonce=1, catch_errors=True))
    assert "cheat:watched" in reasons(verdict)
    honest = verify(ref, load(HERE / "scale_honest_warps.py"), cases, build,
                    options=VerifyOptions(nonce=1, catch_errors=True))
    assert honest.passed, honest.summary(5)


def test_out_of_memory_on_the_last_performance_case_bare_judges_nothing(tmp_path):
    """Its inputs come beside the original's kept outputs there: out of memory is the machine's,
    and an exception in a user's process is no wrong result."""
    from dataclasses import replace
    path = tmp_path / "scale_oom_large.py"
    path.write_text(LATCH_PAST_THE_CORRECTNESS_SIZES.replace(
        "        n = n // 2                            # unwatched and large: half the work",
        "        raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 2 GiB')"))
    cases = FAMILIES["scale"][1] + [replace(spec_case("perf-big", "scale", T(20000), 0.5),
                                            role=CaseRole.PERFORMANCE, seeds=(0,))]
    verdict = verify(load(HERE / "scale_ref.py"), load(path), cases, build,
                     options=VerifyOptions(nonce=1, catch_errors=True))
    assert verdict.passed, verdict.summary(5)
