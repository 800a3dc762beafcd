"""streaming_reduction: a whole-row tl.sum becomes a loop over the row in chunks.

The paper's batched GEMV (examples/batched_gemv.py) is the case: rewritten, it must give the
original's values for row lengths that are not multiples of the chunk (and one shorter than a
chunk), keep the user's comments, and compile for sm_90 without the spills of the original.
Kernels outside the single-sum pattern are refused with the reason.
"""

from pathlib import Path

import pytest
import torch

import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.errors import TransformError
from tritonforge.transforms import get

STREAM = get("streaming_reduction")
EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples"
GEMV = (EXAMPLES / "batched_gemv.py").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def gemv64() -> str:
    return STREAM.apply(GEMV, chunk=64)


# ---------------------------------------------------------------- the rewrite

def test_gemv_rewrite_loops_over_the_row_and_keeps_comments(gemv64):
    out = gemv64
    assert "    for _tf_start in range(BLOCK_N, N, BLOCK_N):\n" in out
    assert "        _tf_offs_n = _tf_start + tl.arange(0, BLOCK_N)\n" in out
    assert "        _tf_acc += tl.sum(_tf_a.to(tl.float32) * _tf_x.to(tl.float32), axis=2)\n" \
        in out
    assert "    y = _tf_acc.to(_tf_part.dtype)      # [1, BLOCK_M]\n" in out
    assert "BLOCK_M=BLOCK_M, BLOCK_N=min(64, BLOCK_N))" in out
    assert "    BLOCK_N = triton.next_power_of_2(N)\n" in out      # the host value stays
    for line in GEMV.splitlines():              # every comment of the user's, once
        if "#" in line:
            comment = line[line.index("#"):]
            assert out.count(comment) == GEMV.count(comment), comment
    # the first chunk is the original code, untouched
    kept = [ln for ln in GEMV.splitlines() if "tl.sum(" not in ln and "BLOCK_N=BLOCK_N" not in ln]
    assert all(ln in out.splitlines() for ln in kept)


def test_applies_names_the_kernel_and_the_row_length():
    v = STREAM.applies(analyze_source(GEMV), chunk=64)
    assert v.ok and v.targets == ("bgemv_kernel over BLOCK_N (row length N)",)


@pytest.mark.parametrize("n", [40, 100, 257, 300])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_gemv_same_values_as_the_original(load, gemv64, n, dtype):
    original, streamed = load(GEMV), load(gemv64)
    g = torch.Generator().manual_seed(n)
    a = torch.randn(3, 37, n, generator=g).to(dtype)
    x = torch.randn(3, n, generator=g).to(dtype)
    want, got = original.batched_gemv(a, x), streamed.batched_gemv(a, x)
    assert got.dtype == want.dtype and got.shape == want.shape
    # fp32 accumulation in both; only the order of the sum differs (chunks of 64)
    tol = {"rtol": 1e-5, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1e-3, "atol": 1e-3}
    torch.testing.assert_close(got, want, **tol)


def test_inline_sum_and_inline_next_power_of_2(load):
    out = STREAM.apply(S.ROW_SQNORM, chunk=64)
    assert "BLOCK_N=min(64, triton.next_power_of_2(n_cols)))" in out
    assert "    tl.store(out_ptr + row, _tf_acc.to(_tf_part.dtype))\n" in out
    assert "cols = tl.arange(0, BLOCK_N)  # the whole row at once\n" in out
    S.assert_same_results(load, "ROW_SQNORM", out, rtol=1e-5, atol=1e-4)


def test_sixteen_bit_sums_accumulate_in_fp32_and_keep_their_type(load):
    src = S.ROW_SQNORM.replace("tl.sum(x * x, axis=0)", "tl.sum(x * x, axis=0).to(tl.float32)")
    src = src.replace("    tl.store(",
                      "    # fp16 summand, summed in fp16 by the original\n    tl.store(")
    out = STREAM.apply(src, chunk=64)
    assert "_tf_acc = (_tf_part.to(tl.float32) if _tf_part.dtype.is_fp16()" in out
    x = (torch.randn(5, 1000, generator=torch.Generator().manual_seed(1)) / 4).to(torch.float16)
    want = (x.float() * x.float()).sum(dim=1)
    got = load(out).row_sqnorm(x)
    torch.testing.assert_close(got, want, rtol=2e-3, atol=1e-2)


# ---------------------------------------------------------------- refusals

_BASE = '''import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, w_ptr, out_ptr, z_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    cols = offs[None, :]
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0)
    y = tl.sum(x * w, axis=1)
    tl.store(out_ptr + row + tl.arange(0, 1), y)


def run(x, w):
    out = torch.empty(x.shape[0], dtype=torch.float32)
    z = torch.empty_like(x)
    N = x.shape[1]
    BLOCK_N = triton.next_power_of_2(N)
    k[(x.shape[0],)](x, w, out, z, N, BLOCK_N=BLOCK_N)
    return out
'''


def test_the_refusal_template_itself_applies(load):
    out = STREAM.apply(_BASE, chunk=16)
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(5, 70, generator=g), torch.randn(70, generator=g)
    torch.testing.assert_close(load(out).run(x, w), load(_BASE).run(x, w), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("launch", ["k[(x.shape[0],)](x, w, out, z, N, BLOCK_N)",
                                    "k[(x.shape[0],)](x, w, out, z, N, triton.next_power_of_2(N))"])
def test_block_passed_by_position(load, launch):
    src = _BASE.replace("k[(x.shape[0],)](x, w, out, z, N, BLOCK_N=BLOCK_N)", launch)
    out = STREAM.apply(src, chunk=16)
    assert launch.replace("N, BLOCK_N)", "N, min(16, BLOCK_N))").replace(
        "N, triton.next_power_of_2(N))", "N, min(16, triton.next_power_of_2(N)))") in out
    g = torch.Generator().manual_seed(4)
    x, w = torch.randn(3, 50, generator=g), torch.randn(50, generator=g)
    torch.testing.assert_close(load(out).run(x, w), load(src).run(x, w), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("old, new, reason", [
    # a store that uses the offsets
    ("    y = tl.sum(x * w, axis=1)\n",
     "    tl.store(z_ptr + row * N + cols, x, mask=cols < N)\n    y = tl.sum(x * w, axis=1)\n",
     "uses the row offsets outside tl.load"),
    # two reductions
    ("    y = tl.sum(x * w, axis=1)\n",
     "    y = tl.sum(x * w, axis=1)\n    y2 = tl.sum(x, axis=1)\n", "a second tl.sum"),
    ("    y = tl.sum(x * w, axis=1)\n",
     "    m = tl.max(x, axis=1)\n    y = tl.sum(x * w, axis=1) / m\n", "another reduction"),
    # a sum over another axis
    ("tl.sum(x * w, axis=1)", "tl.sum(x * w, axis=0)",
     "sums over axis 0, but the row of tl.arange(0, BLOCK_N) runs along axis 1"),
    # padding lanes that would not add zero
    ("mask=cols < N, other=0.0)\n    w", "mask=cols < N, other=-1.0)\n    w", "no other=0"),
    ("tl.sum(x * w, axis=1)", "tl.sum(x + 1.0, axis=1)", "not zero where the mask is off"),
    # a row load that is not masked by the row length, and offsets used as values
    ("w = tl.load(w_ptr + cols, mask=cols < N, other=0.0)", "w = tl.load(w_ptr + cols)",
     "without a mask"),
    ("tl.sum(x * w, axis=1)", "tl.sum(x * cols, axis=1)", "uses the row offsets as values"),
    # BLOCK_N used beyond its tl.arange
    ("y = tl.sum(x * w, axis=1)", "y = tl.sum(x * w, axis=1) / BLOCK_N",
     "uses BLOCK_N 2 times"),
    # the row inside control flow
    ("    y = tl.sum(x * w, axis=1)\n",
     "    if row > 0:\n        w = w * 2.0\n    y = tl.sum(x * w, axis=1)\n", "an `if` statement"),
    # a parameter reassigned from the offsets (the chunk copy would read the new value)
    ("    x = tl.load(x_ptr + row * N + cols,",
     "    x_ptr = x_ptr + row * N + cols\n    x = tl.load(x_ptr,",
     "assigns its parameter x_ptr from the row"),
])
def test_refusals_in_the_body_say_why(old, new, reason):
    assert old in _BASE
    src = _BASE.replace(old, new)
    v = STREAM.applies(analyze_source(src), chunk=64)          # applies reads the body too
    assert not v.ok and reason in v.reason, v.reason
    with pytest.raises(TransformError) as exc:
        STREAM.apply(src, chunk=64)
    assert reason in str(exc.value), str(exc.value)
    assert str(exc.value).startswith("streaming_reduction: k: ")


def test_applies_checks_the_body_and_agrees_with_apply():
    src = _BASE.replace("tl.sum(x * w, axis=1)", "tl.sum(x * w, axis=0)")
    v = STREAM.applies(analyze_source(src), chunk=64)
    assert not v.ok and "sums over axis 0" in v.reason
    good = analyze_source(_BASE)
    assert STREAM.applies(good, chunk=64).targets == ("k over BLOCK_N (row length N)",)
    # an analysis without its text (older callers) falls back to screening the launches
    from dataclasses import replace
    assert STREAM.applies(replace(analyze_source(src), source=""), chunk=64).ok


@pytest.mark.parametrize("old, new, params, reason", [
    ("BLOCK_N = triton.next_power_of_2(N)", "BLOCK_N = 1024", {},
     "not triton.next_power_of_2(N)"),
    ("BLOCK_N = triton.next_power_of_2(N)", "BLOCK_N = triton.next_power_of_2(N - 1)", {},
     "no kernel argument is passed `N - 1`"),
    ("", "", {"chunk": 100}, "power of two"),
    ("offs = tl.arange(0, BLOCK_N)", "offs = row * BLOCK_N + tl.arange(0, BLOCK_N)", {},
     "no whole-row offsets"),
])
def test_refusals_at_the_launch_say_why(old, new, params, reason):
    src = _BASE.replace(old, new) if old else _BASE
    v = STREAM.applies(analyze_source(src), **{"chunk": 64, **params})
    assert not v.ok and reason in v.reason, v.reason


def test_a_row_length_reassigned_before_the_launch_is_refused():
    src = _BASE.replace("    k[(x.shape", "    N = N + 0\n    k[(x.shape")
    with pytest.raises(TransformError, match="N is assigned more than once in run"):
        STREAM.apply(src, chunk=64)


# ---------------------------------------------------------------- sm_90, no GPU

def test_rewrite_compiles_for_sm90_without_spills(tmp_path, gemv64):
    from tritonforge.profile.static import CompileRequest, KernelSignature, compile_many

    types = (("a_ptr", "*fp16"), ("x_ptr", "*fp16"), ("y_ptr", "*fp16"), ("M", "i32"),
             ("N", "i32"), ("stride_ab", "i32"), ("stride_am", "i32"), ("stride_xb", "i32"),
             ("stride_yb", "i32"), ("BLOCK_M", "constexpr"), ("BLOCK_N", "constexpr"))
    paths = {}
    for name, text in (("original", GEMV), ("streamed", STREAM.apply(GEMV, chunk=256))):
        paths[name] = tmp_path / f"gemv_{name}.py"
        paths[name].write_text(text, encoding="utf-8")
    div = ("a_ptr", "x_ptr", "y_ptr", "N", "stride_ab", "stride_am", "stride_xb", "stride_yb")
    # N = 8192 at launch: BLOCK_N = 8192 for the original, min(256, 8192) for the rewrite
    reqs = [CompileRequest(str(paths[n]), "bgemv_kernel", KernelSignature(
        types, (("BLOCK_M", 4), ("BLOCK_N", b)), div)) for n, b in (("original", 8192),
                                                                     ("streamed", 256))]
    original, streamed = compile_many(reqs, isolate=True)
    assert original.error is None and streamed.error is None, (original.error, streamed.error)
    # measured (triton 3.6, sm_90): original 255 registers + 608 B of spills; streamed 32, none
    assert streamed.registers is not None and original.registers is not None
    assert streamed.spills == 0 and streamed.registers < original.registers
    assert original.spills is not None


# ---------------------------------------------------------------- the rule engine

def _diagnosis(*kinds: str):
    from tritonforge.model import Bound, Diagnosis, Hint

    return Diagnosis(Bound.MEMORY, "register spills",
                     hints=tuple(Hint(k, "test", (), 0.8) for k in kinds))


@pytest.mark.parametrize("kinds, proposed", [
    (("avoid_spills",), True),
    (("reduce_registers",), True),
    (("more_parallelism", "vectorize_accesses"), False),
    ((), False),
])
def test_rules_propose_streaming_only_when_registers_are_the_problem(kinds, proposed):
    from tritonforge.search.rules import RuleProposer

    moves = RuleProposer().moves(GEMV, _diagnosis(*kinds) if kinds else None)
    streaming = [m for m in moves if m.transform == "streaming_reduction"]
    assert bool(streaming) == proposed
    if proposed:      # among the first moves (larger BLOCK_M tiles score close to it)
        assert "streaming_reduction" in [m.transform for m in moves[:4]]


def test_rules_turn_the_move_into_a_candidate_for_the_gemv():
    from tritonforge.model import Candidate, HardwareInfo, ProposalContext
    from tritonforge.search.rules import RuleProposer
    from tritonforge.tasks.loader import task_from_file

    task = task_from_file(EXAMPLES / "batched_gemv.py")
    ctx = ProposalContext(task, Candidate(task.source, "original"), 1, HardwareInfo("cpu", True),
                          diagnosis=_diagnosis("avoid_spills"), budget=4)
    cands = [c for c in RuleProposer().propose(ctx) if c.origin == "rules:streaming_reduction"]
    assert len(cands) == 1
    assert cands[0].source == STREAM.apply(task.source, chunk=256)
