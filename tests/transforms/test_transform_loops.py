"""hoist_invariant_loads and static_unroll (transforms.loops): what they rewrite, what they
refuse and why, the rewrite against the original on the interpreter, and an sm_90 compile."""

import pytest

import tf_samples as S
from tritonforge.analyze import analyze_source
from tritonforge.transforms import get

HOIST, UNROLL = get("hoist_invariant_loads"), get("static_unroll")


def test_an_invariant_load_moves_in_front_of_the_loop_with_a_guard():
    out = HOIST.apply(S.HOIST_LOOP, analyze_source(S.HOIST_LOOP))
    before_loop, loop = out.split("    for r in range(")
    assert "w = tl.load(w_ptr + cols, mask=(mask) & ((pid * ROWS) < (tl.minimum(" in before_loop
    assert ".to(tl.float32)" in before_loop
    assert "w = tl.load" not in loop and "x = tl.load(x_ptr + r * stride" in loop


def test_hoisting_gives_the_same_results_even_where_the_loop_never_runs(load):
    out = HOIST.apply(S.HOIST_LOOP, analyze_source(S.HOIST_LOOP))
    S.assert_same_results(load, "HOIST_LOOP", out, rtol=0, atol=0)


@pytest.mark.parametrize("change, why", [
    # the loaded pointer is stored through in the loop: the load may see the loop's own writes
    (("tl.store(out_ptr + r * stride", "tl.store(w_ptr + r * stride"), "stores through"),
    # the load reads the loop variable: it changes every iteration
    (("tl.load(w_ptr + cols,", "tl.load(w_ptr + r * 0 + cols,"), "no loop-invariant"),
    # the value is used after the loop: a loop that never runs would leave another value there
    (("        tl.store(out_ptr + r * stride + cols, x * w, mask=mask)\n",
      "        tl.store(out_ptr + r * stride + cols, x * w, mask=mask)\n    w = w + 1\n"),
     "used outside the loop"),
    # a negative step would make "lo < hi" mean "the loop does not run"
    (("range(pid * ROWS, tl.minimum(pid * ROWS + ROWS, n_rows))",
      "range(pid * ROWS, tl.minimum(pid * ROWS + ROWS, n_rows), n_cols)"), "positive step"),
])
def test_hoisting_refuses_what_it_cannot_prove(change, why):
    src = S.HOIST_LOOP.replace(*change)
    assert src != S.HOIST_LOOP
    verdict = HOIST.applies(analyze_source(src))
    assert not verdict.ok and why in verdict.reason


def test_a_short_constant_loop_becomes_a_static_range(load):
    a = analyze_source(S.TAPS_LOOP)
    out = UNROLL.apply(S.TAPS_LOOP, a, max_trips=16)
    assert "for t in tl.static_range(TAPS):" in out
    S.assert_same_results(load, "TAPS_LOOP", out, rtol=0, atol=0)
    assert not UNROLL.applies(a, max_trips=3).ok          # 4 taps: over the limit


def test_unrolling_refuses_unknown_or_runtime_bounds():
    runtime = S.TAPS_LOOP.replace("range(TAPS)", "range(n // 256)")
    assert "not known constants" in UNROLL.applies(analyze_source(runtime)).reason
    assert not UNROLL.applies(analyze_source(S.HOIST_LOOP)).ok


@pytest.mark.slow
def test_both_rewrites_compile_for_sm90(tmp_path):
    hoisted = HOIST.apply(S.HOIST_LOOP, analyze_source(S.HOIST_LOOP))
    S.assert_compiles_for_sm90(tmp_path / "h.py", hoisted, "scale_rows_kernel",
                               {"x_ptr": "*fp32", "w_ptr": "*fp32", "out_ptr": "*fp32",
                                "n_rows": "i32", "n_cols": "i32", "stride": "i32"},
                               {"ROWS": 4, "BLOCK_N": 64})
    unrolled = UNROLL.apply(S.TAPS_LOOP, analyze_source(S.TAPS_LOOP))
    S.assert_compiles_for_sm90(tmp_path / "u.py", unrolled, "taps_kernel",
                               {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                               {"TAPS": 4, "BLOCK": 128})


def test_the_rule_proposer_offers_both_where_they_apply():
    from tritonforge.search.rules import RuleProposer

    moves = {m.transform for m in RuleProposer().moves(S.HOIST_LOOP, None)}
    assert "hoist_invariant_loads" in moves
    assert "static_unroll" in {m.transform for m in RuleProposer().moves(S.TAPS_LOOP, None)}
