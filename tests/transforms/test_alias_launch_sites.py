"""Launches through a local alias (``fx = a if c else b``; ``fx[grid](...)``): the analysis sees
one site per kernel the alias may be, launch-side transforms edit the shared call only where the
change suits whichever kernel runs (refusing otherwise, with the reason), and the rule proposer
ranks the kernel that runs first."""

import pytest
import tf_alias_sample as S
import torch
from tritonforge.analyze import analyze_source
from tritonforge.errors import TransformError
from tritonforge.transforms import get


def _kernels(src):
    return [(s.kernel, s.alias, s.alias_kernels) for s in analyze_source(src).launch_sites]


def test_an_alias_call_is_a_launch_site_of_each_kernel_it_may_be():
    a = analyze_source(S.ALIAS_ROWS)
    scaled, plain, grad = a.launch_sites
    assert (scaled.kernel, plain.kernel, grad.kernel) == ("_scaled_rows", "_plain_rows",
                                                          "_rows_grad")
    assert scaled.alias == plain.alias == "fx" and grad.alias is None
    assert scaled.alias_kernels == plain.alias_kernels == ("_scaled_rows", "_plain_rows")
    assert scaled.span == plain.span and scaled.function == plain.function == "row_norm"
    assert plain.alias_partners == ("_scaled_rows",) and grad.alias_partners == ()
    assert a.same_call(plain) == (scaled,) and a.same_call(grad) == ()
    assert a.sites_of("_plain_rows") == (plain,)
    # arguments bind to the kernel's own parameters, options are read as for a direct launch
    assert plain.arg_for("eps").source == "eps" and plain.knobs.num_warps == 4
    assert "row_norm" in a.entry_candidates and not a.notes


@pytest.mark.parametrize("binding, expect", [
    ("fx = _plain_rows", [("_plain_rows", "fx", ("_plain_rows",))]),
    ("fx = _plain_rows if offset else (_scaled_rows if eps else _plain_rows)",
     [("_plain_rows", "fx", ("_plain_rows", "_scaled_rows")),
      ("_scaled_rows", "fx", ("_plain_rows", "_scaled_rows"))]),
    # assigned twice, computed, or a loop variable: no single binding, unresolved as before
    ("fx = _plain_rows\n    if offset:\n        fx = _scaled_rows", []),
    ("fx = {True: _scaled_rows}.get(offset, _plain_rows)", []),
    ("fx = _scaled_rows if offset else make_kernel()", []),
])
def test_only_a_single_plain_binding_resolves(binding, expect):
    src = S.ALIAS_ROWS.replace("fx = _scaled_rows if offset else _plain_rows", binding)
    assert _kernels(src)[:-1] == expect
    assert _kernels(src)[-1][0] == "_rows_grad"


def test_a_parameter_named_like_the_alias_is_not_resolved():
    src = S.ALIAS_ROWS.replace("def row_norm(x, w, offset=False, eps=1e-6):",
                               "def row_norm(x, w, fx, offset=False, eps=1e-6):")
    assert [k for k, _, _ in _kernels(src)] == ["_rows_grad"]


def _rows(module, offset):
    torch.manual_seed(0)
    x, w = torch.randn(5, 37), torch.randn(37)
    return module.row_norm(x, w, offset=offset)


def test_launch_params_at_an_alias_call_runs_with_identical_results(load):
    a = analyze_source(S.ALIAS_ROWS)
    v = get("launch_params").applies(a, num_warps=8, site=1)
    assert v.ok and v.targets == ("site 1 (_plain_rows, through fx)",)
    out = get("launch_params").apply(S.ALIAS_ROWS, a, num_warps=8, site=1)
    assert "        BLOCK=BLOCK,\n        num_warps=8,\n    )\n" in out
    assert out.replace("num_warps=8", "num_warps=4") == S.ALIAS_ROWS    # only that call
    after = analyze_source(out)
    assert [s.knobs.num_warps for s in after.launch_sites[:2]] == [8, 8]   # whichever runs
    old, new = load(S.ALIAS_ROWS), load(out)
    for offset in (False, True):
        assert torch.equal(_rows(old, offset), _rows(new, offset))
    # every site at once: the shared call is edited once, the direct one too
    both = get("launch_params").apply(S.ALIAS_ROWS, a, num_warps=2)
    assert both.count("num_warps=2") == 2 and "num_warps=4" not in both


def test_launch_options_refused_where_the_other_kernel_is_autotuned():
    src = S.ALIAS_TILES.replace(
        "@triton.jit\ndef _twice",
        "@triton.autotune(configs=[triton.Config({}, num_warps=2), "
        "triton.Config({}, num_warps=4)], key=['n'])\n@triton.jit\ndef _twice")
    a = analyze_source(src)
    twice, add_one = a.launch_sites
    v = get("launch_params").applies(a, num_warps=8, site=add_one.index)
    assert not v.ok and "`kernel` may also be _twice, which is autotuned" in v.reason
    # the autotuned kernel's own options live in its configs, not at the call
    out = get("launch_params").apply(src, a, num_warps=8, site=twice.index)
    assert "triton.Config({}, num_warps=8)" in out
    assert "kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)\n" in out


def _bump(module, double):
    x = torch.arange(300, dtype=torch.float32)
    return module.bump(x, double=double)


def test_constexpr_at_an_alias_call_changes_it_for_every_kernel_it_may_be(load):
    a = analyze_source(S.ALIAS_TILES)
    t = get("constexpr_override")
    assert t.applies(a, name="BLOCK", value=128).targets == ("BLOCK = ... in bump",)
    out = t.apply(S.ALIAS_TILES, a, name="BLOCK", value=128, site=1)
    assert "    BLOCK = 128\n" in out and out.count("128") == 1
    old, new = load(S.ALIAS_TILES), load(out)
    for double in (False, True):
        assert torch.equal(_bump(old, double), _bump(new, double))


def test_constexpr_refused_when_the_other_kernel_cannot_take_it():
    # _twice holds the whole input in one block (BLOCK is no tile size there)
    head, tail = S.ALIAS_TILES.split("def _twice", 1)
    tail = tail.replace("offs = pid * BLOCK + tl.arange(0, BLOCK)", "offs = tl.arange(0, BLOCK)")
    src = head + "def _twice" + tail
    a = analyze_source(src)
    v = get("constexpr_override").applies(a, name="BLOCK", value=128, kernel="_add_one")
    assert not v.ok
    assert "launches through `kernel`, which may also be _twice" in v.reason
    assert "not a tile size" in v.reason
    with pytest.raises(TransformError, match="may also be _twice"):
        get("constexpr_override").apply(src, a, name="BLOCK", value=128, kernel="_add_one")


def test_a_wrapper_parameter_pinned_for_an_alias_call_suits_both_kernels(load):
    src = S.ALIAS_TILES.replace("def bump(x, double=False):", "def bump(x, double=False, "
                                "BLOCK=64):").replace("    BLOCK = 64\n", "")
    a = analyze_source(src)
    t = get("param_block_override")
    v = t.applies(a, name="BLOCK", value=128)
    assert v.ok and v.targets == ("BLOCK in bump (launches 0, 1)",)
    out = t.apply(src, a, name="BLOCK", value=128)
    old, new = load(src), load(out)
    for double in (False, True):
        assert torch.equal(_bump(old, double), _bump(new, double))


@pytest.mark.parametrize("name, params", [
    ("autotune", {"kernel": "_add_one"}),
    ("persistent_grid", {"kernel": "_add_one"}),
])
def test_call_rewrites_that_would_reach_the_other_kernel_are_refused(name, params):
    v = get(name).applies(analyze_source(S.ALIAS_TILES), **params)
    assert not v.ok and "`kernel` may also be _twice" in v.reason


def test_rows_and_streaming_refuse_the_alias_call_but_not_the_direct_one():
    a = analyze_source(S.ALIAS_ROWS)
    for name, params in (("rows_per_program", {"elements": 2048}),
                         ("streaming_reduction", {"chunk": 256})):
        assert not get(name).applies(a, kernel="_plain_rows", **params).ok
        reason = get(name).applies(a, kernel="_plain_rows", **params).reason
        assert "`fx` may also be _scaled_rows" in reason
    assert get("rows_per_program").applies(a, kernel="_rows_grad", elements=2048).ok


def test_the_proposer_ranks_the_kernel_that_ran_first():
    from tritonforge.search.rules import COLD_SITE_PENALTY, RuleProposer

    moves = RuleProposer().moves(S.ALIAS_ROWS, None, frozenset({"_plain_rows"}))
    at = [(dict(m.params)["site"], m.score) for m in moves if "site" in dict(m.params)]
    hot = [score for site, score in at if site == 1]
    cold = [score for site, score in at if site != 1]
    assert hot and cold and {site for site, _ in at} == {0, 1, 2}
    assert at[0][0] == 1 and min(hot) > max(cold)       # every move of the kernel that ran
    assert max(cold) <= max(hot) - COLD_SITE_PENALTY + 1e-9
    # the alias call's kernels both have moves: neither is lost behind the other
    plain = RuleProposer().moves(S.ALIAS_ROWS, None)
    assert {dict(m.params).get("site") for m in plain[:6]} >= {0, 1}
