"""Rule repairs (search.repair, search.repair_launch) of candidates that fail the way faster
configs fail on sm_90, judged end to end: ``repair_candidate`` with an evaluator that compiles
each fix for sm_90 (no GPU: Triton's compiler and ptxas), raises Triton's own OutOfResources text
for shared memory over the device, and runs the fix against the original on the interpreter."""

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parent))

import cs_samples  # noqa: E402
from test_prune import MATMUL  # noqa: E402

from tritonforge.analyze import analyze_source  # noqa: E402
from tritonforge.model import Candidate, HardwareInfo, ProposalContext, Status  # noqa: E402
from tritonforge.profile.limits import limits_for  # noqa: E402
from tritonforge.search.repair import repair_candidate, rule_repairs  # noqa: E402
from tritonforge.search.repair_launch import stages_at_launches  # noqa: E402

SM90 = limits_for(90)
SIG = {**{p: "*fp32" for p in ("a_ptr", "b_ptr", "c_ptr")},
       **{p: "i32" for p in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                             "stride_cm", "stride_cn")}}


def _matmul(m, n, k, stages="num_stages=4"):
    src = MATMUL.replace("BLOCK_M=64, BLOCK_N=64, BLOCK_K=32", f"BLOCK_M={m}, BLOCK_N={n}, BLOCK_K={k}")
    return src.replace("num_warps=4, num_stages=4", f"num_warps=4, {stages}" if stages else "num_warps=4")


def _context(source):
    return ProposalContext(None, Candidate(source, "original"), 1,
                           HardwareInfo("NVIDIA H100", False, 132, capability="9.0"))


def _sm90_then_interpreter(tmp_path, load, original_out, run):
    """evaluate(candidate) -> (status, error): compile launch 0's config for sm_90, refuse what
    sm_90 cannot load with Triton's OutOfResources text, else run it and compare."""
    from triton.runtime.errors import OutOfResources

    from tritonforge.profile.static import compile_stats

    seen = []

    def evaluate(cand):
        import torch

        seen.append(cand)
        path = tmp_path / f"c{len(seen)}.py"
        path.write_text(cand.source)
        knobs = analyze_source(cand.source).knobs[0]
        consts = {k.name: k.value for k in knobs.constexprs}
        stats = compile_stats(str(path), knobs.kernel, SIG, consts, num_warps=knobs.num_warps or 4,
                              num_stages=knobs.num_stages or 3, isolate=True)
        if stats.error:
            return Status.COMPILE_ERROR, stats.error
        if stats.shared_bytes > SM90.shared_per_block:
            return Status.COMPILE_ERROR, str(OutOfResources(stats.shared_bytes,
                                                            SM90.shared_per_block, "shared memory"))
        try:
            torch.testing.assert_close(run(load(cand.source)), original_out)
        except AssertionError as exc:
            return Status.MISMATCH, str(exc)
        return Status.OK, ""

    return evaluate, seen


def _mm_inputs():
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.randn(70, 40, generator=g), torch.randn(40, 50, generator=g)


@pytest.mark.slow
def test_a_dot_tile_below_the_sm90_minimum_is_raised_and_verified(tmp_path, load):
    """Triton 3.6 refuses tl.dot with K < 16 on sm_90 ("Input shapes should have M >= 1, N >= 1
    and K >= 16"; the interpreter does not): the repair raises the tile to 16."""
    a, b = _mm_inputs()
    run = lambda m: m.matmul(a, b)  # noqa: E731
    evaluate, seen = _sm90_then_interpreter(tmp_path, load, run(load(MATMUL)), run)
    bad = Candidate(_matmul(64, 64, 8), "config-search")
    status, error = evaluate(bad)
    assert status is Status.COMPILE_ERROR and "K >= 16" in error
    outcome = repair_candidate(bad, status, error, [], _context(MATMUL), 3, evaluate)
    assert outcome.repaired, outcome
    assert [a.origin for a in outcome.attempts] == ["repair:rules:dot-min-16"]
    assert "BLOCK_K=16" in outcome.final.source


@pytest.mark.slow
def test_shared_memory_over_sm90_is_repaired_with_fewer_stages_and_verified(tmp_path, load):
    a, b = _mm_inputs()
    run = lambda m: m.matmul(a, b)  # noqa: E731
    evaluate, _ = _sm90_then_interpreter(tmp_path, load, run(load(MATMUL)), run)
    bad = Candidate(_matmul(64, 64, 128), "config-search")      # ~256 KiB at 4 stages
    status, error = evaluate(bad)
    assert status is Status.COMPILE_ERROR and "out of resource: shared memory" in error
    outcome = repair_candidate(bad, status, error, [], _context(MATMUL), 3, evaluate)
    assert outcome.repaired and outcome.attempts[0].origin == "repair:rules:fewer-stages"
    assert "num_stages=2" in outcome.final.source


@pytest.mark.slow
def test_shared_memory_with_no_num_stages_written_gets_one_at_the_launch(tmp_path, load):
    """128x64 tiles with a K tile of 128 at Triton's default 3 stages: ~288 KiB; at 2, ~192."""
    a, b = _mm_inputs()
    run = lambda m: m.matmul(a, b)  # noqa: E731
    evaluate, _ = _sm90_then_interpreter(tmp_path, load, run(load(MATMUL)), run)
    bad = Candidate(_matmul(128, 64, 128, stages=None), "config-search")
    assert "num_stages" not in bad.source
    status, error = evaluate(bad)
    assert status is Status.COMPILE_ERROR and "shared memory" in error
    outcome = repair_candidate(bad, status, error, [], _context(MATMUL), 3, evaluate)
    assert outcome.repaired, outcome
    assert outcome.attempts[0].origin == "repair:rules:fewer-stages"
    assert "num_stages=2" in outcome.final.source


def test_a_non_power_of_two_arange_is_rounded_up_and_verified(load):
    import torch

    x = cs_samples.inputs("ROWOP")[0]
    expected = load(cs_samples.ROWOP).fused_row(x.clone())
    bad = Candidate(cs_samples.ROWOP.replace("CHUNK=32", "CHUNK=48"), "config-search")

    def evaluate(cand):
        try:
            got = load(cand.source).fused_row(x.clone())
        except Exception as exc:  # noqa: BLE001 - the interpreter's compile error
            return Status.COMPILE_ERROR, f"{type(exc).__name__}: {exc}"
        torch.testing.assert_close(got, expected)
        return Status.OK, ""

    status, error = evaluate(bad)
    assert status is Status.COMPILE_ERROR and "power of 2" in error
    outcome = repair_candidate(bad, status, error, [], _context(cs_samples.ROWOP), 3, evaluate)
    assert outcome.repaired and "CHUNK=64" in outcome.final.source
    assert [a.origin for a in outcome.attempts] == ["repair:rules:pow2-blocks"]


def test_rule_repairs_read_the_triton36_messages():
    src = _matmul(64, 64, 8)
    [fix] = rule_repairs(Candidate(src, "x"), Status.COMPILE_ERROR,
                         "AssertionError: Input shapes should have M >= 1, N >= 1 and K >= 32")
    assert "BLOCK_K=32" in fix.source          # 8-bit operands need 32
    [fix] = rule_repairs(Candidate(src.replace("num_warps=4", "num_warps=6"), "x"),
                         Status.COMPILE_ERROR, "AssertionError: num_warps must be a power of 2")
    assert "num_warps=4" in fix.source and fix.origin == "repair:rules:pow2-warps"


def test_no_num_stages_is_written_where_no_loop_loads():
    assert stages_at_launches(Candidate(cs_samples.STENCIL, "x"), 2) is None
    fix = stages_at_launches(Candidate(cs_samples.GATHER, "x"), 2)
    assert fix is not None and "num_stages=2" in fix.source


def test_a_problem_dimension_is_no_tile_to_shrink():
    """HEAD_DIM sizes a tl.arange but describes the problem: a shared-memory repair halves the
    tile that steps the loop, never it."""
    from tritonforge.search.repair import find_literals

    src = cs_samples.ROWOP.replace("CHUNK: tl.constexpr):", "CHUNK: tl.constexpr, HEAD_DIM: tl.constexpr):") \
        .replace("    row = tl.program_id(0)\n", "    row = tl.program_id(0)\n    h = tl.arange(0, HEAD_DIM)\n") \
        .replace("CHUNK=32,", "CHUNK=32, HEAD_DIM=64,")
    names = {x.name for x in find_literals(src) if x.kind == "block"}
    assert "CHUNK" in names and "HEAD_DIM" not in names


def test_a_rounds_repair_verifies_its_fixes_on_the_cases_asked_while_there_is_time(tmp_path):
    """``RoundStages._repair_failed`` sends each fix to the pool on the case ids it is given (the
    round's early tiers: rounds.py passes those, never the deferred tier's large cases); once
    ``in_time()`` says no more work may start, no failed candidate is taken up: nothing is
    proposed, sent or repaired."""
    from types import SimpleNamespace

    from tritonforge.config import Settings
    from tritonforge.model import DeviceInfo, Evaluation, Failure, VariantResult
    from tritonforge.search.stages import RoundStages

    asked = []

    def evaluate(task, variants, **kw):
        asked.append(kw["case_ids"])
        return Evaluation(task.name, tuple(VariantResult(v.name, v.hash, Status.OK)
                                           for v in variants), DeviceInfo("cpu", True))

    task = SimpleNamespace(name="t")
    bad = Candidate(_matmul(64, 64, 8), "config-search")
    failed = VariantResult("candidate", bad.hash, Status.COMPILE_ERROR, Failure(
        Status.COMPILE_ERROR, "AssertionError: Input shapes should have M >= 1, N >= 1 and "
        "K >= 16"))
    ev = SimpleNamespace(evaluate=evaluate)
    for in_time, fixed in ((lambda: True, 1), (lambda: False, 0)):
        asked.clear()
        st = RoundStages(task, Settings(device="cpu"), [ev], [], None, lambda s: None, 16, True)
        history = []
        got = st._repair_failed(task, Candidate(MATMUL, "original"), [bad], {bad.hash: failed},
                                ("test", "p0"), _context(MATMUL), history, in_time)
        assert len(got) == fixed
        assert asked == ([("test", "p0")] if fixed else [])
        if not fixed:
            assert history == []           # no fix proposed once the time is spent


def test_a_fix_not_run_for_want_of_time_ends_the_repair():
    """A SKIPPED fix (the round's time spent) is no error to repair from: the repair stops
    there instead of asking for the next fix."""
    bad = Candidate(_matmul(64, 64, 8), "config-search")
    sent = []

    def evaluate(fix):
        sent.append(fix)
        return Status.SKIPPED, "not verified: the round's time for repairs is spent"
    outcome = repair_candidate(bad, Status.COMPILE_ERROR, "AssertionError: Input shapes should "
                               "have M >= 1, N >= 1 and K >= 16", [], _context(MATMUL), 3, evaluate)
    assert len(sent) == 1 and not outcome.repaired and "stopped after 1 attempt" in outcome.stop_reason
